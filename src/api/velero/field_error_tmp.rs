// TEMP: moves to api::common. Identical in shape to the `FieldError` that
// `src/api/common.rs` will define; at merge `velero/mod.rs` re-exports that one instead
// and this file is deleted.

/// One validation problem at one field path (e.g. `spec.backup.region`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

pub type FieldErrors = Vec<FieldError>;
