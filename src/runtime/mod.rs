//! Shared controller plumbing.
