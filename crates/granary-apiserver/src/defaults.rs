//! Defaulting of built-in kinds, as kube-apiserver's `SetDefaults_*` functions (and the
//! create strategies that fill in fields: a Job's generated selector, the status a new
//! Pod or claim starts with) leave an object. kube-apiserver defaults every object it
//! decodes, on every write, so a field a client leaves out reads back as the default
//! and an update that drops a defaulted field does not change it.
//!
//! Covered: Pod and every pod template (Deployment, ReplicaSet, StatefulSet, Job,
//! CronJob), containers, probes, volumes, Service, Secret, PersistentVolumeClaim,
//! PersistentVolume, Deployment, ReplicaSet, StatefulSet, Job, CronJob, and the RBAC
//! bindings' subjects and role references. Service addresses and node
//! ports are allocated by the state ([`super::services`]), not here. Not covered
//! (admission plugins, not defaulting): the ServiceAccount admission's service account
//! and token volume, the Priority admission's `priority`, DefaultTolerationSeconds.

use serde_json::{Map, Value, json};

use super::registry::ResourceInfo;

fn as_map(v: &mut Value) -> Option<&mut Map<String, Value>> {
    v.as_object_mut()
}

/// `map[key]`, made an object when missing.
fn child<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let v = map.entry(key).or_insert_with(|| json!({}));
    if !v.is_object() {
        *v = json!({});
    }
    v.as_object_mut().expect("made an object above")
}

fn set_default(map: &mut Map<String, Value>, key: &str, value: Value) {
    let missing = match map.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        _ => false,
    };
    if missing {
        map.insert(key.into(), value);
    }
}

fn items<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    map.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// Defaults `obj`, an object of built-in kind `info` (custom resources are defaulted
/// from their schema elsewhere).
pub(crate) fn apply(info: &ResourceInfo, obj: &mut Value) {
    if info.crd.is_some() {
        return;
    }
    let Some(root) = obj.as_object_mut() else {
        return;
    };
    match (info.group.as_str(), info.kind.as_str()) {
        ("", "Pod") => pod(root),
        ("", "Service") => service(root),
        ("", "Secret") => {
            set_default(root, "type", json!("Opaque"));
            // The v1 conversion folds `stringData` into `data`; it is never stored.
            if let Some(Value::Object(strings)) = root.remove("stringData") {
                use base64::Engine;
                let data = child(root, "data");
                for (k, v) in strings {
                    let text = v.as_str().unwrap_or_default();
                    let encoded = base64::engine::general_purpose::STANDARD.encode(text);
                    data.insert(k, json!(encoded));
                }
            }
        }
        ("", "PersistentVolumeClaim") => claim(root),
        ("", "PersistentVolume") => {
            let spec = child(root, "spec");
            set_default(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
            set_default(spec, "volumeMode", json!("Filesystem"));
            set_default(child(root, "status"), "phase", json!("Pending"));
        }
        ("apps", "Deployment") => deployment(root),
        ("apps", "ReplicaSet") => {
            let spec = child(root, "spec");
            set_default(spec, "replicas", json!(1));
            template(spec);
        }
        ("apps", "StatefulSet") => stateful_set(root),
        ("batch", "Job") => job_spec(child(root, "spec"), true),
        ("batch", "CronJob") => {
            let spec = child(root, "spec");
            set_default(spec, "concurrencyPolicy", json!("Allow"));
            set_default(spec, "suspend", json!(false));
            set_default(spec, "successfulJobsHistoryLimit", json!(3));
            set_default(spec, "failedJobsHistoryLimit", json!(1));
            // The job template's pod template is defaulted; its JobSpec is not (only a
            // Job's is).
            template(child(child(spec, "jobTemplate"), "spec"));
        }
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            set_default(
                child(root, "roleRef"),
                "apiGroup",
                json!("rbac.authorization.k8s.io"),
            );
            for subject in items(root, "subjects") {
                let group = match subject.get("kind").and_then(Value::as_str) {
                    Some("User" | "Group") => "rbac.authorization.k8s.io",
                    _ => "",
                };
                if !subject.contains_key("apiGroup") && !group.is_empty() {
                    subject.insert("apiGroup".into(), json!(group));
                }
            }
        }
        _ => {}
    }
}

fn pod(root: &mut Map<String, Value>) {
    let spec = child(root, "spec");
    pod_spec(spec);
    set_default(spec, "enableServiceLinks", json!(true));
    // A container's requests default to its limits (SetDefaults_Pod, Pods only).
    for key in ["containers", "initContainers"] {
        for c in items(spec, key) {
            let Some(limits) = c
                .get("resources")
                .and_then(|r| r.get("limits"))
                .and_then(Value::as_object)
                .cloned()
            else {
                continue;
            };
            let requests = child(child(c, "resources"), "requests");
            for (name, q) in limits {
                requests.entry(name).or_insert(q);
            }
        }
    }
}

/// A pod template's spec (`spec.template.spec` of a workload).
fn template(spec: &mut Map<String, Value>) {
    pod_spec(child(child(spec, "template"), "spec"));
}

fn pod_spec(spec: &mut Map<String, Value>) {
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "securityContext", json!({}));
    let host_network = spec.get("hostNetwork") == Some(&json!(true));
    for key in ["containers", "initContainers", "ephemeralContainers"] {
        for c in items(spec, key) {
            container(c, host_network);
        }
    }
    for v in items(spec, "volumes") {
        volume(v);
    }
}

fn container(c: &mut Map<String, Value>, host_network: bool) {
    let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
    let pull = if image_is_latest(image) {
        "Always"
    } else {
        "IfNotPresent"
    };
    set_default(c, "imagePullPolicy", json!(pull));
    set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
    set_default(c, "terminationMessagePolicy", json!("File"));
    set_default(c, "resources", json!({}));
    for p in items(c, "ports") {
        set_default(p, "protocol", json!("TCP"));
        if host_network
            && !p.contains_key("hostPort")
            && let Some(port) = p.get("containerPort").cloned()
        {
            p.insert("hostPort".into(), port);
        }
    }
    for key in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(probe) = c.get_mut(key).and_then(as_map) {
            set_default(probe, "timeoutSeconds", json!(1));
            set_default(probe, "periodSeconds", json!(10));
            set_default(probe, "successThreshold", json!(1));
            set_default(probe, "failureThreshold", json!(3));
            handler(probe);
        }
    }
    if let Some(lifecycle) = c.get_mut("lifecycle").and_then(as_map) {
        for key in ["postStart", "preStop"] {
            if let Some(h) = lifecycle.get_mut(key).and_then(as_map) {
                handler(h);
            }
        }
    }
    for env in items(c, "env") {
        if let Some(field_ref) = env
            .get_mut("valueFrom")
            .and_then(|v| v.get_mut("fieldRef"))
            .and_then(as_map)
        {
            set_default(field_ref, "apiVersion", json!("v1"));
        }
    }
}

fn handler(h: &mut Map<String, Value>) {
    if let Some(get) = h.get_mut("httpGet").and_then(as_map) {
        set_default(get, "path", json!("/"));
        set_default(get, "scheme", json!("HTTP"));
    }
}

/// Whether a container's image asks for `latest`: no tag, or the tag `latest`, and no
/// digest (then pulls default to `Always`).
fn image_is_latest(image: &str) -> bool {
    if image.contains('@') {
        return false;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        None => true,
        Some((_, tag)) => tag == "latest",
    }
}

fn volume(v: &mut Map<String, Value>) {
    const SOURCES: &[&str] = &[
        "hostPath",
        "emptyDir",
        "gcePersistentDisk",
        "awsElasticBlockStore",
        "gitRepo",
        "secret",
        "nfs",
        "iscsi",
        "glusterfs",
        "persistentVolumeClaim",
        "rbd",
        "flexVolume",
        "cinder",
        "cephfs",
        "flocker",
        "downwardAPI",
        "fc",
        "azureFile",
        "configMap",
        "vsphereVolume",
        "quobyte",
        "azureDisk",
        "photonPersistentDisk",
        "projected",
        "portworxVolume",
        "scaleIO",
        "storageos",
        "csi",
        "ephemeral",
        "image",
    ];
    if !SOURCES
        .iter()
        .any(|s| v.get(*s).is_some_and(|x| !x.is_null()))
    {
        v.insert("emptyDir".into(), json!({}));
    }
    for key in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(source) = v.get_mut(key).and_then(as_map) {
            set_default(source, "defaultMode", json!(0o644));
        }
    }
    if let Some(host_path) = v.get_mut("hostPath").and_then(as_map) {
        set_default(host_path, "type", json!(""));
    }
}

fn service(root: &mut Map<String, Value>) {
    let spec = child(root, "spec");
    set_default(spec, "type", json!("ClusterIP"));
    set_default(spec, "sessionAffinity", json!("None"));
    if spec.get("sessionAffinity") == Some(&json!("ClientIP")) {
        let config = child(child(spec, "sessionAffinityConfig"), "clientIP");
        set_default(config, "timeoutSeconds", json!(10800));
    }
    let kind = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    for p in items(spec, "ports") {
        set_default(p, "protocol", json!("TCP"));
        if !p.contains_key("targetPort")
            && let Some(port) = p.get("port").cloned()
        {
            p.insert("targetPort".into(), port);
        }
    }
    if matches!(kind.as_str(), "NodePort" | "LoadBalancer") {
        set_default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if kind != "ExternalName" {
        set_default(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if kind == "LoadBalancer" {
        set_default(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
}

fn claim(root: &mut Map<String, Value>) {
    set_default(child(root, "spec"), "volumeMode", json!("Filesystem"));
    set_default(child(root, "status"), "phase", json!("Pending"));
}

fn deployment(root: &mut Map<String, Value>) {
    let spec = child(root, "spec");
    set_default(spec, "replicas", json!(1));
    let strategy = child(spec, "strategy");
    set_default(strategy, "type", json!("RollingUpdate"));
    if strategy.get("type") == Some(&json!("RollingUpdate")) {
        let rolling = child(strategy, "rollingUpdate");
        set_default(rolling, "maxUnavailable", json!("25%"));
        set_default(rolling, "maxSurge", json!("25%"));
    }
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "progressDeadlineSeconds", json!(600));
    template(spec);
}

fn stateful_set(root: &mut Map<String, Value>) {
    let spec = child(root, "spec");
    set_default(spec, "replicas", json!(1));
    set_default(spec, "podManagementPolicy", json!("OrderedReady"));
    let strategy = child(spec, "updateStrategy");
    set_default(strategy, "type", json!("RollingUpdate"));
    if strategy.get("type") == Some(&json!("RollingUpdate")) {
        set_default(child(strategy, "rollingUpdate"), "partition", json!(0));
    }
    set_default(spec, "revisionHistoryLimit", json!(10));
    let retention = child(spec, "persistentVolumeClaimRetentionPolicy");
    set_default(retention, "whenDeleted", json!("Retain"));
    set_default(retention, "whenScaled", json!("Retain"));
    for claim_template in items(spec, "volumeClaimTemplates") {
        claim(claim_template);
    }
    template(spec);
}

/// A Job's spec; `job` is false for a CronJob's job template (only its pod template
/// is defaulted).
fn job_spec(spec: &mut Map<String, Value>, job: bool) {
    if job {
        if spec.get("completions").is_none_or(Value::is_null)
            && spec.get("parallelism").is_none_or(Value::is_null)
        {
            spec.insert("completions".into(), json!(1));
        }
        set_default(spec, "parallelism", json!(1));
        let per_index = spec
            .get("backoffLimitPerIndex")
            .is_some_and(|v| !v.is_null());
        set_default(
            spec,
            "backoffLimit",
            json!(if per_index { i32::MAX } else { 6 }),
        );
        set_default(spec, "completionMode", json!("NonIndexed"));
        set_default(spec, "suspend", json!(false));
        let replacement = if spec.get("podFailurePolicy").is_some_and(|v| !v.is_null()) {
            "Failed"
        } else {
            "TerminatingOrFailed"
        };
        set_default(spec, "podReplacementPolicy", json!(replacement));
    }
    template(spec);
}

/// The labels a Job's pods carry and its generated selector (the Job strategy's
/// `generateSelector`, for a Job without `manualSelector: true`), from its name and
/// uid. Labels already on the template are kept: validation refuses a wrong one.
fn job_selector(obj: &mut Value) {
    let name = super::objects::meta_str(obj, "name")
        .unwrap_or_default()
        .to_string();
    let uid = super::objects::meta_str(obj, "uid")
        .unwrap_or_default()
        .to_string();
    let Some(spec) = obj.get_mut("spec").and_then(as_map) else {
        return;
    };
    if spec.get("manualSelector") == Some(&json!(true)) {
        return;
    }
    let labels = child(child(child(spec, "template"), "metadata"), "labels");
    for (key, value) in [
        ("batch.kubernetes.io/controller-uid", &uid),
        ("batch.kubernetes.io/job-name", &name),
        ("controller-uid", &uid),
        ("job-name", &name),
    ] {
        labels.entry(key).or_insert_with(|| json!(value));
    }
    let selector = child(child(spec, "selector"), "matchLabels");
    selector
        .entry("batch.kubernetes.io/controller-uid")
        .or_insert_with(|| json!(uid));
}

/// What a new object of `info`'s kind gets from its create strategy's
/// `PrepareForCreate`: a Pod's phase and QoS class, a Service's empty load balancer, a
/// Job's generated selector.
pub(crate) fn prepare_for_create(info: &ResourceInfo, obj: &mut Value) {
    match (info.group.as_str(), info.kind.as_str()) {
        ("", "Pod") => pod_status(obj),
        ("", "Service") => {
            if let Some(root) = obj.as_object_mut() {
                root.insert("status".into(), json!({"loadBalancer": {}}));
            }
        }
        ("batch", "Job") => job_selector(obj),
        _ => {}
    }
}

/// The status a new Pod starts with (the Pod strategy's `PrepareForCreate`): Pending,
/// and its QoS class.
fn pod_status(obj: &mut Value) {
    let class = qos_class(obj.get("spec").unwrap_or(&Value::Null));
    if let Some(root) = obj.as_object_mut() {
        root.insert(
            "status".into(),
            json!({"phase": "Pending", "qosClass": class}),
        );
    }
}

/// kube's `GetPodQOS`: Guaranteed when every container has equal CPU and memory limits
/// and requests, BestEffort when none has any, Burstable otherwise.
fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|k| spec.get(*k).and_then(Value::as_array))
        .flatten()
        .collect();
    let of = |c: &Value, which: &str, name: &str| {
        c.get("resources")
            .and_then(|r| r.get(which))
            .and_then(|m| m.get(name))
            .filter(
                |q| !matches!(q, Value::String(s) if s.trim_start_matches(['0', '.']).is_empty()),
            )
            .cloned()
    };
    let mut any = false;
    let mut guaranteed = !containers.is_empty();
    for c in &containers {
        for name in ["cpu", "memory"] {
            let (req, lim) = (of(c, "requests", name), of(c, "limits", name));
            any |= req.is_some() || lim.is_some();
            if lim.is_none() || (req.is_some() && req != lim) {
                guaranteed = false;
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    fn defaulted(group: &str, plural: &str, mut obj: Value) -> Value {
        let info = Registry::new().lookup(group, "v1", plural).unwrap();
        apply(&info, &mut obj);
        obj
    }

    #[test]
    fn a_deployment_reads_back_as_kube_apiserver_stores_it() {
        let d = defaulted(
            "apps",
            "deployments",
            json!({"spec": {"selector": {"matchLabels": {"app": "a"}}, "template": {
                "metadata": {"labels": {"app": "a"}},
                "spec": {"containers": [{"name": "a", "image": "nginx", "ports": [{"containerPort": 80}]}]}}}}),
        );
        assert_eq!(
            d["spec"],
            json!({
                "replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                "selector": {"matchLabels": {"app": "a"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
                "template": {"metadata": {"labels": {"app": "a"}}, "spec": {
                    "containers": [{"name": "a", "image": "nginx", "imagePullPolicy": "Always",
                        "ports": [{"containerPort": 80, "protocol": "TCP"}], "resources": {},
                        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
                    "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                    "securityContext": {}, "terminationGracePeriodSeconds": 30}}
            })
        );
        // Recreate has no rolling parameters; a set value is kept.
        let d = defaulted(
            "apps",
            "deployments",
            json!({"spec": {"replicas": 0, "strategy": {"type": "Recreate"}}}),
        );
        assert_eq!(d["spec"]["replicas"], 0);
        assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}));
    }

    #[test]
    fn images_pull_always_only_for_latest() {
        for (image, latest) in [
            ("nginx", true),
            ("nginx:latest", true),
            ("reg:5000/nginx", true),
            ("nginx:1.28", false),
            ("reg:5000/nginx:1.2", false),
            ("nginx@sha256:abc", false),
        ] {
            assert_eq!(image_is_latest(image), latest, "{image}");
        }
    }

    #[test]
    fn services_jobs_and_bindings() {
        let s = defaulted(
            "",
            "services",
            json!({"spec": {"type": "NodePort", "ports": [{"port": 80}, {"port": 53, "protocol": "UDP", "targetPort": "dns"}]}}),
        );
        assert_eq!(
            s["spec"]["ports"],
            json!([{"port": 80, "protocol": "TCP", "targetPort": 80}, {"port": 53, "protocol": "UDP", "targetPort": "dns"}])
        );
        assert_eq!(s["spec"]["externalTrafficPolicy"], "Cluster");
        assert_eq!(s["spec"]["internalTrafficPolicy"], "Cluster");
        assert_eq!(s["spec"]["sessionAffinity"], "None");
        let j = defaulted(
            "batch",
            "jobs",
            json!({"spec": {"parallelism": 3, "template": {"spec": {"restartPolicy": "Never"}}}}),
        );
        assert_eq!(
            j["spec"].get("completions"),
            None,
            "parallelism alone leaves completions unset"
        );
        assert_eq!(j["spec"]["backoffLimit"], 6);
        assert_eq!(j["spec"]["podReplacementPolicy"], "TerminatingOrFailed");
        assert_eq!(j["spec"]["template"]["spec"]["restartPolicy"], "Never");
        let mut j = json!({"metadata": {"name": "j", "uid": "u-1"}, "spec": {}});
        let jobs = Registry::new().lookup("batch", "v1", "jobs").unwrap();
        prepare_for_create(&jobs, &mut j);
        assert_eq!(
            j["spec"]["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}})
        );
        assert_eq!(j["spec"]["template"]["metadata"]["labels"]["job-name"], "j");
        let c = defaulted(
            "batch",
            "cronjobs",
            json!({"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {}}}}}}),
        );
        assert_eq!(c["spec"]["jobTemplate"]["spec"].get("backoffLimit"), None);
        assert_eq!(
            c["spec"]["jobTemplate"]["spec"]["template"]["spec"]["dnsPolicy"],
            "ClusterFirst"
        );
        let b = defaulted(
            "rbac.authorization.k8s.io",
            "rolebindings",
            json!({"roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s", "namespace": "n"}]}),
        );
        assert_eq!(b["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
        assert_eq!(b["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
        assert_eq!(b["subjects"][1].get("apiGroup"), None);
    }

    #[test]
    fn pods_get_requests_from_limits_and_a_qos_class() {
        let mut p = defaulted(
            "",
            "pods",
            json!({"spec": {"containers": [{"name": "a", "image": "x:1",
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}], "volumes": [{"name": "v"}]}}),
        );
        assert_eq!(
            p["spec"]["containers"][0]["resources"]["requests"],
            json!({"cpu": "1", "memory": "1Gi"})
        );
        assert_eq!(
            p["spec"]["volumes"][0],
            json!({"name": "v", "emptyDir": {}})
        );
        assert_eq!(p["spec"]["enableServiceLinks"], true);
        let pods = Registry::new().lookup("", "v1", "pods").unwrap();
        prepare_for_create(&pods, &mut p);
        assert_eq!(
            p["status"],
            json!({"phase": "Pending", "qosClass": "Guaranteed"})
        );
        let mut p = json!({"spec": {"containers": [{"name": "a"}]}});
        pod_status(&mut p);
        assert_eq!(p["status"]["qosClass"], "BestEffort");
        let mut p = json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}});
        pod_status(&mut p);
        assert_eq!(p["status"]["qosClass"], "Burstable");
    }
}
