//! Which garden requests a seed may make: Granary's counterpart of Gardener's
//! SeedAuthorizer, as one pure function over the request's attributes and the garden's
//! buckets and entries.
//!
//! A seed may
//! - get, and patch (finalizers; status), the BackupBuckets and BackupEntries assigned to
//!   it: labelled `granary.gardener.cloud/seed=<seed>` or with the seed responsible
//!   (`status.seedName`, else `spec.seedName`; docs/architecture.md#bucket-assignment);
//!   get the buckets its entries are in (an entry's credentials are its bucket's);
//! - list and watch them only through a label selector on its own seed (or by name);
//! - get (or watch by name) only the credentials Secrets of the buckets it may get, and
//!   the landscape's integrity signing keys (`garden/granary-integrity-keys`);
//! - get, update and patch only its Lease `garden/seed-<seed>`, and create Leases in
//!   `garden` (a create names no object to authorize; admission checks the name).
//!
//! Everything else on these four resources is denied outright, so a wider RBAC grant
//! cannot open it again. Other resources, and users that are not seeds, get no opinion:
//! RBAC decides. A get of a bucket or entry the garden does not have is allowed, so the
//! seed learns "not found" rather than "forbidden" (the object is gone; its mirror then
//! lets go). Secrets are never readable that way.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use kube::ResourceExt;

use crate::seed_authz::identity::{SeedIdentities, seed_of};
use granary_api::core::{
    BackupBucket, BackupEntry, GARDEN_NAMESPACE, INTEGRITY_KEYS_SECRET, LABEL_SEED,
};

/// The API group of the garden's buckets and entries.
const CORE_GROUP: &str = "core.gardener.cloud";

/// A request kube-apiserver asks about (a SubjectAccessReview's spec).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Attributes {
    pub user: String,
    pub groups: Vec<String>,
    /// `None` for a non-resource request (discovery, `/version`).
    pub resource: Option<ResourceRequest>,
}

/// The resource part of a request. Empty strings stand for absent fields.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourceRequest {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    /// For a list or watch with the field selector `metadata.name=<name>`,
    /// kube-apiserver puts that name here.
    pub name: String,
    /// The label selector of a list or watch; `None` when the review carries none (no
    /// selector, or kube-apiserver before 1.32 / without `AuthorizeWithSelectors`).
    pub label_selector: Option<Vec<Requirement>>,
    /// The field selector of a list or watch, likewise.
    pub field_selector: Option<Vec<Requirement>>,
}

/// One selector requirement: operator `In`, `NotIn`, `Exists` or `DoesNotExist`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub operator: String,
    pub values: Vec<String>,
}

impl Requirement {
    pub fn equals(key: &str, value: &str) -> Self {
        Requirement {
            key: key.to_string(),
            operator: "In".to_string(),
            values: vec![value.to_string()],
        }
    }

    /// The one value this requirement pins `key` to, if it does.
    fn pins(&self, key: &str) -> Option<&str> {
        match (
            self.key == key,
            self.operator.as_str(),
            self.values.as_slice(),
        ) {
            (true, "In" | "=" | "==", [value]) => Some(value),
            _ => None,
        }
    }
}

/// The answer for kube-apiserver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Refused whatever other authorizers would say.
    Deny(String),
    /// Not this authorizer's business: the next one (RBAC) decides.
    NoOpinion,
}

/// How the decision is tuned (from the garden configuration).
#[derive(Clone, Debug, Default)]
pub struct Policy {
    pub identities: SeedIdentities,
    /// List and watch with no label selector in the review are allowed (kube-apiserver
    /// older than 1.32 never passes one).
    pub allow_list_without_label_selector: bool,
}

/// What the garden holds, as the decision sees it.
#[derive(Clone, Copy, Debug)]
pub struct GardenView<'a> {
    pub buckets: &'a [Arc<BackupBucket>],
    pub entries: &'a [Arc<BackupEntry>],
}

impl GardenView<'_> {
    fn bucket(&self, name: &str) -> Option<&BackupBucket> {
        self.buckets
            .iter()
            .map(Arc::as_ref)
            .find(|b| b.name_any() == name)
    }

    fn entry(&self, namespace: &str, name: &str) -> Option<&BackupEntry> {
        self.entries
            .iter()
            .map(Arc::as_ref)
            .find(|e| e.name_any() == name && e.namespace().as_deref() == Some(namespace))
    }

    /// Whether one of `seed`'s entries is in bucket `bucket`.
    fn has_entry_in(&self, seed: &str, bucket: &str) -> bool {
        self.entries
            .iter()
            .any(|e| e.spec.bucket_name == bucket && entry_assigned(e, seed))
    }

    /// Whether `seed` may read Secret `namespace/name`: the credentials of a bucket it
    /// may get.
    fn credentials_readable(&self, seed: &str, namespace: &str, name: &str) -> bool {
        // A pool's shards share one Secret: look at the entries once, not per bucket.
        let users: Vec<&BackupBucket> = self
            .buckets
            .iter()
            .map(Arc::as_ref)
            .filter(|b| {
                // A credentialsRef may name a WorkloadIdentity: only Secrets count.
                b.credentials()
                    .is_some_and(|r| r.is_secret() && r.name == name && r.namespace == namespace)
            })
            .collect();
        if users
            .iter()
            .any(|b| bucket_assigned(b, seed) || velero_reader(b, seed))
        {
            return true;
        }
        let names: HashSet<String> = users.iter().map(|b| b.name_any()).collect();
        !names.is_empty()
            && self
                .entries
                .iter()
                .any(|e| names.contains(&e.spec.bucket_name) && entry_assigned(e, seed))
    }
}

fn labelled(labels: &BTreeMap<String, String>, seed: &str) -> bool {
    labels.get(LABEL_SEED).map(String::as_str) == Some(seed)
}

/// Whether `seed` holds the bucket (its label, or responsible by status/spec).
pub(crate) fn bucket_assigned(bucket: &BackupBucket, seed: &str) -> bool {
    labelled(bucket.labels(), seed) || bucket.responsible_seed() == Some(seed)
}

/// Whether the garden made `seed` a reader of the Velero prefixes in the bucket (one of
/// the seeds of its pool: docs/architecture.md#sibling-locations).
pub(crate) fn velero_reader(bucket: &BackupBucket, seed: &str) -> bool {
    bucket
        .labels()
        .get(&granary_api::core::velero_reader_label(seed))
        .is_some_and(|v| v == "true")
}

/// Whether `seed` holds the entry (its label, or responsible by status/spec).
pub(crate) fn entry_assigned(entry: &BackupEntry, seed: &str) -> bool {
    labelled(entry.labels(), seed) || entry.responsible_seed() == Some(seed)
}

/// The decision for `attrs`.
pub fn decide(attrs: &Attributes, view: GardenView<'_>, policy: &Policy) -> Decision {
    let Some(seed) = seed_of(&attrs.user, &attrs.groups, &policy.identities) else {
        return Decision::NoOpinion;
    };
    let Some(r) = &attrs.resource else {
        return Decision::NoOpinion;
    };
    match (r.group.as_str(), r.resource.as_str()) {
        (CORE_GROUP, "backupbuckets") => buckets(seed, r, view, policy),
        (CORE_GROUP, "backupentries") => entries(seed, r, view, policy),
        ("", "secrets") => secrets(seed, r, view),
        ("coordination.k8s.io", "leases") => leases(seed, r),
        _ => Decision::NoOpinion,
    }
}

fn deny(seed: &str, what: impl std::fmt::Display) -> Decision {
    Decision::Deny(format!("seed {seed}: {what}"))
}

fn allow_if(condition: bool, seed: &str, why_not: impl std::fmt::Display) -> Decision {
    if condition {
        Decision::Allow
    } else {
        deny(seed, why_not)
    }
}

/// The object name of a request: its name, or the name a field selector pins.
fn object_name(r: &ResourceRequest) -> Option<&str> {
    if !r.name.is_empty() {
        return Some(&r.name);
    }
    r.field_selector
        .iter()
        .flatten()
        .find_map(|q| q.pins("metadata.name"))
}

/// A list or watch of buckets or entries: by name when a name is pinned (then as a
/// get of that object), else only through the seed's label (or, for buckets, its reader
/// label).
fn collection(
    seed: &str,
    r: &ResourceRequest,
    policy: &Policy,
    readable: impl Fn(&str) -> bool,
) -> Decision {
    let reader_label = granary_api::core::velero_reader_label(seed);
    if let Some(name) = object_name(r) {
        return allow_if(
            readable(name),
            seed,
            format_args!("{} {name} is another seed's", r.resource),
        );
    }
    match &r.label_selector {
        Some(requirements) => allow_if(
            requirements.iter().any(|q| {
                q.pins(LABEL_SEED) == Some(seed)
                    || (r.resource == "backupbuckets" && q.pins(&reader_label) == Some("true"))
            }),
            seed,
            format_args!(
                "{} {} must select the label {LABEL_SEED}={seed}",
                r.verb, r.resource
            ),
        ),
        None => allow_if(
            policy.allow_list_without_label_selector,
            seed,
            format_args!(
                "{} {} must select the label {LABEL_SEED}={seed} (the review carries no \
                 label selector: kube-apiserver 1.32 or later passes it)",
                r.verb, r.resource
            ),
        ),
    }
}

fn buckets(seed: &str, r: &ResourceRequest, view: GardenView<'_>, policy: &Policy) -> Decision {
    // Readable: the seed's own, one its entries are in, one of its pool's whose Velero
    // prefixes it reads, or one the garden does not have.
    let readable = |name: &str| match view.bucket(name) {
        Some(b) => {
            bucket_assigned(b, seed) || view.has_entry_in(seed, name) || velero_reader(b, seed)
        }
        None => true,
    };
    let writable = |name: &str| view.bucket(name).is_some_and(|b| bucket_assigned(b, seed));
    let name = r.name.as_str();
    match (r.subresource.as_str(), r.verb.as_str()) {
        ("", "list" | "watch") => collection(seed, r, policy, readable),
        ("", "get") => allow_if(
            readable(name),
            seed,
            format_args!("backupbucket {name} is another seed's"),
        ),
        ("", "patch") | ("status", "get" | "patch") => allow_if(
            writable(name),
            seed,
            format_args!("backupbucket {name} is not assigned to it"),
        ),
        (sub, verb) => deny(seed, refused(verb, "backupbuckets", sub)),
    }
}

fn entries(seed: &str, r: &ResourceRequest, view: GardenView<'_>, policy: &Policy) -> Decision {
    let ns = r.namespace.as_str();
    let readable = |name: &str| view.entry(ns, name).is_none_or(|e| entry_assigned(e, seed));
    let writable = |name: &str| {
        view.entry(ns, name)
            .is_some_and(|e| entry_assigned(e, seed))
    };
    let name = r.name.as_str();
    match (r.subresource.as_str(), r.verb.as_str()) {
        ("", "list" | "watch") => collection(seed, r, policy, readable),
        ("", "get") => allow_if(
            readable(name),
            seed,
            format_args!("backupentry {ns}/{name} is another seed's"),
        ),
        ("", "patch") | ("status", "get" | "patch") => allow_if(
            writable(name),
            seed,
            format_args!("backupentry {ns}/{name} is not assigned to it"),
        ),
        (sub, verb) => deny(seed, refused(verb, "backupentries", sub)),
    }
}

fn secrets(seed: &str, r: &ResourceRequest, view: GardenView<'_>) -> Decision {
    let ns = r.namespace.as_str();
    if !r.subresource.is_empty() || !matches!(r.verb.as_str(), "get" | "list" | "watch") {
        return deny(seed, refused(&r.verb, "secrets", &r.subresource));
    }
    match object_name(r) {
        // The landscape's integrity signing keys: every seed signs and verifies with
        // them (docs/formats.md#integrity-record).
        Some(INTEGRITY_KEYS_SECRET) if ns == GARDEN_NAMESPACE => Decision::Allow,
        Some(name) => allow_if(
            view.credentials_readable(seed, ns, name),
            seed,
            format_args!("secret {ns}/{name} is no credentials of its buckets"),
        ),
        None => deny(
            seed,
            format_args!(
                "{} secrets: only by name (fieldSelector metadata.name=<credentials>)",
                r.verb
            ),
        ),
    }
}

fn leases(seed: &str, r: &ResourceRequest) -> Decision {
    let own = format!("seed-{seed}");
    let in_garden = r.namespace == GARDEN_NAMESPACE;
    if !r.subresource.is_empty() {
        return deny(seed, refused(&r.verb, "leases", &r.subresource));
    }
    match r.verb.as_str() {
        // The name is in the body, not in the review: admission checks it.
        "create" => allow_if(
            in_garden,
            seed,
            format_args!("creates only its Lease {GARDEN_NAMESPACE}/{own}"),
        ),
        "get" | "update" | "patch" | "list" | "watch" => allow_if(
            in_garden && object_name(r) == Some(own.as_str()),
            seed,
            format_args!("{} leases: only its Lease {GARDEN_NAMESPACE}/{own}", r.verb),
        ),
        verb => deny(seed, refused(verb, "leases", "")),
    }
}

fn refused(verb: &str, resource: &str, subresource: &str) -> String {
    if subresource.is_empty() {
        format!("{verb} {resource} is not a seed's to do")
    } else {
        format!("{verb} {resource}/{subresource} is not a seed's to do")
    }
}

#[cfg(test)]
mod tests;
