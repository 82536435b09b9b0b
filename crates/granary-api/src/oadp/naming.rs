//! The NACUUID: the one generated name that NAC uses as the Velero object's name, as
//! `status.veleroX.nacuuid` and as the origin label value.

use uuid::Uuid;

use super::MAXIMUM_NAC_OBJECT_NAME_LENGTH;

/// `<namespace>-<name>-<uuid>` cut to 63 characters as NAC does: when too long the
/// name is shortened first (to `25 - len(namespace)` characters); a namespace longer
/// than 25 characters is itself cut to 25 and the name dropped. Empty parts are left
/// out. The uuid is a parameter so the function stays pure; callers pass a v4 uuid.
/// `name` is the NAC object's own name, so never empty: [`nac_name_prefix`] holds for
/// every such name.
pub fn nac_object_name(namespace: &str, name: &str, uuid: &Uuid) -> String {
    let suffix = uuid.hyphenated().to_string();
    let join = |ns: &str, n: &str| {
        [ns, n, suffix.as_str()]
            .into_iter()
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join("-")
    };
    let full = join(namespace, name);
    if full.len() <= MAXIMUM_NAC_OBJECT_NAME_LENGTH {
        return full;
    }
    // Room left after the uuid, less the two delimiters around the name.
    let budget = MAXIMUM_NAC_OBJECT_NAME_LENGTH - suffix.len() - 2;
    if namespace.len() > budget {
        let ns: String = namespace.chars().take(budget).collect();
        return join(&ns, "");
    }
    let short_name: String = name.chars().take(budget - namespace.len()).collect();
    join(namespace, &short_name)
}

/// What every NACUUID made for an object of `namespace` starts with: the namespace (cut to
/// the 25 characters [`nac_object_name`] keeps of a long one) and a dash. Backups
/// imported from a namespace owner's own location must carry it, so a name planted in
/// their bucket can never be one an administrator or a schedule will use.
pub fn nac_name_prefix(namespace: &str) -> String {
    const KEPT: usize = MAXIMUM_NAC_OBJECT_NAME_LENGTH - 36 - 2;
    let kept: String = namespace.chars().take(KEPT).collect();
    format!("{kept}-")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uuid() -> Uuid {
        Uuid::parse_str("1a3d4da8-0f97-4117-a9c6-19e2c97d978a").unwrap()
    }

    proptest::proptest! {
        /// Every name made for a namespace's object starts with its prefix. An object's
        /// name is never empty; with an empty one, a namespace of exactly 26 characters
        /// would be kept whole (it fits in 63 with the uuid), as NAC keeps it.
        #[test]
        fn names_start_with_the_namespace_prefix(
            ns in "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?",
            name in "[a-z0-9][a-z0-9-]{0,79}",
        ) {
            let n = nac_object_name(&ns, &name, &uuid());
            proptest::prop_assert!(n.starts_with(&nac_name_prefix(&ns)), "{n} / {ns}");
        }
    }

    #[test]
    fn reference_example_is_kept_whole() {
        let n = nac_object_name("nacuser1", "nacuser1-backup-3", &uuid());
        assert_eq!(
            n,
            "nacuser1-nacuser1-backup-3-1a3d4da8-0f97-4117-a9c6-19e2c97d978a"
        );
        assert_eq!(n.len(), 63);
    }

    #[test]
    fn long_name_is_cut_first() {
        let n = nac_object_name("team-a", "a-very-long-backup-name-that-goes-on", &uuid());
        assert_eq!(
            n,
            "team-a-a-very-long-backup--1a3d4da8-0f97-4117-a9c6-19e2c97d978a"
        );
        assert_eq!(n.len(), 63);
    }

    #[test]
    fn long_namespace_is_cut_to_25_and_name_dropped() {
        let ns = "a-namespace-that-is-way-too-long-for-this";
        let n = nac_object_name(ns, "b", &uuid());
        assert_eq!(
            n,
            "a-namespace-that-is-way-t-1a3d4da8-0f97-4117-a9c6-19e2c97d978a"
        );
        assert_eq!(n.len(), 62);
    }

    #[test]
    fn namespace_of_exactly_25_leaves_no_room_for_the_name() {
        let ns = "n".repeat(25);
        let n = nac_object_name(&ns, "some-backup-name-long-enough", &uuid());
        assert_eq!(n, format!("{ns}-1a3d4da8-0f97-4117-a9c6-19e2c97d978a"));
    }

    #[test]
    fn empty_parts_are_left_out() {
        assert_eq!(
            nac_object_name("", "", &uuid()),
            "1a3d4da8-0f97-4117-a9c6-19e2c97d978a"
        );
        assert_eq!(
            nac_object_name("ns", "", &uuid()),
            "ns-1a3d4da8-0f97-4117-a9c6-19e2c97d978a"
        );
    }
}
