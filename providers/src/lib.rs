//! Object storage for Granary: one trait, implemented by the `local`, `aws`, `azure`
//! and `gcp` providers (each a cargo feature). The content arrives with the providers
//! issue; the foundation only needs the crate to exist.
