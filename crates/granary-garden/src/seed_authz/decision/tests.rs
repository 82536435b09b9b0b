//! The decision table: two seeds, `a` and `b`, each with a bucket, an entry and the
//! bucket's credentials; `a` has an entry in a bucket of `b`'s; one bucket is being
//! handed over from `a` to `b`.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::seed_authz::identity::GARDENER_SEEDS_GROUP;
use granary_api::common::ObjectReference;
use granary_api::core::{
    BackupBucketSpec, BackupBucketStatus, BackupEntrySpec, BackupEntryStatus, LABEL_SEED,
};

const A: &str = "system:serviceaccount:granary-system:granary-seed-a";
const B: &str = "system:serviceaccount:granary-system:granary-seed-b";
const C: &str = "system:serviceaccount:granary-system:granary-seed-c";
const ADMIN: &str = "kubernetes-admin";

fn labels(seed: Option<&str>) -> Option<BTreeMap<String, String>> {
    seed.map(|s| BTreeMap::from([(LABEL_SEED.to_string(), s.to_string())]))
}

fn bucket(name: &str, label: Option<&str>, spec: &str, status: Option<&str>) -> Arc<BackupBucket> {
    let mut b = BackupBucket::new(
        name,
        BackupBucketSpec {
            seed_name: Some(spec.to_string()),
            credentials_ref: Some(ObjectReference {
                api_version: "v1".into(),
                kind: "Secret".into(),
                namespace: "garden".into(),
                name: format!("creds-{name}"),
                ..ObjectReference::default()
            }),
            ..BackupBucketSpec::default()
        },
    );
    b.metadata.labels = labels(label);
    b.status = status.map(|s| BackupBucketStatus {
        seed_name: Some(s.to_string()),
        ..BackupBucketStatus::default()
    });
    Arc::new(b)
}

/// A bucket of `seed` whose credentials are a WorkloadIdentity `creds-<name>`.
fn workload_identity_bucket(name: &str, seed: &str) -> Arc<BackupBucket> {
    let mut b = (*bucket(name, Some(seed), seed, Some(seed))).clone();
    if let Some(r) = b.spec.credentials_ref.as_mut() {
        r.api_version = "security.gardener.cloud/v1alpha1".into();
        r.kind = "WorkloadIdentity".into();
    }
    Arc::new(b)
}

/// A bucket held by `seed` whose pool's seeds are `readers` (their reader labels).
fn pool_bucket(name: &str, seed: &str, readers: &[&str]) -> Arc<BackupBucket> {
    let mut b = (*bucket(name, Some(seed), seed, Some(seed))).clone();
    let labels = b.metadata.labels.get_or_insert_with(BTreeMap::new);
    for r in readers {
        labels.insert(granary_api::core::velero_reader_label(r), "true".into());
    }
    Arc::new(b)
}

fn entry(name: &str, bucket: &str, seed: &str) -> Arc<BackupEntry> {
    let mut e = BackupEntry::new(
        name,
        BackupEntrySpec {
            bucket_name: bucket.to_string(),
            seed_name: Some(seed.to_string()),
            ..BackupEntrySpec::default()
        },
    );
    e.metadata.namespace = Some("garden-dev".into());
    e.metadata.labels = labels(Some(seed));
    e.status = Some(BackupEntryStatus {
        seed_name: Some(seed.to_string()),
        ..BackupEntryStatus::default()
    });
    Arc::new(e)
}

struct Landscape {
    buckets: Vec<Arc<BackupBucket>>,
    entries: Vec<Arc<BackupEntry>>,
}

fn landscape() -> Landscape {
    Landscape {
        buckets: vec![
            bucket("ba", Some("a"), "a", Some("a")),
            bucket("bb", Some("b"), "b", Some("b")),
            // b's, but a has an entry in it
            bucket("shared", Some("b"), "b", None),
            // handed over from a to b: a still holds it
            bucket("moving", Some("a"), "b", Some("a")),
            // released by a (status cleared), not relabelled yet
            bucket("released", Some("a"), "b", None),
            workload_identity_bucket("wi", "a"),
            // b's bucket of a pool whose seeds are b and c: c reads the Velero prefixes
            pool_bucket("pool-b", "b", &["b", "c"]),
        ],
        entries: vec![
            entry("ea", "ba", "a"),
            entry("eb", "bb", "b"),
            entry("ea-shared", "shared", "a"),
        ],
    }
}

fn request(verb: &str, resource: &str, namespace: &str, name: &str) -> ResourceRequest {
    let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
    let group = match resource {
        "backupbuckets" | "backupentries" => "core.gardener.cloud",
        "leases" => "coordination.k8s.io",
        "secrets" | "configmaps" => "",
        other => panic!("no group for {other}"),
    };
    ResourceRequest {
        verb: verb.into(),
        group: group.into(),
        resource: resource.into(),
        subresource: subresource.into(),
        namespace: namespace.into(),
        name: name.into(),
        ..ResourceRequest::default()
    }
}

fn with_labels(mut r: ResourceRequest, seed: &[&str]) -> ResourceRequest {
    r.label_selector = Some(vec![Requirement {
        key: LABEL_SEED.into(),
        operator: "In".into(),
        values: seed.iter().map(|s| s.to_string()).collect(),
    }]);
    r
}

fn with_name_field(mut r: ResourceRequest, name: &str) -> ResourceRequest {
    r.field_selector = Some(vec![Requirement::equals("metadata.name", name)]);
    r
}

fn decide_as(user: &str, groups: &[&str], r: ResourceRequest, policy: &Policy) -> Decision {
    let l = landscape();
    let attrs = Attributes {
        user: user.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        resource: Some(r),
    };
    let view = GardenView {
        buckets: &l.buckets,
        entries: &l.entries,
    };
    decide(&attrs, view, policy)
}

/// `Some(true)`: Allow, `Some(false)`: Deny, `None`: NoOpinion.
fn verdict(d: &Decision) -> Option<bool> {
    match d {
        Decision::Allow => Some(true),
        Decision::Deny(_) => Some(false),
        Decision::NoOpinion => None,
    }
}

fn check(table: &[(&str, ResourceRequest, Option<bool>)], policy: &Policy) {
    let mut wrong = Vec::new();
    for (user, r, want) in table {
        let got = decide_as(user, &[], r.clone(), policy);
        if verdict(&got) != *want {
            wrong.push(format!("{user} {r:?}: want {want:?}, got {got:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

const ALLOW: Option<bool> = Some(true);
const DENY: Option<bool> = Some(false);

#[test]
fn a_seed_reads_and_patches_its_buckets_and_reads_those_its_entries_are_in() {
    let p = Policy::default();
    check(
        &[
            (A, request("get", "backupbuckets", "", "ba"), ALLOW),
            (A, request("patch", "backupbuckets", "", "ba"), ALLOW),
            (A, request("patch", "backupbuckets/status", "", "ba"), ALLOW),
            (A, request("get", "backupbuckets/status", "", "ba"), ALLOW),
            (A, request("get", "backupbuckets", "", "bb"), DENY),
            (A, request("patch", "backupbuckets", "", "bb"), DENY),
            (A, request("patch", "backupbuckets/status", "", "bb"), DENY),
            // an entry of a's is in it: readable, not writable
            (A, request("get", "backupbuckets", "", "shared"), ALLOW),
            (
                A,
                request("patch", "backupbuckets/status", "", "shared"),
                DENY,
            ),
            // gone from the garden: "not found" rather than "forbidden"
            (A, request("get", "backupbuckets", "", "gone"), ALLOW),
            (A, request("patch", "backupbuckets", "", "gone"), DENY),
            // verbs no seed needs, even on its own bucket
            (A, request("update", "backupbuckets", "", "ba"), DENY),
            (A, request("delete", "backupbuckets", "", "ba"), DENY),
            (A, request("create", "backupbuckets", "", ""), DENY),
            (
                A,
                request("deletecollection", "backupbuckets", "", ""),
                DENY,
            ),
            (
                A,
                request("patch", "backupbuckets/finalize", "", "ba"),
                DENY,
            ),
            (B, request("get", "backupbuckets", "", "bb"), ALLOW),
            (B, request("get", "backupbuckets", "", "ba"), DENY),
        ],
        &p,
    );
}

#[test]
fn a_hand_over_leaves_the_bucket_with_the_old_seed_until_it_lets_go() {
    let p = Policy::default();
    check(
        &[
            (
                A,
                request("patch", "backupbuckets/status", "", "moving"),
                ALLOW,
            ),
            (
                B,
                request("patch", "backupbuckets/status", "", "moving"),
                DENY,
            ),
            (B, request("get", "backupbuckets", "", "moving"), DENY),
            // released: b is responsible; a keeps it until the garden relabels
            (B, request("patch", "backupbuckets", "", "released"), ALLOW),
            (A, request("get", "backupbuckets", "", "released"), ALLOW),
        ],
        &p,
    );
}

#[test]
fn a_seed_reads_and_patches_only_its_entries() {
    let p = Policy::default();
    let ns = "garden-dev";
    check(
        &[
            (A, request("get", "backupentries", ns, "ea"), ALLOW),
            (A, request("patch", "backupentries", ns, "ea"), ALLOW),
            (A, request("patch", "backupentries/status", ns, "ea"), ALLOW),
            (A, request("get", "backupentries", ns, "eb"), DENY),
            (A, request("patch", "backupentries", ns, "eb"), DENY),
            (A, request("patch", "backupentries/status", ns, "eb"), DENY),
            // the same name in another namespace is another object (here: none)
            (A, request("patch", "backupentries", "other", "ea"), DENY),
            (A, request("get", "backupentries", "other", "eb"), ALLOW),
            (A, request("delete", "backupentries", ns, "ea"), DENY),
            (A, request("create", "backupentries", ns, ""), DENY),
            (B, request("patch", "backupentries/status", ns, "eb"), ALLOW),
        ],
        &p,
    );
}

#[test]
fn lists_and_watches_select_the_seed_label_or_one_readable_name() {
    let strict = Policy::default();
    let mut table = Vec::new();
    for resource in ["backupbuckets", "backupentries"] {
        for verb in ["list", "watch"] {
            let all = request(verb, resource, "", "");
            table.extend([
                (A, with_labels(all.clone(), &["a"]), ALLOW),
                (A, with_labels(all.clone(), &["b"]), DENY),
                (A, with_labels(all.clone(), &["a", "b"]), DENY),
                (A, all.clone(), DENY),
                (B, with_labels(all.clone(), &["b"]), ALLOW),
            ]);
        }
    }
    table.extend([
        (
            A,
            with_name_field(request("watch", "backupbuckets", "", ""), "ba"),
            ALLOW,
        ),
        (
            A,
            with_name_field(request("watch", "backupbuckets", "", ""), "bb"),
            DENY,
        ),
        (
            A,
            request("list", "backupentries", "garden-dev", "eb"),
            DENY,
        ),
    ]);
    check(&table, &strict);

    // kube-apiserver before 1.32 passes no selectors: allowed when configured so, but
    // a selector it does pass is still checked.
    let lenient = Policy {
        allow_list_without_label_selector: true,
        ..Policy::default()
    };
    let all = request("watch", "backupbuckets", "", "");
    check(
        &[(A, all.clone(), ALLOW), (A, with_labels(all, &["b"]), DENY)],
        &lenient,
    );
}

#[test]
fn a_seed_reads_only_the_credentials_of_its_buckets_and_only_by_name() {
    let p = Policy::default();
    let g = "garden";
    check(
        &[
            (A, request("get", "secrets", g, "creds-ba"), ALLOW),
            (A, request("get", "secrets", g, "creds-shared"), ALLOW),
            (A, request("get", "secrets", g, "creds-bb"), DENY),
            (B, request("get", "secrets", g, "creds-bb"), ALLOW),
            (B, request("get", "secrets", g, "creds-ba"), DENY),
            // the name in another namespace, or a Secret no bucket uses
            (A, request("get", "secrets", "other", "creds-ba"), DENY),
            (A, request("get", "secrets", g, "creds-gone"), DENY),
            // a WorkloadIdentity of that name is no Secret
            (A, request("get", "secrets", g, "creds-wi"), DENY),
            // watched by name: kube-apiserver names it from the field selector
            (A, request("watch", "secrets", g, "creds-ba"), ALLOW),
            (
                A,
                with_name_field(request("list", "secrets", g, ""), "creds-ba"),
                ALLOW,
            ),
            (
                A,
                with_name_field(request("list", "secrets", g, ""), "creds-bb"),
                DENY,
            ),
            // the whole namespace
            (A, request("list", "secrets", g, ""), DENY),
            (A, request("watch", "secrets", g, ""), DENY),
            (A, request("watch", "secrets", "", ""), DENY),
            // writes
            (A, request("update", "secrets", g, "creds-ba"), DENY),
            (A, request("create", "secrets", g, ""), DENY),
            (A, request("delete", "secrets", g, "creds-ba"), DENY),
            // the landscape's integrity keys: every seed reads them, none writes them
            (
                A,
                request("get", "secrets", g, "granary-integrity-keys"),
                ALLOW,
            ),
            (
                B,
                request("watch", "secrets", g, "granary-integrity-keys"),
                ALLOW,
            ),
            (
                A,
                request("get", "secrets", "other", "granary-integrity-keys"),
                DENY,
            ),
            (
                A,
                request("update", "secrets", g, "granary-integrity-keys"),
                DENY,
            ),
            (
                A,
                request("delete", "secrets", g, "granary-integrity-keys"),
                DENY,
            ),
        ],
        &p,
    );
}

#[test]
fn a_seed_renews_only_its_own_lease() {
    let p = Policy::default();
    let g = "garden";
    check(
        &[
            (A, request("get", "leases", g, "seed-a"), ALLOW),
            (A, request("update", "leases", g, "seed-a"), ALLOW),
            (A, request("patch", "leases", g, "seed-a"), ALLOW),
            (A, request("create", "leases", g, ""), ALLOW),
            (A, request("get", "leases", g, "seed-b"), DENY),
            (A, request("update", "leases", g, "seed-b"), DENY),
            (
                A,
                request("update", "leases", "granary-system", "seed-a"),
                DENY,
            ),
            (A, request("create", "leases", "granary-system", ""), DENY),
            (A, request("delete", "leases", g, "seed-a"), DENY),
            (A, request("list", "leases", g, ""), DENY),
        ],
        &p,
    );
}

#[test]
fn others_and_other_resources_get_no_opinion() {
    let p = Policy::default();
    check(
        &[
            (ADMIN, request("get", "secrets", "garden", "creds-bb"), None),
            (ADMIN, request("patch", "backupbuckets", "", "bb"), None),
            (
                "system:serviceaccount:granary-system:granary-garden",
                request("list", "backupentries", "", ""),
                None,
            ),
            (A, request("get", "configmaps", "garden", "x"), None),
        ],
        &p,
    );
    let non_resource = Attributes {
        user: A.into(),
        groups: vec![],
        resource: None,
    };
    let l = landscape();
    let view = GardenView {
        buckets: &l.buckets,
        entries: &l.entries,
    };
    assert_eq!(decide(&non_resource, view, &p), Decision::NoOpinion);
}

#[test]
fn gardener_seed_identities_are_seeds_too() {
    let p = Policy::default();
    let user = "gardener.cloud:system:seed:b";
    let r = request("get", "secrets", "garden", "creds-bb");
    assert_eq!(
        decide_as(user, &[GARDENER_SEEDS_GROUP], r.clone(), &p),
        Decision::Allow
    );
    let other = request("get", "secrets", "garden", "creds-ba");
    assert!(matches!(
        decide_as(user, &[GARDENER_SEEDS_GROUP], other, &p),
        Decision::Deny(reason) if reason.contains("seed b") && reason.contains("creds-ba")
    ));
    // without the group, RBAC decides
    assert_eq!(decide_as(user, &[], r, &p), Decision::NoOpinion);
}

fn with_reader_label(mut r: ResourceRequest, seed: &str) -> ResourceRequest {
    r.label_selector = Some(vec![Requirement {
        key: granary_api::core::velero_reader_label(seed),
        operator: "=".into(),
        values: vec!["true".into()],
    }]);
    r
}

/// The seeds of a pool read (never write) each other's Velero prefixes: the buckets the
/// garden labels them readers of, found by their label, and those buckets' credentials;
/// a seed outside the pool gets nothing.
#[test]
fn the_seeds_of_a_pool_read_its_buckets_and_credentials_and_no_one_else_does() {
    let p = Policy::default();
    check(
        &[
            (C, request("get", "backupbuckets", "", "pool-b"), ALLOW),
            (
                C,
                with_reader_label(request("list", "backupbuckets", "", ""), "c"),
                ALLOW,
            ),
            (
                C,
                with_reader_label(request("watch", "backupbuckets", "", ""), "c"),
                ALLOW,
            ),
            (
                C,
                request("get", "secrets", "garden", "creds-pool-b"),
                ALLOW,
            ),
            // reading is all: the bucket stays b's
            (C, request("patch", "backupbuckets", "", "pool-b"), DENY),
            (
                C,
                request("patch", "backupbuckets/status", "", "pool-b"),
                DENY,
            ),
            (
                C,
                request("update", "secrets", "garden", "creds-pool-b"),
                DENY,
            ),
            // another reader's label is not c's to select, nor are others' buckets
            (
                C,
                with_reader_label(request("list", "backupbuckets", "", ""), "a"),
                DENY,
            ),
            (C, request("get", "backupbuckets", "", "ba"), DENY),
            (C, request("get", "secrets", "garden", "creds-ba"), DENY),
            // a is not of the pool
            (A, request("get", "backupbuckets", "", "pool-b"), DENY),
            (A, request("get", "secrets", "garden", "creds-pool-b"), DENY),
            (
                A,
                with_reader_label(request("list", "backupbuckets", "", ""), "c"),
                DENY,
            ),
        ],
        &p,
    );
}
