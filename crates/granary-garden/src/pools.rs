//! Bucket pools (docs/architecture.md#bucket-pools): which pools exist for a CloudProfile
//! and its seeds, and which pool a shoot's BackupEntry belongs to. A pool is keyed (kind,
//! owner, region); its shards are the BackupBuckets labelled with that key.

pub use granary_api::core::PoolKind;

/// One pool of buckets.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PoolKey {
    pub kind: PoolKind,
    /// The CloudProfile or Seed name (the legacy bucket's name for legacy pools).
    pub owner: String,
    /// The region the pool's buckets live in.
    pub region: String,
}

/// `cloudprofile aws in eu-1`: how logs and messages name a pool.
impl std::fmt::Display for PoolKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} in {}", self.kind, self.owner, self.region)
    }
}

/// A `spec.backup` (of a CloudProfile or a Seed), reduced to what pools depend on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackupTarget {
    pub provider: Option<String>,
    pub region: Option<String>,
}

/// A CloudProfile, reduced to what pools depend on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileView {
    pub name: String,
    /// `spec.type`: the provider of the machines.
    pub provider_type: String,
    pub backup: Option<BackupTarget>,
}

/// A Seed, reduced to what pools depend on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedView {
    pub name: String,
    /// `spec.provider.type`
    pub provider_type: String,
    /// `spec.provider.region`
    pub region: String,
    /// The seed's own `spec.backup`, if any.
    pub backup: Option<BackupTarget>,
}

impl ProfileView {
    /// The view of a CloudProfile.
    pub fn of(profile: &granary_api::core::CloudProfile) -> Self {
        ProfileView {
            name: kube::ResourceExt::name_any(profile),
            provider_type: profile.spec.type_.clone(),
            backup: profile.spec.backup.as_ref().map(BackupTarget::of),
        }
    }

    /// The provider the profile's buckets are created at.
    pub fn backup_provider(&self) -> Option<&str> {
        let backup = self.backup.as_ref()?;
        Some(backup.provider.as_deref().unwrap_or(&self.provider_type))
    }

    /// True when the profile's `spec.backup` can form pools: a region is set, or the
    /// backup provider is the machines' provider (so every seed region is a valid backup
    /// region). A cross-provider backup without region is a validation error reported on
    /// the profile; it forms no pools.
    fn backup_is_usable(&self) -> bool {
        match &self.backup {
            None => false,
            Some(b) => {
                b.region.is_some() || self.backup_provider() == Some(self.provider_type.as_str())
            }
        }
    }

    /// True when `seed` hosts shoots of this profile.
    pub fn is_served_by(&self, seed: &SeedView) -> bool {
        seed.provider_type == self.provider_type
    }
}

impl SeedView {
    /// The view of a Seed.
    pub fn of(seed: &granary_api::core::Seed) -> Self {
        SeedView {
            name: kube::ResourceExt::name_any(seed),
            provider_type: seed.spec.provider.type_.clone(),
            region: seed.spec.provider.region.clone(),
            backup: seed.spec.backup.as_ref().map(BackupTarget::of),
        }
    }
}

impl BackupTarget {
    /// The parts of a `spec.backup` pools depend on (empty strings count as unset).
    pub fn of(backup: &granary_api::core::BackupSpec) -> Self {
        BackupTarget {
            provider: Some(backup.provider.clone()).filter(|p| !p.is_empty()),
            region: backup.region().map(str::to_string),
        }
    }
}

/// The pools a CloudProfile needs now: one in `spec.backup.region` when set; otherwise
/// one per region that has at least one seed serving the profile without a backup of its
/// own (pools appear lazily, with the first seed of a region). Sorted, without duplicates.
pub fn profile_pools(profile: &ProfileView, seeds: &[SeedView]) -> Vec<PoolKey> {
    if !profile.backup_is_usable() {
        return Vec::new();
    }
    let key = |region: &str| PoolKey {
        kind: PoolKind::CloudProfile,
        owner: profile.name.clone(),
        region: region.to_string(),
    };
    if let Some(region) = profile.backup.as_ref().and_then(|b| b.region.as_deref()) {
        return vec![key(region)];
    }
    let mut pools: Vec<PoolKey> = seeds
        .iter()
        .filter(|s| profile.is_served_by(s) && s.backup.is_none())
        .map(|s| key(&s.region))
        .collect();
    pools.sort();
    pools.dedup();
    pools
}

/// The pool of a seed with its own `spec.backup` (in its backup region, defaulting to
/// the seed's region).
pub fn seed_pool(seed: &SeedView) -> Option<PoolKey> {
    let backup = seed.backup.as_ref()?;
    Some(PoolKey {
        kind: PoolKind::Seed,
        owner: seed.name.clone(),
        region: backup.region.clone().unwrap_or_else(|| seed.region.clone()),
    })
}

/// The pool of a shoot running on `seed` with `profile`: the seed's own pool if it has
/// one, else the profile's pool in the profile's backup region or the seed's region.
/// `None` when neither configures backup usably.
pub fn pool_for_shoot(profile: &ProfileView, seed: &SeedView) -> Option<PoolKey> {
    if let Some(pool) = seed_pool(seed) {
        return Some(pool);
    }
    if !profile.backup_is_usable() {
        return None;
    }
    let region = profile
        .backup
        .as_ref()
        .and_then(|b| b.region.clone())
        .unwrap_or_else(|| seed.region.clone());
    Some(PoolKey {
        kind: PoolKind::CloudProfile,
        owner: profile.name.clone(),
        region,
    })
}

/// The pools a seed's Velero backups can live in: its own pool, or the pool its shoots'
/// entries go to for each CloudProfile it serves (its default location uses a shared
/// bucket it holds or its entries are in).
pub fn seed_velero_pools(seed: &SeedView, profiles: &[ProfileView]) -> Vec<PoolKey> {
    let mut pools: Vec<PoolKey> = match seed_pool(seed) {
        Some(own) => vec![own],
        None => profiles
            .iter()
            .filter(|p| p.is_served_by(seed))
            .filter_map(|p| pool_for_shoot(p, seed))
            .collect(),
    };
    pools.sort();
    pools.dedup();
    pools
}

/// The seeds that may read the Velero prefixes in pool `key`'s buckets: the seeds whose
/// backups can live there. A legacy pool (one shoot's old bucket) has none.
pub fn pool_readers(
    key: &PoolKey,
    seeds: &[SeedView],
    profiles: &[ProfileView],
) -> std::collections::BTreeSet<String> {
    if key.kind == PoolKind::Legacy {
        return Default::default();
    }
    seeds
        .iter()
        .filter(|s| seed_velero_pools(s, profiles).contains(key))
        .map(|s| s.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_of_a_pool_read_its_velero_prefixes() {
        let seed = |name: &str, region: &str, own: bool| SeedView {
            name: name.into(),
            provider_type: "aws".into(),
            region: region.into(),
            backup: own.then(BackupTarget::default),
        };
        let profile = ProfileView {
            name: "aws".into(),
            provider_type: "aws".into(),
            backup: Some(BackupTarget::default()),
        };
        let gcp = ProfileView {
            name: "gcp".into(),
            provider_type: "gcp".into(),
            backup: Some(BackupTarget::default()),
        };
        let seeds = [
            seed("eu-1", "eu", false),
            seed("eu-2", "eu", false),
            seed("us-1", "us", false),
            seed("own", "eu", true),
        ];
        let profiles = [profile, gcp];
        let eu = PoolKey {
            kind: PoolKind::CloudProfile,
            owner: "aws".into(),
            region: "eu".into(),
        };
        let names = |k: &PoolKey| {
            pool_readers(k, &seeds, &profiles)
                .into_iter()
                .collect::<Vec<_>>()
        };
        // Same profile, same region: one pool, two readers; another region, another pool;
        // a seed with its own backup reads only its own pool.
        assert_eq!(names(&eu), ["eu-1", "eu-2"]);
        assert_eq!(
            names(&PoolKey {
                region: "us".into(),
                ..eu.clone()
            }),
            ["us-1"]
        );
        let own = seed_pool(&seeds[3]).expect("own pool");
        assert_eq!(names(&own), ["own"]);
        assert!(
            names(&PoolKey {
                kind: PoolKind::Legacy,
                ..eu.clone()
            })
            .is_empty()
        );
        // A profile nobody serves has no readers.
        assert!(
            names(&PoolKey {
                owner: "gcp".into(),
                ..eu
            })
            .is_empty()
        );
    }

    #[test]
    fn a_pool_is_named_in_words_in_logs() {
        let key = PoolKey {
            kind: PoolKind::CloudProfile,
            owner: "aws".into(),
            region: "eu-1".into(),
        };
        assert_eq!(key.to_string(), "cloudprofile aws in eu-1");
    }

    fn profile(provider: Option<&str>, region: Option<&str>) -> ProfileView {
        ProfileView {
            name: "aws".into(),
            provider_type: "aws".into(),
            backup: Some(BackupTarget {
                provider: provider.map(Into::into),
                region: region.map(Into::into),
            }),
        }
    }

    fn seed(name: &str, provider: &str, region: &str, backup: Option<BackupTarget>) -> SeedView {
        SeedView {
            name: name.into(),
            provider_type: provider.into(),
            region: region.into(),
            backup,
        }
    }

    fn key(kind: PoolKind, owner: &str, region: &str) -> PoolKey {
        PoolKey {
            kind,
            owner: owner.into(),
            region: region.into(),
        }
    }

    #[test]
    fn region_set_gives_one_pool_for_all_seeds() {
        let seeds = [
            seed("a", "aws", "eu-1", None),
            seed("b", "aws", "us-1", None),
        ];
        let p = profile(Some("aws"), Some("eu-9"));
        assert_eq!(
            profile_pools(&p, &seeds),
            vec![key(PoolKind::CloudProfile, "aws", "eu-9")]
        );
        assert_eq!(
            pool_for_shoot(&p, &seeds[1]),
            Some(key(PoolKind::CloudProfile, "aws", "eu-9"))
        );
        // Cross-provider with a region is fine.
        let cross = profile(Some("gcp"), Some("europe-west1"));
        assert_eq!(profile_pools(&cross, &seeds).len(), 1);
    }

    #[test]
    fn without_region_one_pool_per_seed_region_created_lazily() {
        let p = profile(None, None);
        assert_eq!(profile_pools(&p, &[]), Vec::new());
        let mut seeds = vec![
            seed("a", "aws", "eu-1", None),
            seed("b", "aws", "eu-1", None),
            seed("g", "gcp", "us-1", None),
        ];
        assert_eq!(
            profile_pools(&p, &seeds),
            vec![key(PoolKind::CloudProfile, "aws", "eu-1")]
        );
        seeds.push(seed("c", "aws", "us-1", None));
        assert_eq!(
            profile_pools(&p, &seeds),
            vec![
                key(PoolKind::CloudProfile, "aws", "eu-1"),
                key(PoolKind::CloudProfile, "aws", "us-1")
            ]
        );
        assert_eq!(
            pool_for_shoot(&p, &seeds[3]),
            Some(key(PoolKind::CloudProfile, "aws", "us-1"))
        );
    }

    #[test]
    fn cross_provider_without_region_forms_no_pool() {
        let p = profile(Some("azure"), None);
        let seeds = [seed("a", "aws", "eu-1", None)];
        assert!(profile_pools(&p, &seeds).is_empty());
        assert_eq!(pool_for_shoot(&p, &seeds[0]), None);
    }

    #[test]
    fn a_seed_with_its_own_backup_gets_its_own_pool() {
        let p = profile(None, None);
        let own = seed(
            "s",
            "aws",
            "eu-1",
            Some(BackupTarget {
                provider: Some("aws".into()),
                region: None,
            }),
        );
        assert_eq!(seed_pool(&own), Some(key(PoolKind::Seed, "s", "eu-1")));
        assert_eq!(
            pool_for_shoot(&p, &own),
            Some(key(PoolKind::Seed, "s", "eu-1"))
        );
        // It does not make the profile create a pool in its region.
        assert!(profile_pools(&p, std::slice::from_ref(&own)).is_empty());
        let remote = seed(
            "r",
            "aws",
            "eu-1",
            Some(BackupTarget {
                provider: Some("gcp".into()),
                region: Some("us".into()),
            }),
        );
        assert_eq!(seed_pool(&remote), Some(key(PoolKind::Seed, "r", "us")));
    }

    #[test]
    fn no_backup_anywhere_means_no_pool() {
        let p = ProfileView {
            name: "x".into(),
            provider_type: "aws".into(),
            backup: None,
        };
        let s = seed("a", "aws", "eu-1", None);
        assert_eq!(pool_for_shoot(&p, &s), None);
        assert!(profile_pools(&p, &[s]).is_empty());
    }
}
