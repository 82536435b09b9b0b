//! A planted backup is no way around RBAC: a namespace owner (bound to `admin` in their
//! namespace) restores, with a NonAdminRestore through their own credentials, a backup
//! of their namespace holding a RoleBinding of themselves to `cluster-admin`, a Role
//! granting everything and a binding to that Role. The Velero Restore runs with the
//! controllers' identity, which may create anything; still none of those three is
//! created, and the restore's results name each with the reason, while a RoleBinding to
//! `edit` of the same backup (within `velero.nonAdmin.restoreRoleCeiling`, `admin` by
//! default) is restored.
//!
//! The backup is planted as a tenant could plant one (any Velero-format data in a
//! location the controllers read): here the administrator makes the objects in the
//! owner's namespace, the owner backs the namespace up with a NonAdminBackup, and the
//! administrator deletes the objects again before the owner restores.

use granary_api::oadp::NonAdminBackup;
use granary_api::oadp::NonAdminRestore;
use granary_api::velero::{BackupSpec, RestorePhase, RestoreSpec};
use granary_velero::files::Results;
use granary_velero::layout::StorageLayout;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, DeleteParams, PostParams};

use granary_test_support::poll_until;
use granary_test_support::worlds::nonadmin::{BUCKET, PREFIX, start, wait_backed_up};

const RBAC: &str = "rbac.authorization.k8s.io";

fn binding(name: &str, kind: &str, role: &str, user: &str) -> RoleBinding {
    let mut b = RoleBinding::default();
    b.metadata.name = Some(name.into());
    b.role_ref = RoleRef {
        api_group: RBAC.into(),
        kind: kind.into(),
        name: role.into(),
    };
    b.subjects = Some(vec![Subject {
        kind: "User".into(),
        name: user.into(),
        api_group: Some(RBAC.into()),
        ..Default::default()
    }]);
    b
}

#[tokio::test]
async fn a_non_admin_restore_creates_no_rbac_object_beyond_the_ceiling() {
    let Some(t) = start().await else { return };
    let ns = t.ns_a.as_str();
    let pp = PostParams::default();
    let admin_bindings: Api<RoleBinding> = Api::namespaced(t.admin.clone(), ns);
    let admin_roles: Api<Role> = Api::namespaced(t.admin.clone(), ns);

    // What the planted backup holds.
    let mut everything = Role::default();
    everything.metadata.name = Some("planted-everything".into());
    everything.rules = Some(vec![PolicyRule {
        api_groups: Some(vec!["*".into()]),
        resources: Some(vec!["*".into()]),
        verbs: vec!["*".into()],
        ..Default::default()
    }]);
    admin_roles.create(&pp, &everything).await.expect("role");
    let planted = [
        binding(
            "planted-cluster-admin",
            "ClusterRole",
            "cluster-admin",
            &t.user_a,
        ),
        binding(
            "planted-everything",
            "Role",
            "planted-everything",
            &t.user_a,
        ),
        binding("team-edit", "ClusterRole", "edit", "dev"),
    ];
    for b in &planted {
        admin_bindings.create(&pp, b).await.expect("binding");
    }
    let nabs: Api<NonAdminBackup> = Api::namespaced(t.owner_a.clone(), ns);
    nabs.create(&pp, &t.nab("planted", BackupSpec::default()))
        .await
        .expect("nab");
    wait_backed_up(&nabs, "planted").await;
    let dp = DeleteParams::default();
    admin_roles
        .delete("planted-everything", &dp)
        .await
        .expect("delete role");
    for b in &planted {
        admin_bindings
            .delete(b.metadata.name.as_deref().expect("name"), &dp)
            .await
            .expect("delete binding");
    }
    poll_until("the planted objects are gone", || async {
        admin_bindings
            .get_opt("team-edit")
            .await
            .is_ok_and(|b| b.is_none())
            && admin_roles
                .get_opt("planted-everything")
                .await
                .is_ok_and(|r| r.is_none())
    })
    .await;

    // The owner restores it.
    let nars: Api<NonAdminRestore> = Api::namespaced(t.owner_a.clone(), ns);
    nars.create(
        &pp,
        &t.nar(
            "planted",
            RestoreSpec {
                backup_name: Some("planted".into()),
                ..Default::default()
            },
        ),
    )
    .await
    .expect("nar");
    let finished = |p: &Option<RestorePhase>| {
        matches!(
            p,
            Some(
                RestorePhase::Completed
                    | RestorePhase::PartiallyFailed
                    | RestorePhase::Failed
                    | RestorePhase::FailedValidation
            )
        )
    };
    poll_until("the non-admin restore finished", || async {
        let phase = nars
            .get("planted")
            .await
            .ok()
            .and_then(|n| n.status)
            .and_then(|s| s.velero_restore)
            .and_then(|v| v.status)
            .and_then(|s| s.phase);
        finished(&phase)
    })
    .await;
    // What the owner sees of it: partly failed, three errors.
    let nar = nars.get("planted").await.expect("nar");
    let velero_restore = nar
        .status
        .and_then(|s| s.velero_restore)
        .expect("status.veleroRestore");
    let status = velero_restore.status.clone().expect("restore status");
    assert_eq!(
        status.phase,
        Some(RestorePhase::PartiallyFailed),
        "{status:?}"
    );
    assert_eq!(status.errors, Some(3), "{status:?}");

    // Nothing beyond the ceiling was created; the binding to edit was.
    let owner_bindings: Api<RoleBinding> = Api::namespaced(t.owner_a.clone(), ns);
    let owner_roles: Api<Role> = Api::namespaced(t.owner_a.clone(), ns);
    for name in ["planted-cluster-admin", "planted-everything"] {
        assert!(
            owner_bindings.get_opt(name).await.expect("get").is_none(),
            "RoleBinding {name} was restored"
        );
    }
    assert!(
        owner_roles
            .get_opt("planted-everything")
            .await
            .expect("get")
            .is_none(),
        "Role planted-everything was restored"
    );
    let edit = owner_bindings
        .get("team-edit")
        .await
        .expect("the RoleBinding to edit is restored");
    assert_eq!(edit.role_ref.name, "edit");

    // The restore's results name each refused item and why.
    let restore_name = velero_restore.name.expect("status.veleroRestore.name");
    let key = StorageLayout::new(BUCKET, Some(PREFIX))
        .expect("layout")
        .restore(&restore_name)
        .expect("keys")
        .results();
    let bytes = granary_providers::get_bytes(t.store.as_ref(), BUCKET, &key)
        .await
        .expect("results file");
    let results = Results::read_gz(&bytes[..], 1 << 20).expect("results");
    let errors = results
        .errors
        .namespaces
        .get(ns)
        .cloned()
        .unwrap_or_default();
    assert_eq!(errors.len(), 3, "{errors:#?}");
    let about = |prefix: &str| {
        errors
            .iter()
            .find(|e| e.starts_with(prefix))
            .unwrap_or_else(|| panic!("no error about {prefix}: {errors:#?}"))
            .clone()
    };
    let e = about(&format!(
        "rolebindings.rbac.authorization.k8s.io {ns}/planted-cluster-admin: "
    ));
    assert!(
        e.contains("ClusterRole \"cluster-admin\"")
            && e.contains("restoreRoleCeiling")
            && e.contains("ClusterRole \"admin\"")
            && e.contains("{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}"),
        "{e}"
    );
    let e = about(&format!(
        "roles.rbac.authorization.k8s.io {ns}/planted-everything: "
    ));
    assert!(
        e.contains("{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}"),
        "{e}"
    );
    let e = about(&format!(
        "rolebindings.rbac.authorization.k8s.io {ns}/planted-everything: "
    ));
    assert!(e.contains("Role \"planted-everything\""), "{e}");
    assert!(
        results.errors.namespaces.keys().all(|n| n.as_str() == ns),
        "{results:?}"
    );
}
