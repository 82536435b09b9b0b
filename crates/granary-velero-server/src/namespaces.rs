//! Which namespaces a backup covers, for the queue's overlap test (as in Velero 1.18's
//! `backup_queue_controller`): two backups overlap when they can include a namespace in
//! common. A backup that includes every namespace (no includes, or `*`) covers every
//! namespace its excludes do not name, including ones created later, so it is kept as a
//! rule rather than expanded. Wildcard includes are expanded against the live namespaces,
//! as Velero resolves them.
//!
//! Patterns support `*` (any run of characters) and `?` (one character), the wildcards
//! namespace names can meet (names hold only `a-z0-9-`).

use std::collections::BTreeSet;

/// The namespaces a backup can include.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NamespaceScope {
    /// Every namespace but those matching `except`.
    All { except: Vec<String> },
    /// Exactly these.
    Listed(BTreeSet<String>),
}

/// Whether namespace name `name` matches `pattern` (`*`, `?`).
pub fn matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Iterative matching with one backtrack point for the last `*`: linear for the
    // patterns namespaces use, never exponential.
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(&c) if c == '?' || c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

fn is_pattern(s: &str) -> bool {
    s.contains(['*', '?'])
}

/// The scope of a backup with `includes`/`excludes` (`spec.includedNamespaces`,
/// `spec.excludedNamespaces`), wildcards expanded against `live` namespaces.
pub fn resolve(includes: &[String], excludes: &[String], live: &[String]) -> NamespaceScope {
    let excluded = |ns: &str| excludes.iter().any(|e| matches(e, ns));
    if includes.is_empty() || includes.iter().any(|i| i == "*") {
        return NamespaceScope::All {
            except: excludes.to_vec(),
        };
    }
    let mut out = BTreeSet::new();
    for include in includes {
        if is_pattern(include) {
            out.extend(live.iter().filter(|ns| matches(include, ns)).cloned());
        } else {
            out.insert(include.clone());
        }
    }
    out.retain(|ns| !excluded(ns));
    NamespaceScope::Listed(out)
}

/// A namespace both scopes can include, if any (`"*"` when both cover all namespaces).
pub fn overlap(a: &NamespaceScope, b: &NamespaceScope) -> Option<String> {
    use NamespaceScope::*;
    let covered = |except: &[String], ns: &str| !except.iter().any(|e| matches(e, ns));
    match (a, b) {
        (All { .. }, All { .. }) => Some("*".to_string()),
        (All { except }, Listed(s)) | (Listed(s), All { except }) => {
            s.iter().find(|ns| covered(except, ns)).cloned()
        }
        (Listed(x), Listed(y)) => x.intersection(y).next().cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn listed(items: &[&str]) -> NamespaceScope {
        NamespaceScope::Listed(items.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn wildcards() {
        assert!(matches("*", ""));
        assert!(matches("app-*", "app-1"));
        assert!(matches("app-?", "app-1"));
        assert!(!matches("app-?", "app-12"));
        assert!(matches("*-prod", "shop-prod"));
        assert!(matches("a*b*c", "axxbyyc"));
        assert!(!matches("a*b*c", "axxbyy"));
        assert!(!matches("app", "app-1"));
    }

    #[test]
    fn resolving_scopes() {
        let live = v(&["app-1", "app-2", "db", "kube-system"]);
        assert_eq!(
            resolve(&[], &v(&["kube-*"]), &live),
            NamespaceScope::All {
                except: v(&["kube-*"])
            }
        );
        assert!(matches!(
            resolve(&v(&["*"]), &[], &live),
            NamespaceScope::All { .. }
        ));
        assert_eq!(
            resolve(&v(&["app-*", "db", "later"]), &v(&["app-2"]), &live),
            listed(&["app-1", "db", "later"])
        );
    }

    #[test]
    fn overlaps() {
        let all = NamespaceScope::All { except: vec![] };
        let all_but_kube = NamespaceScope::All {
            except: v(&["kube-*"]),
        };
        assert_eq!(overlap(&all, &all_but_kube).as_deref(), Some("*"));
        assert_eq!(overlap(&all_but_kube, &listed(&["kube-system"])), None);
        assert_eq!(
            overlap(&all_but_kube, &listed(&["kube-system", "a"])).as_deref(),
            Some("a")
        );
        assert_eq!(
            overlap(&listed(&["ns1", "ns2"]), &listed(&["ns2", "ns3"])).as_deref(),
            Some("ns2")
        );
        assert_eq!(overlap(&listed(&["ns1"]), &listed(&["ns2"])), None);
        assert_eq!(overlap(&listed(&[]), &all), None);
    }

    proptest! {
        #[test]
        fn overlap_is_symmetric(
            a in proptest::collection::btree_set("[a-c]{1,2}", 0..4),
            b in proptest::collection::btree_set("[a-c]{1,2}", 0..4),
            except in proptest::collection::vec("[a-c*?]{1,2}", 0..2),
            a_all: bool,
        ) {
            let a = if a_all { NamespaceScope::All { except } } else { NamespaceScope::Listed(a) };
            let b = NamespaceScope::Listed(b);
            prop_assert_eq!(overlap(&a, &b).is_some(), overlap(&b, &a).is_some());
        }

        #[test]
        fn star_matches_everything(name in "[a-z0-9-]{0,20}") {
            prop_assert!(matches("*", &name));
            prop_assert!(matches(&name, &name));
        }
    }
}
