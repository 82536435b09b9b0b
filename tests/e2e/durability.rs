//! The embedded server's data directory: a restart comes back with the same objects,
//! uids and resourceVersions, and with the same CA, token and port, so kubeconfigs
//! written before it keep working (embedded only; a real cluster has its own storage).

use std::path::Path;

use granary_apiserver::{EmbeddedOptions, EmbeddedServer};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

use granary_test_support::api::{cm, list_version};

#[tokio::test]
async fn restart_restores_objects_and_resource_versions() {
    let dir = tempfile::tempdir().unwrap();
    let opts = EmbeddedOptions {
        port: None,
        data_dir: Some(dir.path().to_path_buf()),
    };
    let (kept, list_rv) = {
        let server = EmbeddedServer::start(opts.clone()).await.unwrap();
        let api: Api<ConfigMap> = Api::namespaced(server.client().await.unwrap(), "default");
        let kept = api
            .create(&PostParams::default(), &cm("kept", &[("a", "b")]))
            .await
            .unwrap();
        api.create(&PostParams::default(), &cm("gone", &[]))
            .await
            .unwrap();
        api.delete("gone", &DeleteParams::default()).await.unwrap();
        let rv = list_version(&api).await;
        server.shutdown().await;
        (kept, rv)
    };
    let server = EmbeddedServer::start(opts).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client().await.unwrap(), "default");
    let restored = api.get("kept").await.unwrap();
    assert_eq!(restored.metadata.uid, kept.metadata.uid);
    assert_eq!(
        restored.metadata.resource_version,
        kept.metadata.resource_version
    );
    assert!(api.get_opt("gone").await.unwrap().is_none());
    let rv: u64 = list_version(&api).await.parse().unwrap();
    assert!(
        rv >= list_rv.parse::<u64>().unwrap(),
        "resourceVersions never go back"
    );
    let next = api
        .create(&PostParams::default(), &cm("after", &[]))
        .await
        .unwrap();
    let next_rv: u64 = next.metadata.resource_version.unwrap().parse().unwrap();
    assert!(next_rv > list_rv.parse::<u64>().unwrap());
    server.shutdown().await;
}

/// A client as kubectl in another terminal makes one: from the kubeconfig file.
async fn client_from_file(path: &Path) -> kube::Client {
    let kc = Kubeconfig::read_from(path).expect("readable kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("usable kubeconfig");
    kube::Client::try_from(config).expect("client")
}

#[tokio::test]
async fn a_kubeconfig_written_before_a_restart_keeps_working() {
    let dir = tempfile::tempdir().unwrap();
    let opts = EmbeddedOptions {
        port: None,
        data_dir: Some(dir.path().join("data")),
    };
    let kubeconfig = dir.path().join("granary.kubeconfig");
    let (url, token, ca) = {
        let server = EmbeddedServer::start(opts.clone()).await.unwrap();
        server.write_kubeconfig(&kubeconfig).unwrap();
        let api: Api<ConfigMap> = Api::namespaced(client_from_file(&kubeconfig).await, "default");
        api.create(&PostParams::default(), &cm("before", &[]))
            .await
            .unwrap();
        let id = (
            server.url(),
            server.token().to_string(),
            server.ca_pem().to_string(),
        );
        server.shutdown().await;
        id
    };
    let server = EmbeddedServer::start(opts).await.unwrap();
    assert_eq!(server.url(), url, "the previous port, as it is free");
    assert_eq!(server.token(), token);
    assert_eq!(server.ca_pem(), ca);
    // The old file, not a new one: what a user's kubectl still points at.
    let api: Api<ConfigMap> = Api::namespaced(client_from_file(&kubeconfig).await, "default");
    api.get("before")
        .await
        .expect("the old kubeconfig still works");
    api.create(&PostParams::default(), &cm("after", &[]))
        .await
        .unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn a_restart_whose_port_is_taken_uses_a_free_one_with_the_same_identity() {
    let dir = tempfile::tempdir().unwrap();
    let opts = EmbeddedOptions {
        port: None,
        data_dir: Some(dir.path().to_path_buf()),
    };
    let first = EmbeddedServer::start(opts.clone()).await.unwrap();
    let (port, token) = (first.port(), first.token().to_string());
    first.shutdown().await;
    let _squatter = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let second = EmbeddedServer::start(opts).await.unwrap();
    assert_ne!(second.port(), port);
    assert_eq!(second.token(), token);
    let api: Api<ConfigMap> = Api::namespaced(second.client().await.unwrap(), "default");
    api.list(&ListParams::default()).await.unwrap();
    second.shutdown().await;
}

#[tokio::test]
async fn without_a_data_dir_every_start_has_a_new_identity() {
    let a = EmbeddedServer::start(EmbeddedOptions::default())
        .await
        .unwrap();
    let b = EmbeddedServer::start(EmbeddedOptions::default())
        .await
        .unwrap();
    assert_ne!(a.token(), b.token());
    assert_ne!(a.ca_pem(), b.ca_pem());
    // a's kubeconfig pointed at b: b's certificate is not trusted, its token not known.
    let mut kc = a.kubeconfig().unwrap();
    kc.clusters[0].cluster.as_mut().unwrap().server = Some(b.url());
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(kube::Client::try_from(config).unwrap(), "default");
    assert!(api.list(&ListParams::default()).await.is_err());
    a.shutdown().await;
    b.shutdown().await;
}
