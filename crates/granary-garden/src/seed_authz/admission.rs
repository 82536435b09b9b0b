//! What a seed may write into the objects the authorizer lets it patch (a validating
//! admission decision, pure like [`super::decision`]).
//!
//! A seed's mirror (granary-seed's `mirror`) writes two things into garden BackupBuckets and
//! BackupEntries: the `gardener` finalizer (added when it takes an object on, removed
//! when done) and the status it reports. So, from a seed:
//! - an update of the object itself may add or remove the `gardener` finalizer and
//!   nothing else: labels (the seed label is how objects are assigned), annotations,
//!   owner references, other finalizers and the spec stay as they are;
//! - a status update may change only what a seed reports (`lastOperation`, `lastError`,
//!   `observedGeneration`, `providerStatus`, `generatedSecretRef`) and `seedName`, to
//!   itself or cleared (a hand-over); the garden's own fields (`entryCount`, …) stay;
//! - creating a Lease in `garden` must create its own `seed-<seed>`.
//!
//! Requests of anyone else, and any other request, are admitted: who may make them at
//! all is the authorizer's (and RBAC's) business.

use serde_json::{Map, Value};

use crate::seed_authz::identity::{SeedIdentities, seed_of};
use granary_api::core::{FINALIZER_GARDENER, GARDEN_NAMESPACE};

/// Status fields a seed reports (besides `seedName`, checked on its own).
const SEED_STATUS_FIELDS: &[&str] = &[
    "lastOperation",
    "lastError",
    "observedGeneration",
    "providerStatus",
    "generatedSecretRef",
];

/// Metadata fields a seed may not change (the finalizers are checked apart).
const GUARDED_METADATA: &[&str] = &["labels", "annotations", "ownerReferences"];

/// One write, as an AdmissionReview's request describes it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WriteRequest {
    pub user: String,
    pub groups: Vec<String>,
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub object: Option<Value>,
    pub old_object: Option<Value>,
}

/// The admission answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    Allowed,
    Denied(String),
}

/// Whether `request` may be written.
pub fn admit(request: &WriteRequest, identities: &SeedIdentities) -> Admission {
    let Some(seed) = seed_of(&request.user, &request.groups, identities) else {
        return Admission::Allowed;
    };
    let refuse = |why: String| Admission::Denied(format!("seed {seed}: {why}"));
    match (
        request.group.as_str(),
        request.resource.as_str(),
        request.operation.as_str(),
    ) {
        ("core.gardener.cloud", "backupbuckets" | "backupentries", "UPDATE") => {
            let (Some(new), Some(old)) = (&request.object, &request.old_object) else {
                return refuse("an update without its objects".to_string());
            };
            let problems = match request.subresource.as_str() {
                "" => object_changes(old, new),
                "status" => status_changes(old, new, seed),
                other => vec![format!("writes {other}")],
            };
            if problems.is_empty() {
                Admission::Allowed
            } else {
                refuse(format!(
                    "{} {}: a seed may {}; this request {}",
                    request.resource,
                    request.name,
                    if request.subresource.is_empty() {
                        "only add or remove the `gardener` finalizer"
                    } else {
                        "only report its own status"
                    },
                    problems.join(", ")
                ))
            }
        }
        ("core.gardener.cloud", "backupbuckets" | "backupentries", operation) => {
            refuse(format!("{} {}", operation.to_lowercase(), request.resource))
        }
        ("coordination.k8s.io", "leases", "CREATE") => {
            let own = format!("seed-{seed}");
            let name = request
                .object
                .as_ref()
                .and_then(|o| o.pointer("/metadata/name"))
                .and_then(Value::as_str)
                .unwrap_or(&request.name);
            if request.namespace == GARDEN_NAMESPACE && name == own {
                Admission::Allowed
            } else {
                refuse(format!(
                    "creates only its Lease {GARDEN_NAMESPACE}/{own}, not {}/{name}",
                    request.namespace
                ))
            }
        }
        _ => Admission::Allowed,
    }
}

fn field<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |v, key| v.get(key))
}

/// A missing field, `null` and an empty map or list all mean "none".
fn normalized(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| match v {
        Value::Null => false,
        Value::Object(m) => !m.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => true,
    })
}

fn finalizers(obj: &Value) -> Vec<&str> {
    let mut out: Vec<&str> = field(obj, &["metadata", "finalizers"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|f| *f != FINALIZER_GARDENER)
        .collect();
    out.sort_unstable();
    out
}

/// What an update of the object itself changes beyond the `gardener` finalizer.
fn object_changes(old: &Value, new: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if normalized(old.get("spec")) != normalized(new.get("spec")) {
        out.push("changes the spec".to_string());
    }
    for key in GUARDED_METADATA {
        let path = ["metadata", key];
        if normalized(field(old, &path)) != normalized(field(new, &path)) {
            out.push(format!("changes metadata.{key}"));
        }
    }
    if finalizers(old) != finalizers(new) {
        out.push("changes finalizers other than `gardener`".to_string());
    }
    out
}

/// What a status update changes beyond a seed's report.
fn status_changes(old: &Value, new: &Value, seed: &str) -> Vec<String> {
    let empty = Map::new();
    let status = |o: &'_ Value| -> Map<String, Value> {
        o.get("status")
            .and_then(Value::as_object)
            .unwrap_or(&empty)
            .clone()
    };
    let (old_status, new_status) = (status(old), status(new));
    let mut out = Vec::new();
    let mut keys: Vec<&String> = old_status.keys().chain(new_status.keys()).collect();
    keys.sort_unstable();
    keys.dedup();
    for key in keys {
        let (before, after) = (
            normalized(old_status.get(key)),
            normalized(new_status.get(key)),
        );
        if before == after || SEED_STATUS_FIELDS.contains(&key.as_str()) {
            continue;
        }
        if key == "seedName" {
            match after.map(|v| v.as_str()) {
                None => continue,
                Some(Some(s)) if s == seed => continue,
                _ => out.push("sets status.seedName to another seed".to_string()),
            }
            continue;
        }
        out.push(format!("changes status.{key}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const A: &str = "system:serviceaccount:granary-system:granary-seed-a";

    fn bucket() -> Value {
        json!({
            "apiVersion": "core.gardener.cloud/v1beta1",
            "kind": "BackupBucket",
            "metadata": {
                "name": "ba",
                "labels": {"granary.gardener.cloud/seed": "a", "granary.gardener.cloud/pool-kind": "cloudprofile"},
                "annotations": {"gardener.cloud/operation": "reconcile"},
                "finalizers": ["granary.gardener.cloud/garden"],
                "resourceVersion": "7",
            },
            "spec": {"seedName": "a", "provider": {"type": "aws", "region": "eu-1"}},
            "status": {"seedName": "a", "entryCount": 3, "lastOperation": {"type": "Create"}},
        })
    }

    fn update(user: &str, subresource: &str, change: impl Fn(&mut Value)) -> WriteRequest {
        let old = bucket();
        let mut new = old.clone();
        change(&mut new);
        WriteRequest {
            user: user.into(),
            operation: "UPDATE".into(),
            group: "core.gardener.cloud".into(),
            resource: "backupbuckets".into(),
            subresource: subresource.into(),
            name: "ba".into(),
            object: Some(new),
            old_object: Some(old),
            ..WriteRequest::default()
        }
    }

    fn verdict(r: &WriteRequest) -> Result<(), String> {
        match admit(r, &SeedIdentities::default()) {
            Admission::Allowed => Ok(()),
            Admission::Denied(why) => Err(why),
        }
    }

    #[test]
    fn a_seed_adds_and_removes_the_gardener_finalizer_and_nothing_else() {
        let add = update(A, "", |o| {
            o["metadata"]["finalizers"] = json!(["granary.gardener.cloud/garden", "gardener"]);
            o["metadata"]["resourceVersion"] = json!("8");
        });
        assert_eq!(verdict(&add), Ok(()));
        let mut remove = add.clone();
        std::mem::swap(&mut remove.object, &mut remove.old_object);
        assert_eq!(verdict(&remove), Ok(()));

        for (what, change) in [
            (
                "metadata.labels",
                Box::new(|o: &mut Value| {
                    o["metadata"]["labels"]["granary.gardener.cloud/pool-kind"] = json!("legacy")
                }) as Box<dyn Fn(&mut Value)>,
            ),
            (
                "metadata.labels",
                Box::new(|o: &mut Value| o["metadata"]["labels"] = json!(null)),
            ),
            (
                "metadata.annotations",
                Box::new(|o: &mut Value| {
                    o["metadata"]["annotations"]["gardener.cloud/operation"] = json!("migrate")
                }),
            ),
            (
                "the spec",
                Box::new(|o: &mut Value| o["spec"]["seedName"] = json!("b")),
            ),
            (
                "finalizers other than",
                Box::new(|o: &mut Value| o["metadata"]["finalizers"] = json!(["gardener"])),
            ),
            (
                "metadata.ownerReferences",
                Box::new(|o: &mut Value| {
                    o["metadata"]["ownerReferences"] = json!([{"kind": "Seed", "name": "a"}])
                }),
            ),
        ] {
            let err = verdict(&update(A, "", change)).expect_err(what);
            assert!(
                err.contains(what) && err.contains("seed a"),
                "{what}: {err}"
            );
        }
    }

    #[test]
    fn a_seed_reports_status_and_may_claim_or_release_only_for_itself() {
        let report = update(A, "status", |o| {
            o["status"]["lastOperation"] = json!({"type": "Reconcile", "state": "Succeeded"});
            o["status"]["lastError"] = json!(null);
            o["status"]["observedGeneration"] = json!(2);
            o["status"]["providerStatus"] = json!({"x": 1});
        });
        assert_eq!(verdict(&report), Ok(()));
        let release = update(A, "status", |o| {
            o["status"].as_object_mut().unwrap().remove("seedName");
        });
        assert_eq!(verdict(&release), Ok(()));
        let other = update(A, "status", |o| o["status"]["seedName"] = json!("b"));
        assert!(verdict(&other).unwrap_err().contains("another seed"));
        let count = update(A, "status", |o| o["status"]["entryCount"] = json!(0));
        assert!(verdict(&count).unwrap_err().contains("status.entryCount"));
    }

    #[test]
    fn others_pass_and_seeds_create_only_their_own_lease() {
        let admin = update("kubernetes-admin", "", |o| {
            o["spec"]["seedName"] = json!("b")
        });
        assert_eq!(verdict(&admin), Ok(()));
        let delete = WriteRequest {
            operation: "DELETE".into(),
            ..update(A, "", |_| {})
        };
        assert!(verdict(&delete).is_err());
        let lease = |namespace: &str, name: &str| WriteRequest {
            user: A.into(),
            operation: "CREATE".into(),
            group: "coordination.k8s.io".into(),
            resource: "leases".into(),
            namespace: namespace.into(),
            object: Some(json!({"metadata": {"name": name, "namespace": namespace}})),
            ..WriteRequest::default()
        };
        assert_eq!(verdict(&lease("garden", "seed-a")), Ok(()));
        assert!(verdict(&lease("garden", "seed-b")).is_err());
        assert!(verdict(&lease("granary-system", "seed-a")).is_err());
        // a Secret write is not this webhook's to judge
        let secret = WriteRequest {
            resource: "secrets".into(),
            group: String::new(),
            ..lease("garden", "x")
        };
        assert_eq!(verdict(&secret), Ok(()));
    }
}
