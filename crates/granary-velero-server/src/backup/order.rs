//! Item order within a resource: `spec.orderedResources` maps a resource's plural name
//! (`pods`, `persistentvolumes`; Velero looks it up by the bare plural) to a
//! comma-separated list of `namespace/name` (or `name` for cluster-scoped resources).
//! Those items are backed up first, in that order; the rest follow in list order
//! (Velero's `sortResourcesByOrder`). Resource order itself is [`super::catalog`]'s.

use std::collections::BTreeMap;

/// One item named by `orderedResources`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderedItem {
    /// `""` for cluster-scoped items.
    pub namespace: String,
    pub name: String,
    /// The entry as written (`ns/name` or `name`), for warnings and de-duplication.
    pub id: String,
}

/// The items `ordered` names for `resource`, in order, each once; empty entries are
/// skipped. For a namespaced resource an entry without `/` names no item Velero could
/// find (it compares `ns/name`), so it is kept with an empty namespace and will be
/// reported as not found.
pub fn ordered_items(
    ordered: Option<&BTreeMap<String, String>>,
    resource: &str,
    namespaced: bool,
) -> Vec<OrderedItem> {
    let Some(list) = ordered.and_then(|o| o.get(resource)) else {
        return Vec::new();
    };
    let mut out: Vec<OrderedItem> = Vec::new();
    for id in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if out.iter().any(|o| o.id == id) {
            continue;
        }
        let (namespace, name) = match id.split_once('/') {
            Some((ns, name)) if namespaced => (ns, name),
            _ => ("", id),
        };
        out.push(OrderedItem {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            id: id.to_owned(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_velero_order_strings() {
        let mut m = BTreeMap::new();
        m.insert("pods".to_string(), "ns1/b, ns1/a,,ns2/a,ns1/b".to_string());
        m.insert("persistentvolumes".to_string(), "pv2,pv1".to_string());
        let pods = ordered_items(Some(&m), "pods", true);
        let ids: Vec<&str> = pods.iter().map(|o| o.id.as_str()).collect();
        assert_eq!(ids, ["ns1/b", "ns1/a", "ns2/a"]);
        assert_eq!(
            (pods[2].namespace.as_str(), pods[2].name.as_str()),
            ("ns2", "a")
        );
        let pvs = ordered_items(Some(&m), "persistentvolumes", false);
        assert_eq!(
            pvs[0],
            OrderedItem {
                namespace: String::new(),
                name: "pv2".into(),
                id: "pv2".into()
            }
        );
        assert!(ordered_items(Some(&m), "configmaps", true).is_empty());
        assert!(ordered_items(None, "pods", true).is_empty());
    }
}
