//! Who is a seed. Two identities name a seed in the garden:
//! - Granary's: the ServiceAccount `granary-seed-<seed>` in the namespace the landscape
//!   admin keeps the seeds' garden identities in (deploy/examples/overlays/garden/
//!   seed-access.yaml), i.e. user `system:serviceaccount:<ns>:granary-seed-<seed>`;
//! - Gardener's: user `gardener.cloud:system:seed:<seed>` in group
//!   `gardener.cloud:system:seeds` (a gardenlet's client certificate), so a landscape
//!   that already issues those can reuse them.

/// Gardener's user name prefix and group of seed identities.
pub const GARDENER_SEED_USER_PREFIX: &str = "gardener.cloud:system:seed:";
pub const GARDENER_SEEDS_GROUP: &str = "gardener.cloud:system:seeds";
/// The name prefix of a seed's ServiceAccount in the garden.
pub const SEED_SERVICE_ACCOUNT_PREFIX: &str = "granary-seed-";

/// Where seed ServiceAccounts live.
#[derive(Clone, Debug)]
pub struct SeedIdentities {
    pub service_account_namespace: String,
}

impl Default for SeedIdentities {
    fn default() -> Self {
        SeedIdentities {
            service_account_namespace: "granary-system".to_string(),
        }
    }
}

/// The seed `user` (with `groups`) authenticates as, if any.
pub fn seed_of<'a>(user: &'a str, groups: &[String], ids: &SeedIdentities) -> Option<&'a str> {
    let seed = if let Some(rest) = user.strip_prefix("system:serviceaccount:") {
        let (namespace, account) = rest.split_once(':')?;
        if namespace != ids.service_account_namespace {
            return None;
        }
        account.strip_prefix(SEED_SERVICE_ACCOUNT_PREFIX)?
    } else {
        let seed = user.strip_prefix(GARDENER_SEED_USER_PREFIX)?;
        if !groups.iter().any(|g| g == GARDENER_SEEDS_GROUP) {
            return None;
        }
        seed
    };
    (!seed.is_empty()).then_some(seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(user: &str, groups: &[&str]) -> Option<String> {
        let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        seed_of(user, &groups, &SeedIdentities::default()).map(String::from)
    }

    #[test]
    fn service_accounts_and_gardener_seed_users_name_their_seed() {
        let sa = "system:serviceaccount:granary-system:granary-seed-aws-eu1";
        assert_eq!(of(sa, &[]).as_deref(), Some("aws-eu1"));
        let gardener = "gardener.cloud:system:seed:aws-eu1";
        assert_eq!(
            of(gardener, &[GARDENER_SEEDS_GROUP]).as_deref(),
            Some("aws-eu1")
        );
    }

    #[test]
    fn look_alikes_are_no_seeds() {
        for (user, groups) in [
            // the garden controller's own account
            (
                "system:serviceaccount:granary-system:granary-garden",
                &[][..],
            ),
            // the same name in another namespace
            ("system:serviceaccount:team-a:granary-seed-aws-eu1", &[]),
            ("system:serviceaccount:granary-system:granary-seed-", &[]),
            ("system:serviceaccount:granary-system", &[]),
            // Gardener's seed user without the seeds group
            (
                "gardener.cloud:system:seed:aws-eu1",
                &["system:authenticated"],
            ),
            ("gardener.cloud:system:seed:", &[GARDENER_SEEDS_GROUP]),
            ("admin", &[GARDENER_SEEDS_GROUP]),
        ] {
            assert_eq!(of(user, groups), None, "{user} {groups:?}");
        }
    }
}
