//! `--object-selector` (docs/architecture.md#object-selector): a controller started with
//! a value only sees objects labelled `granary.gardener.cloud/instance=<value>` and puts
//! that label on everything it creates, so several Granary instances (e.g. tests side by
//! side on one real cluster) never act on each other's cluster-scoped objects.

use std::collections::BTreeMap;

/// The label that carries the instance value.
pub const INSTANCE_LABEL: &str = "granary.gardener.cloud/instance";

/// The instance a controller is limited to; `None` sees everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectSelector(Option<String>);

impl ObjectSelector {
    pub fn new(value: Option<String>) -> Self {
        ObjectSelector(value.filter(|v| !v.is_empty()))
    }

    pub fn value(&self) -> Option<&str> {
        self.0.as_deref()
    }

    /// The label selector for lists and watches (`None` when unrestricted).
    pub fn label_selector(&self) -> Option<String> {
        self.0.as_ref().map(|v| format!("{INSTANCE_LABEL}={v}"))
    }

    /// Combines the instance restriction with another label selector.
    pub fn and(&self, other: &str) -> Option<String> {
        match (self.label_selector(), other.is_empty()) {
            (None, true) => None,
            (None, false) => Some(other.to_string()),
            (Some(own), true) => Some(own),
            (Some(own), false) => Some(format!("{own},{other}")),
        }
    }

    /// True when an object with these labels belongs to this instance.
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        match &self.0 {
            None => true,
            Some(v) => labels.and_then(|l| l.get(INSTANCE_LABEL)) == Some(v),
        }
    }

    /// Puts the instance label on an object this controller creates.
    pub fn label(&self, labels: &mut BTreeMap<String, String>) {
        if let Some(v) = &self.0 {
            labels.insert(INSTANCE_LABEL.to_string(), v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unrestricted_and_restricted() {
        let all = ObjectSelector::new(None);
        assert_eq!(all.label_selector(), None);
        assert!(all.matches(None));
        assert_eq!(all.and("a=b"), Some("a=b".to_string()));
        assert_eq!(ObjectSelector::new(Some(String::new())), all);

        let mine = ObjectSelector::new(Some("t1".into()));
        assert_eq!(
            mine.label_selector().as_deref(),
            Some("granary.gardener.cloud/instance=t1")
        );
        assert_eq!(
            mine.and("x=y").as_deref(),
            Some("granary.gardener.cloud/instance=t1,x=y")
        );
        let mut labels = BTreeMap::new();
        assert!(!mine.matches(Some(&labels)));
        mine.label(&mut labels);
        assert!(mine.matches(Some(&labels)));
        assert!(!ObjectSelector::new(Some("t2".into())).matches(Some(&labels)));
    }
}
