//! (filled by the API work)
