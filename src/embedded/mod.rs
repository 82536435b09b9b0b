//! The embedded Kubernetes API server (filled by the embedded-server work).
