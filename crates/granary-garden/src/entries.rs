//! A shoot's garden BackupEntry (docs/architecture.md#entry-placement): named
//! `<technicalID>--<shoot uid>` in the shoot's namespace, owned by the shoot
//! (`blockOwnerDeletion: false`, so deleting the shoot leaves the entry to garbage
//! collection and the seed's grace period), with `spec.seedName` following the shoot, the
//! purpose annotation and the `granary.gardener.cloud/seed` label. `spec.bucketName` is
//! chosen once by placement and never changed here.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::ObjectMeta;
use serde_json::{Value, json};

use granary_api::core::{
    ANNOTATION_SHOOT_PURPOSE, BackupEntry, BackupEntrySpec, LABEL_SEED, Shoot,
};
use granary_runtime::selector::ObjectSelector;

/// Why a shoot has no entry yet.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EntryProblem {
    #[error("the shoot has neither status.uid nor metadata.uid")]
    NoUid,
    #[error("the shoot has no namespace")]
    NoNamespace,
}

/// The owner reference of a shoot's entry.
pub fn shoot_owner_reference(shoot: &Shoot) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: "core.gardener.cloud/v1beta1".to_string(),
        kind: "Shoot".to_string(),
        name: shoot.name_any(),
        uid: shoot.metadata.uid.clone()?,
        controller: Some(true),
        block_owner_deletion: Some(false),
    })
}

/// The entry to create for `shoot` in `bucket`.
pub fn new_entry(
    shoot: &Shoot,
    bucket: &str,
    selector: &ObjectSelector,
) -> Result<BackupEntry, EntryProblem> {
    let name = shoot.backup_entry_name().ok_or(EntryProblem::NoUid)?;
    let namespace = shoot.namespace().ok_or(EntryProblem::NoNamespace)?;
    let owner = shoot_owner_reference(shoot).ok_or(EntryProblem::NoUid)?;
    let seed = shoot.spec.seed_name.clone();
    let mut labels = BTreeMap::new();
    if let Some(seed) = &seed {
        labels.insert(LABEL_SEED.to_string(), seed.clone());
    }
    selector.label(&mut labels);
    let annotations: BTreeMap<String, String> = purpose(shoot)
        .map(|p| (ANNOTATION_SHOOT_PURPOSE.to_string(), p.to_string()))
        .into_iter()
        .collect();
    Ok(BackupEntry {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: BackupEntrySpec {
            bucket_name: bucket.to_string(),
            seed_name: seed,
            shoot_ref: None,
        },
        status: None,
    })
}

fn purpose(shoot: &Shoot) -> Option<&str> {
    shoot.spec.purpose.as_deref().filter(|p| !p.is_empty())
}

/// The responsible seed of `entry` once its `spec.seedName` is `spec_seed`:
/// `status.seedName` when set, else `spec_seed`.
fn responsible_after(entry: &BackupEntry, spec_seed: Option<&str>) -> Option<String> {
    entry
        .status
        .as_ref()
        .and_then(|s| s.seed_name.as_deref())
        .filter(|s| !s.is_empty())
        .or(spec_seed.filter(|s| !s.is_empty()))
        .map(str::to_string)
}

/// The merge patch that brings an existing entry in line with its shoot (seed, purpose,
/// owner reference, seed label), or `None` when it already is. The bucket never changes.
pub fn entry_update(entry: &BackupEntry, shoot: &Shoot) -> Option<Value> {
    let mut patch = serde_json::Map::new();
    let mut metadata = serde_json::Map::new();
    let spec_seed = shoot.spec.seed_name.as_deref();
    if spec_seed.is_some() && entry.spec.seed_name.as_deref() != spec_seed {
        patch.insert("spec".into(), json!({ "seedName": spec_seed }));
    }
    let effective_spec_seed = spec_seed.or(entry.spec.seed_name.as_deref());
    let seed = responsible_after(entry, effective_spec_seed);
    if entry.labels().get(LABEL_SEED) != seed.as_ref() {
        metadata.insert("labels".into(), json!({ LABEL_SEED: seed }));
    }
    let want_purpose = purpose(shoot);
    if entry.purpose() != want_purpose {
        metadata.insert(
            "annotations".into(),
            json!({ ANNOTATION_SHOOT_PURPOSE: want_purpose }),
        );
    }
    let uid = shoot.metadata.uid.as_deref();
    let owned = entry
        .owner_references()
        .iter()
        .any(|o| o.kind == "Shoot" && Some(o.uid.as_str()) == uid);
    if !owned && let Some(owner) = shoot_owner_reference(shoot) {
        let mut owners: Vec<OwnerReference> = entry
            .owner_references()
            .iter()
            .filter(|o| o.kind != "Shoot")
            .cloned()
            .collect();
        owners.push(owner);
        metadata.insert("ownerReferences".into(), json!(owners));
    }
    if !metadata.is_empty() {
        patch.insert("metadata".into(), Value::Object(metadata));
    }
    (!patch.is_empty()).then_some(Value::Object(patch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::core::{BackupEntryStatus, ShootSpec, ShootStatus};

    fn shoot(seed: Option<&str>, purpose: Option<&str>) -> Shoot {
        let mut s = Shoot::new(
            "web",
            ShootSpec {
                seed_name: seed.map(Into::into),
                purpose: purpose.map(Into::into),
                ..ShootSpec::default()
            },
        );
        s.metadata.namespace = Some("garden-dev".into());
        s.metadata.uid = Some("1234".into());
        s.status = Some(ShootStatus::default());
        s
    }

    #[test]
    fn a_new_entry_is_named_owned_and_labelled() {
        let sel = ObjectSelector::new(Some("t1".into()));
        let e = new_entry(&shoot(Some("s1"), Some("production")), "b-0", &sel).expect("entry");
        assert_eq!(e.name_any(), "shoot--dev--web--1234");
        assert_eq!(e.namespace().as_deref(), Some("garden-dev"));
        assert_eq!(e.spec.bucket_name, "b-0");
        assert_eq!(e.spec.seed_name.as_deref(), Some("s1"));
        assert_eq!(e.labels().get(LABEL_SEED).map(String::as_str), Some("s1"));
        assert!(sel.matches(e.metadata.labels.as_ref()));
        assert_eq!(e.purpose(), Some("production"));
        let owner = &e.owner_references()[0];
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.uid.as_str(),
                owner.block_owner_deletion
            ),
            ("Shoot", "1234", Some(false))
        );
        let mut no_uid = shoot(None, None);
        no_uid.metadata.uid = None;
        assert_eq!(
            new_entry(&no_uid, "b", &sel).unwrap_err(),
            EntryProblem::NoUid
        );
    }

    #[test]
    fn an_entry_follows_its_shoot_but_never_its_bucket() {
        let sel = ObjectSelector::default();
        let s = shoot(Some("s1"), None);
        let e = new_entry(&s, "b-0", &sel).expect("entry");
        assert_eq!(entry_update(&e, &s), None);
        let moved = shoot(Some("s2"), Some("evaluation"));
        let patch = entry_update(&e, &moved).expect("changes");
        assert_eq!(patch["spec"]["seedName"], "s2");
        assert!(patch["spec"].get("bucketName").is_none());
        assert_eq!(patch["metadata"]["labels"][LABEL_SEED], "s2");
        assert_eq!(
            patch["metadata"]["annotations"][ANNOTATION_SHOOT_PURPOSE],
            "evaluation"
        );
        // While the old seed still holds it (status.seedName), the label stays there.
        let mut held = e.clone();
        held.status = Some(BackupEntryStatus {
            seed_name: Some("s1".into()),
            ..BackupEntryStatus::default()
        });
        let patch = entry_update(&held, &moved).expect("changes");
        assert!(patch["metadata"].get("labels").is_none(), "{patch}");
    }

    proptest::proptest! {
        /// Whatever the shoot and the entry's status say, an update never touches the
        /// bucket, and afterwards the seed label names the responsible seed.
        #[test]
        fn updates_never_move_an_entry_and_label_the_responsible_seed(
            spec_seed in proptest::option::of("[a-c]"),
            shoot_seed in proptest::option::of("[a-c]"),
            status_seed in proptest::option::of("[a-c]"),
            purpose in proptest::option::of("(production|evaluation)"),
        ) {
            let mut entry = new_entry(&shoot(spec_seed.as_deref(), None), "b-3", &ObjectSelector::default())
                .expect("entry");
            entry.status = Some(BackupEntryStatus { seed_name: status_seed.clone(), ..BackupEntryStatus::default() });
            let target = shoot(shoot_seed.as_deref(), purpose.as_deref());
            let mut merged = serde_json::to_value(&entry).expect("serializes");
            if let Some(patch) = entry_update(&entry, &target) {
                proptest::prop_assert!(patch.get("spec").and_then(|s| s.get("bucketName")).is_none());
                json_patch::merge(&mut merged, &patch);
            }
            let after: BackupEntry = serde_json::from_value(merged).expect("still an entry");
            proptest::prop_assert_eq!(&after.spec.bucket_name, "b-3");
            proptest::prop_assert_eq!(after.labels().get(LABEL_SEED).map(String::as_str), after.responsible_seed());
            proptest::prop_assert_eq!(entry_update(&after, &target), None);
        }
    }
}
