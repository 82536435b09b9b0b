//! Velero-compatible archive format, manifest and object-store layout (filled by the Velero format work).
