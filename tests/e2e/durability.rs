//! The embedded server's data directory: a restart comes back with the same objects,
//! uids and resourceVersions (embedded only; a real cluster has its own storage).

use granary::embedded::{EmbeddedOptions, EmbeddedServer};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use crate::conformance::cm;

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
        let rv = api
            .list(&ListParams::default())
            .await
            .unwrap()
            .metadata
            .resource_version
            .unwrap();
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
    let rv: u64 = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
        .parse()
        .unwrap();
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
