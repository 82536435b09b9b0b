//! The sample landscape of `granary dev`: the YAML in `deploy/examples/landscape/`
//! (compiled in, so the binary works from any directory), sized to `--seeds`/`--shoots`
//! by taking the first N objects and generating more of the same kind, pointed at the
//! chosen object store, and created in the embedded garden.
//!
//! Loading and sizing are pure; [`Landscape::create`] is the only part that talks to a
//! server.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::dev::provider::BackupStore;
use granary_api::core::{CloudProfile, Seed, Shoot};

/// The sample files, in the order they are created.
const SAMPLE: [(&str, &str); 5] = [
    (
        "projects.yaml",
        include_str!("../../deploy/examples/landscape/projects.yaml"),
    ),
    (
        "credentials.yaml",
        include_str!("../../deploy/examples/landscape/credentials.yaml"),
    ),
    (
        "cloudprofile.yaml",
        include_str!("../../deploy/examples/landscape/cloudprofile.yaml"),
    ),
    (
        "seeds.yaml",
        include_str!("../../deploy/examples/landscape/seeds.yaml"),
    ),
    (
        "shoots.yaml",
        include_str!("../../deploy/examples/landscape/shoots.yaml"),
    ),
];

/// Why the landscape could not be loaded or created.
#[derive(Debug, thiserror::Error)]
pub enum LandscapeError {
    #[error("sample landscape {file}: {message}")]
    Sample { file: &'static str, message: String },
    #[error("sample landscape: {0}")]
    Shape(String),
    #[error("creating {kind} {name}: {source}")]
    Create {
        kind: &'static str,
        name: String,
        source: kube::Error,
    },
}

/// Everything `granary dev` creates in the garden on its first start.
#[derive(Clone, Debug, PartialEq)]
pub struct Landscape {
    /// The `garden` namespace and the project namespaces.
    pub namespaces: Vec<Namespace>,
    /// The backup credentials Secret the CloudProfile refers to.
    pub credentials: Secret,
    pub profile: CloudProfile,
    pub seeds: Vec<Seed>,
    pub shoots: Vec<Shoot>,
}

fn parse<K: DeserializeOwned>(
    file: &'static str,
    doc: serde_json::Value,
) -> Result<K, LandscapeError> {
    serde_json::from_value(doc).map_err(|e| LandscapeError::Sample {
        file,
        message: e.to_string(),
    })
}

impl Landscape {
    /// The sample as it is in `deploy/examples/landscape/`.
    pub fn sample() -> Result<Landscape, LandscapeError> {
        let mut namespaces = Vec::new();
        let mut credentials = None;
        let mut profiles = Vec::new();
        let mut seeds = Vec::new();
        let mut shoots = Vec::new();
        for (file, text) in SAMPLE {
            let docs: Vec<serde_json::Value> =
                serde_saphyr::from_multiple(text).map_err(|e| LandscapeError::Sample {
                    file,
                    message: e.to_string(),
                })?;
            for doc in docs.into_iter().filter(|d| !d.is_null()) {
                let kind = doc.get("kind").and_then(|k| k.as_str()).unwrap_or_default();
                match kind {
                    "Namespace" => namespaces.push(parse::<Namespace>(file, doc)?),
                    "Secret" => credentials = Some(parse::<Secret>(file, doc)?),
                    "CloudProfile" => profiles.push(parse::<CloudProfile>(file, doc)?),
                    "Seed" => seeds.push(parse::<Seed>(file, doc)?),
                    "Shoot" => shoots.push(parse::<Shoot>(file, doc)?),
                    other => {
                        return Err(LandscapeError::Sample {
                            file,
                            message: format!("unexpected kind {other:?}"),
                        });
                    }
                }
            }
        }
        let credentials =
            credentials.ok_or_else(|| LandscapeError::Shape("no credentials Secret".into()))?;
        let profile = match <[CloudProfile; 1]>::try_from(profiles) {
            Ok([p]) => p,
            Err(p) => {
                return Err(LandscapeError::Shape(format!(
                    "expected one CloudProfile, found {}",
                    p.len()
                )));
            }
        };
        if seeds.is_empty() || profile.spec.regions.is_empty() {
            return Err(LandscapeError::Shape(
                "needs at least one seed and one region".into(),
            ));
        }
        Ok(Landscape {
            namespaces,
            credentials: with_string_data_merged(credentials),
            profile,
            seeds,
            shoots,
        })
    }

    /// The first `seeds` seeds and `shoots` shoots of the sample, with more generated
    /// when it has fewer: extra seeds take the profile's regions in turn, extra shoots
    /// the project namespaces and the seeds in turn. A kept shoot whose seed was left out
    /// moves to a kept seed. `seeds` is at least 1.
    pub fn sized(mut self, seeds: usize, shoots: usize) -> Landscape {
        let seeds = seeds.max(1);
        let regions: Vec<String> = self
            .profile
            .spec
            .regions
            .iter()
            .map(|r| r.name.clone())
            .collect();
        self.seeds.truncate(seeds);
        let template = self.seeds[0].clone();
        let mut next = self.seeds.len();
        while self.seeds.len() < seeds {
            let region = &regions[next % regions.len()];
            let mut n = 1;
            let name = loop {
                let candidate = format!("{region}-{n}");
                if !self.seeds.iter().any(|s| s.name_any() == candidate) {
                    break candidate;
                }
                n += 1;
            };
            let mut seed = template.clone();
            seed.metadata = Default::default();
            seed.metadata.name = Some(name);
            seed.spec.provider.region = region.clone();
            self.seeds.push(seed);
            next += 1;
        }

        let seed_regions: Vec<(String, String)> = self
            .seeds
            .iter()
            .map(|s| (s.name_any(), s.spec.provider.region.clone()))
            .collect();
        let projects: Vec<String> = self
            .namespaces
            .iter()
            .map(|n| n.name_any())
            .filter(|n| n.starts_with("garden-"))
            .collect();
        self.shoots.truncate(shoots);
        for (i, shoot) in self.shoots.iter_mut().enumerate() {
            let known = shoot
                .spec
                .seed_name
                .as_ref()
                .is_some_and(|s| seed_regions.iter().any(|(n, _)| n == s));
            if !known {
                let (seed, region) = &seed_regions[i % seed_regions.len()];
                shoot.spec.seed_name = Some(seed.clone());
                shoot.spec.region = region.clone();
            }
        }
        if let Some(template) = self
            .shoots
            .first()
            .cloned()
            .or_else(|| self.template_shoot())
        {
            let mut i = self.shoots.len();
            while self.shoots.len() < shoots {
                let (seed, region) = &seed_regions[i % seed_regions.len()];
                let mut shoot = template.clone();
                shoot.metadata = Default::default();
                shoot.metadata.name = Some(format!("shoot-{}", i + 1));
                shoot.metadata.namespace = projects
                    .get(i % projects.len().max(1))
                    .cloned()
                    .or_else(|| template.namespace());
                shoot.spec.seed_name = Some(seed.clone());
                shoot.spec.region = region.clone();
                self.shoots.push(shoot);
                i += 1;
            }
        }
        self
    }

    /// A shoot of the profile in the first project, for `--shoots` above zero when the
    /// sample was cut to none (it never is, but sizing must not depend on that).
    fn template_shoot(&self) -> Option<Shoot> {
        let namespace = self
            .namespaces
            .iter()
            .map(|n| n.name_any())
            .find(|n| n.starts_with("garden-"))?;
        let mut shoot = Shoot::new("shoot", Default::default());
        shoot.metadata.namespace = Some(namespace);
        shoot.spec.cloud_profile = Some(granary_api::core::CloudProfileReference {
            kind: "CloudProfile".into(),
            name: self.profile.name_any(),
            ..Default::default()
        });
        shoot.spec.provider.type_ = self.profile.spec.type_.clone();
        Some(shoot)
    }

    /// Points the CloudProfile's `spec.backup` and the credentials Secret at `store`.
    /// A store other than `local` gets `spec.backup.region` (the sample's seeds are of
    /// provider `local`, so the pool cannot follow the seeds' regions).
    pub fn with_store(mut self, store: &BackupStore) -> Landscape {
        if let BackupStore::Remote {
            provider,
            region,
            secret,
        } = store
            && let Some(backup) = self.profile.spec.backup.as_mut()
        {
            backup.provider = provider.clone();
            backup.region = Some(region.clone());
            self.credentials.data = Some(
                secret
                    .iter()
                    .map(|(k, v)| (k.clone(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            );
        }
        self
    }

    /// The provider `spec.backup` names (for the quota).
    pub fn backup_provider(&self) -> String {
        self.profile
            .spec
            .backup
            .as_ref()
            .map(|b| b.provider.clone())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| self.profile.spec.type_.clone())
    }

    /// Creates every object in the garden; objects that exist already are left alone.
    pub async fn create(&self, garden: &Client) -> Result<(), LandscapeError> {
        for ns in &self.namespaces {
            create(Api::all(garden.clone()), ns).await?;
        }
        let secret_ns = self.credentials.namespace().unwrap_or_default();
        create(
            Api::namespaced(garden.clone(), &secret_ns),
            &self.credentials,
        )
        .await?;
        create(Api::all(garden.clone()), &self.profile).await?;
        for seed in &self.seeds {
            create(Api::all(garden.clone()), seed).await?;
        }
        for shoot in &self.shoots {
            let ns = shoot.namespace().unwrap_or_default();
            create(Api::namespaced(garden.clone(), &ns), shoot).await?;
        }
        Ok(())
    }
}

/// `stringData` folded into `data`, as kube-apiserver does on write.
fn with_string_data_merged(mut secret: Secret) -> Secret {
    if let Some(strings) = secret.string_data.take() {
        let data = secret.data.get_or_insert_with(BTreeMap::new);
        for (k, v) in strings {
            data.insert(k, ByteString(v.into_bytes()));
        }
    }
    secret
}

async fn create<K>(api: Api<K>, obj: &K) -> Result<(), LandscapeError>
where
    K: Resource<DynamicType = ()> + Clone + serde::Serialize + DeserializeOwned + std::fmt::Debug,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(source) => Err(LandscapeError::Create {
            kind: std::any::type_name::<K>()
                .rsplit("::")
                .next()
                .unwrap_or("object"),
            name: obj.name_any(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed_names(l: &Landscape) -> Vec<String> {
        l.seeds.iter().map(|s| s.name_any()).collect()
    }

    #[test]
    fn the_sample_has_two_regions_three_seeds_and_shards_europe() {
        let l = Landscape::sample().expect("the sample parses");
        assert_eq!(seed_names(&l), ["europe-1", "europe-2", "america-1"]);
        assert_eq!(l.backup_provider(), "local");
        let europe = l
            .shoots
            .iter()
            .filter(|s| s.spec.region == "europe")
            .count();
        assert!(
            europe > 3,
            "europe must overflow a quota of 3 to show sharding"
        );
        assert!(l.credentials.string_data.is_none());
        assert!(l.credentials.data.as_ref().is_some_and(|d| !d.is_empty()));
        for shoot in &l.shoots {
            let seed = shoot
                .spec
                .seed_name
                .as_deref()
                .expect("every shoot has a seed");
            let region = &l
                .seeds
                .iter()
                .find(|s| s.name_any() == seed)
                .unwrap()
                .spec
                .provider
                .region;
            assert_eq!(&shoot.spec.region, region, "{}", shoot.name_any());
        }
    }

    #[test]
    fn more_seeds_take_the_regions_in_turn_with_unique_names() {
        let l = Landscape::sample().unwrap().sized(6, 7);
        assert_eq!(
            seed_names(&l),
            [
                "europe-1",
                "europe-2",
                "america-1",
                "america-2",
                "europe-3",
                "america-3"
            ]
        );
    }

    #[test]
    fn fewer_seeds_move_their_shoots_to_the_kept_ones() {
        let l = Landscape::sample().unwrap().sized(1, 7);
        assert_eq!(seed_names(&l), ["europe-1"]);
        assert_eq!(l.shoots.len(), 7);
        assert!(
            l.shoots
                .iter()
                .all(|s| s.spec.seed_name.as_deref() == Some("europe-1")
                    && s.spec.region == "europe")
        );
    }

    #[test]
    fn more_shoots_are_generated_across_projects_and_seeds() {
        let l = Landscape::sample().unwrap().sized(3, 10);
        assert_eq!(l.shoots.len(), 10);
        let extra: Vec<(String, String, String)> = l.shoots[7..]
            .iter()
            .map(|s| {
                (
                    s.namespace().unwrap(),
                    s.name_any(),
                    s.spec.seed_name.clone().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            extra,
            [
                ("garden-ops".into(), "shoot-8".into(), "europe-2".into()),
                ("garden-dev".into(), "shoot-9".into(), "america-1".into()),
                ("garden-ops".into(), "shoot-10".into(), "europe-1".into()),
            ]
        );
        let names: std::collections::BTreeSet<_> = l
            .shoots
            .iter()
            .map(|s| (s.namespace(), s.name_any()))
            .collect();
        assert_eq!(names.len(), 10, "names are unique");
    }

    #[test]
    fn zero_shoots_and_then_some() {
        let l = Landscape::sample().unwrap().sized(2, 0);
        assert!(l.shoots.is_empty());
        let l = Landscape::sample().unwrap().sized(2, 2);
        assert_eq!(l.shoots.len(), 2);
    }

    #[test]
    fn a_remote_store_sets_provider_region_and_credentials() {
        let store = BackupStore::Remote {
            provider: "aws".into(),
            region: "eu-west-1".into(),
            secret: [("accessKeyID".to_string(), "AK".to_string())].into(),
        };
        let l = Landscape::sample().unwrap().with_store(&store);
        let backup = l.profile.spec.backup.as_ref().unwrap();
        assert_eq!(backup.provider, "aws");
        assert_eq!(backup.region.as_deref(), Some("eu-west-1"));
        assert_eq!(l.backup_provider(), "aws");
        let data = l.credentials.data.as_ref().unwrap();
        assert_eq!(data.len(), 1);
        assert_eq!(data["accessKeyID"].0, b"AK");
        let errors = granary_api::core::validate_cloud_profile(&l.profile);
        assert!(errors.is_empty(), "{errors:?}");
    }
}
