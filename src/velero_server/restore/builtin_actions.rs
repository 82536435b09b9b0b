//! The built-in restore item actions.

use super::actions::RestoreItemAction;

/// The built-in actions, in the order they run.
pub fn builtin() -> Vec<Box<dyn RestoreItemAction>> {
    Vec::new()
}
