//! The shoot's `etcd-main` as the cut-over sees it: the `etcds.druid.gardener.cloud`
//! resource when that CRD exists in the seed, else the `etcd-main` StatefulSet through
//! its `scale` subresource. Scaling, waiting for the status to follow, and (Druid only)
//! pointing the backup store at the destination.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::json;

use super::MigrateError;
use granary_api::core::{ANNOTATION_OPERATION, OPERATION_RECONCILE};

/// The name of the main etcd of a shoot control plane.
pub const ETCD_MAIN: &str = "etcd-main";
/// The CRD of etcd-druid's `Etcd` kind.
pub const ETCD_CRD: &str = "etcds.druid.gardener.cloud";

/// Which object drives etcd-main.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EtcdDriver {
    Druid,
    StatefulSet,
}

/// etcd-main of one shoot control-plane namespace in the seed.
pub struct EtcdMain {
    client: Client,
    namespace: String,
    pub driver: EtcdDriver,
    /// How long etcd-main may take to follow a request (Druid taking it, the status
    /// following a scale).
    timeout: Duration,
}

fn etcd_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("druid.gardener.cloud", "v1alpha1", "Etcd"),
        "etcds",
    )
}

fn int_at(v: &serde_json::Value, pointer: &str) -> i32 {
    v.pointer(pointer)
        .and_then(serde_json::Value::as_i64)
        .and_then(|n| i32::try_from(n).ok())
        .unwrap_or(0)
}

/// The polls of one wait on etcd-main: 20 ms apart at first, doubling up to 500 ms,
/// until a deadline.
struct Backoff {
    deadline: tokio::time::Instant,
    delay: Duration,
}

impl Backoff {
    fn until(timeout: Duration) -> Self {
        Backoff {
            deadline: tokio::time::Instant::now() + timeout,
            delay: Duration::from_millis(20),
        }
    }

    /// Sleeps before the next poll; false once the deadline has passed.
    async fn sleep(&mut self) -> bool {
        if tokio::time::Instant::now() >= self.deadline {
            return false;
        }
        tokio::time::sleep(self.delay).await;
        self.delay = (self.delay * 2).min(Duration::from_millis(500));
        true
    }
}

/// Etcd-druid's storage provider names for Gardener provider types.
pub fn druid_provider(provider: &str) -> &str {
    match provider {
        "aws" => "S3",
        "azure" => "ABS",
        "gcp" => "GCS",
        "local" => "Local",
        other => other,
    }
}

impl EtcdMain {
    /// Finds etcd-main in `namespace`: the Druid resource when its CRD exists and the
    /// object is there, else the StatefulSet. `timeout` bounds every wait on it.
    pub async fn find(
        client: Client,
        namespace: &str,
        timeout: Duration,
    ) -> Result<EtcdMain, MigrateError> {
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        if crds.get_opt(ETCD_CRD).await?.is_some() {
            let etcds: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), namespace, &etcd_resource());
            if etcds.get_opt(ETCD_MAIN).await?.is_some() {
                return Ok(EtcdMain {
                    client,
                    namespace: namespace.to_string(),
                    driver: EtcdDriver::Druid,
                    timeout,
                });
            }
        }
        let sts: Api<StatefulSet> = Api::namespaced(client.clone(), namespace);
        if sts.get_opt(ETCD_MAIN).await?.is_some() {
            return Ok(EtcdMain {
                client,
                namespace: namespace.to_string(),
                driver: EtcdDriver::StatefulSet,
                timeout,
            });
        }
        Err(MigrateError::Invalid(format!(
            "no {ETCD_MAIN} Etcd resource or StatefulSet in seed namespace {namespace}"
        )))
    }

    fn etcds(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, &etcd_resource())
    }

    fn statefulsets(&self) -> Api<StatefulSet> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The desired replica count (`spec.replicas`).
    pub async fn desired(&self) -> Result<i32, MigrateError> {
        Ok(match self.driver {
            EtcdDriver::Druid => {
                let etcd = self.etcds().get(ETCD_MAIN).await?;
                int_at(&etcd.data, "/spec/replicas")
            }
            EtcdDriver::StatefulSet => self
                .statefulsets()
                .get_scale(ETCD_MAIN)
                .await?
                .spec
                .and_then(|s| s.replicas)
                .unwrap_or(0),
        })
    }

    /// `(status.replicas, status.readyReplicas)`.
    pub async fn observed(&self) -> Result<(i32, i32), MigrateError> {
        Ok(match self.driver {
            EtcdDriver::Druid => {
                let etcd = self.etcds().get(ETCD_MAIN).await?;
                (
                    int_at(&etcd.data, "/status/replicas"),
                    int_at(&etcd.data, "/status/readyReplicas"),
                )
            }
            EtcdDriver::StatefulSet => {
                let status = self.statefulsets().get(ETCD_MAIN).await?.status;
                let status = status.unwrap_or_default();
                (status.replicas, status.ready_replicas.unwrap_or(0))
            }
        })
    }

    /// Sets the desired replica count.
    pub async fn scale(&self, replicas: i32) -> Result<(), MigrateError> {
        match self.driver {
            EtcdDriver::Druid => {
                self.request_reconcile(json!({"spec": {"replicas": replicas}}))
                    .await?;
            }
            EtcdDriver::StatefulSet => {
                let patch = json!({"spec": {"replicas": replicas}});
                self.statefulsets()
                    .patch_scale(ETCD_MAIN, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
            }
        }
        Ok(())
    }

    /// Waits until `done(replicas, ready)` holds for the observed status.
    pub async fn wait(
        &self,
        what: &str,
        done: impl Fn(i32, i32) -> bool,
    ) -> Result<(), MigrateError> {
        let mut backoff = Backoff::until(self.timeout);
        loop {
            let (replicas, ready) = self.observed().await?;
            if done(replicas, ready) {
                return Ok(());
            }
            if !backoff.sleep().await {
                return Err(MigrateError::Timeout(format!(
                    "{ETCD_MAIN} in {} did not become {what} within {:?} (replicas {replicas}, ready {ready})",
                    self.namespace, self.timeout
                )));
            }
        }
    }

    /// Merges `patch` into the Druid resource with the reconcile operation annotation
    /// (Druid acts on spec changes only with it), then waits until Druid has taken the
    /// request, i.e. removed the annotation, as Gardener does before its next step.
    /// Druid removes the annotation with a plain merge patch once its reconcile is done,
    /// so a second request written before that would lose its annotation with the first
    /// and never be acted on.
    async fn request_reconcile(&self, mut patch: serde_json::Value) -> Result<(), MigrateError> {
        patch["metadata"] = json!({"annotations": {ANNOTATION_OPERATION: OPERATION_RECONCILE}});
        let etcds = self.etcds();
        etcds
            .patch(ETCD_MAIN, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        let mut backoff = Backoff::until(self.timeout);
        loop {
            let etcd = etcds.get(ETCD_MAIN).await?;
            let pending = etcd
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANNOTATION_OPERATION));
            let Some(operation) = pending else {
                return Ok(());
            };
            if !backoff.sleep().await {
                return Err(MigrateError::Timeout(format!(
                    "etcd-druid did not take the {ANNOTATION_OPERATION}={operation} request on {ETCD_MAIN} in {} within {:?}",
                    self.namespace, self.timeout
                )));
            }
        }
    }

    /// Points the Druid resource's backup store at `container`/`prefix` of `provider`
    /// (nothing to do for a bare StatefulSet: its sidecar reads the etcd-backup secret).
    pub async fn set_backup_store(
        &self,
        container: &str,
        prefix: &str,
        provider: &str,
    ) -> Result<(), MigrateError> {
        if self.driver != EtcdDriver::Druid {
            return Ok(());
        }
        self.request_reconcile(json!({"spec": {"backup": {"store": {
            "container": container,
            "prefix": prefix,
            "provider": druid_provider(provider),
        }}}}))
        .await
    }
}
