//! Real identities: the embedded server reads kube-apiserver's static token file and
//! authorizes its users with RBAC, refusing with kube-apiserver's 403 Status, and
//! answers SelfSubjectAccessReviews (`kubectl auth can-i`). The server's own token keeps
//! full access.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{
    ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::{Api, ListParams, PostParams};
use serde_json::Value;

use granary_apiserver::{EmbeddedOptions, EmbeddedServer};
use granary_test_support::kubectl::{self, Kubectl};

use granary_test_support::api::{api_error, cm};

const TOKENS: &str = "alice-token-0123456789,alice,uid-alice,\"devs,readers\"\n\
                      bob-token-0123456789,bob,uid-bob\n";

async fn client_as(server: &EmbeddedServer, token: &str) -> kube::Client {
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig_as(server, token), &Default::default())
            .await
            .expect("config");
    kube::Client::try_from(config).expect("client")
}

fn kubeconfig_as(server: &EmbeddedServer, token: &str) -> kube::config::Kubeconfig {
    let mut kc = server.kubeconfig().expect("kubeconfig");
    for named in &mut kc.auth_infos {
        if let Some(info) = named.auth_info.as_mut() {
            info.token = Some(token.to_string().into());
        }
    }
    kc
}

async fn get_path(client: &kube::Client, path: &str) -> Result<Value, kube::Error> {
    let req = http::Request::get(path).body(Vec::new()).expect("request");
    client.request::<Value>(req).await
}

async fn start() -> (EmbeddedServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens.csv");
    std::fs::write(&path, TOKENS).unwrap();
    let server = EmbeddedServer::start_with_token_file(EmbeddedOptions::default(), &path)
        .await
        .expect("server starts");
    (server, dir)
}

async fn can(client: &kube::Client, verb: &str, resource: &str, ns: &str) -> bool {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                resource: Some(resource.into()),
                namespace: Some(ns.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answered = Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .expect("review answered");
    answered.status.expect("status").allowed
}

#[tokio::test]
async fn token_file_users_are_authorized_with_rbac() {
    let (server, _dir) = start().await;
    let admin = server.client().await.unwrap();
    for ns in ["team", "other"] {
        let mut n = Namespace::default();
        n.metadata.name = Some(ns.into());
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &n)
            .await
            .unwrap();
        Api::<ConfigMap>::namespaced(admin.clone(), ns)
            .create(&PostParams::default(), &cm("cm1", &[]))
            .await
            .unwrap();
    }
    let mut reader = Role::default();
    reader.metadata.name = Some("reader".into());
    reader.rules = Some(vec![PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["configmaps".into()]),
        verbs: vec!["get".into(), "list".into()],
        ..Default::default()
    }]);
    Api::<Role>::namespaced(admin.clone(), "team")
        .create(&PostParams::default(), &reader)
        .await
        .unwrap();
    let mut binding = RoleBinding::default();
    binding.metadata.name = Some("devs-read".into());
    binding.role_ref = RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: "Role".into(),
        name: "reader".into(),
    };
    binding.subjects = Some(vec![Subject {
        kind: "Group".into(),
        name: "devs".into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        ..Default::default()
    }]);
    Api::<RoleBinding>::namespaced(admin.clone(), "team")
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();

    let alice = client_as(&server, "alice-token-0123456789").await;
    let bob = client_as(&server, "bob-token-0123456789").await;
    let alice_team: Api<ConfigMap> = Api::namespaced(alice.clone(), "team");
    assert_eq!(
        alice_team
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    alice_team.get("cm1").await.expect("alice reads in team");

    let e = api_error(
        Api::<ConfigMap>::namespaced(alice.clone(), "other")
            .list(&ListParams::default())
            .await,
    );
    assert_eq!((e.code, &*e.reason), (403, "Forbidden"));
    assert_eq!(
        e.message,
        "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"other\""
    );
    let e = api_error(
        alice_team
            .create(&PostParams::default(), &cm("new", &[]))
            .await,
    );
    assert_eq!(
        e.message,
        "configmaps is forbidden: User \"alice\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"team\""
    );
    let e = api_error(
        Api::<ConfigMap>::namespaced(bob.clone(), "team")
            .get("cm1")
            .await,
    );
    assert_eq!(e.code, 403);
    assert_eq!(
        e.message,
        "configmaps \"cm1\" is forbidden: User \"bob\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"team\""
    );
    let e = api_error(
        Api::<Namespace>::all(bob.clone())
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(
        e.message,
        "namespaces is forbidden: User \"bob\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
    );
    // Non-resource URLs: discovery and /version for every authenticated user.
    get_path(&bob, "/version").await.expect("version");
    get_path(&bob, "/api").await.expect("discovery");
    let e = api_error(get_path(&bob, "/metrics").await);
    assert_eq!(
        e.message,
        "forbidden: User \"bob\" cannot get path \"/metrics\""
    );
    // Impersonation is the admin token's alone.
    let mut cfg = kube::Config::from_custom_kubeconfig(
        kubeconfig_as(&server, "alice-token-0123456789"),
        &Default::default(),
    )
    .await
    .unwrap();
    cfg.auth_info.impersonate = Some("bob".into());
    let as_bob = kube::Client::try_from(cfg).unwrap();
    let e = api_error(
        Api::<ConfigMap>::namespaced(as_bob, "team")
            .get("cm1")
            .await,
    );
    assert_eq!(
        e.message,
        "users \"bob\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
    );
    // An unknown token is 401.
    let stranger = client_as(&server, "nobody-0123456789").await;
    assert_eq!(api_error(get_path(&stranger, "/api").await).code, 401);

    // SelfSubjectAccessReview.
    assert!(can(&alice, "list", "configmaps", "team").await);
    assert!(!can(&alice, "create", "configmaps", "team").await);
    assert!(!can(&bob, "get", "configmaps", "team").await);
    assert!(can(&admin, "delete", "namespaces", "").await);

    // Bound to the aggregated `view`, bob reads configmaps everywhere but not secrets.
    let mut view = ClusterRoleBinding::default();
    view.metadata.name = Some("bob-view".into());
    view.role_ref = RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: "ClusterRole".into(),
        name: "view".into(),
    };
    view.subjects = Some(vec![Subject {
        kind: "User".into(),
        name: "bob".into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        ..Default::default()
    }]);
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &view)
        .await
        .unwrap();
    Api::<ConfigMap>::namespaced(bob.clone(), "other")
        .get("cm1")
        .await
        .expect("view reads configmaps");
    assert!(!can(&bob, "get", "secrets", "other").await);

    // The admin token is unaffected.
    Api::<ConfigMap>::namespaced(admin, "other")
        .create(&PostParams::default(), &cm("by-admin", &[]))
        .await
        .expect("admin writes");
}

#[tokio::test]
async fn kubectl_auth_can_i_answers_for_token_file_users() {
    if !kubectl::available() {
        eprintln!("SKIPPED: kubectl is not installed");
        return;
    }
    let (server, dir) = start().await;
    let admin = server.client().await.unwrap();
    let mut binding = RoleBinding::default();
    binding.metadata.name = Some("alice-edit".into());
    binding.role_ref = RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: "ClusterRole".into(),
        name: "edit".into(),
    };
    binding.subjects = Some(vec![Subject {
        kind: "User".into(),
        name: "alice".into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        ..Default::default()
    }]);
    Api::<RoleBinding>::namespaced(admin, "default")
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let kubeconfig = dir.path().join("alice.kubeconfig");
    std::fs::write(
        &kubeconfig,
        serde_json::to_vec(&kubeconfig_as(&server, "alice-token-0123456789")).unwrap(),
    )
    .unwrap();
    let k = Kubectl::new(&kubeconfig).private_cache();
    let can_i = |args: &[&str]| {
        let mut all = vec!["auth".to_string(), "can-i".to_string()];
        all.extend(args.iter().map(|a| a.to_string()));
        let k = &k;
        async move {
            let out = k.run(&all).await;
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).trim().to_string(),
                String::from_utf8_lossy(&out.stderr).to_string(),
            )
        }
    };
    let (ok, said, err) = can_i(&["create", "deployments", "-n", "default"]).await;
    assert!(ok && said == "yes", "{said} {err}");
    let (ok, said, err) = can_i(&["create", "rolebindings", "-n", "default"]).await;
    assert!(!ok && said == "no", "{said} {err}");
    let (ok, said, err) = can_i(&["get", "configmaps", "-n", "kube-system"]).await;
    assert!(!ok && said == "no", "{said} {err}");
}
