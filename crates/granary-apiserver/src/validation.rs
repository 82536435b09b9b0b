//! Validation of built-in kinds after defaulting, with kube-apiserver's field paths and
//! messages (`pkg/apis/*/validation`), for the kinds Granary's restore writes and
//! `granary dev` users create: Pod and pod templates, Deployment, ReplicaSet,
//! StatefulSet, Job, CronJob, Service, Secret, ConfigMap, PersistentVolumeClaim, and the
//! RBAC roles and bindings; with the fields that cannot change on an update. A kind not
//! named here is checked for its metadata and types only (see docs/architecture.md).
//!
//! Pure: the object (defaulted) and, on an update, the stored one in; causes out.

use serde_json::{Map, Value, json};

use super::errors::FieldCause;
use super::registry::ResourceInfo;

/// kube-apiserver's limit on a ConfigMap's or Secret's summed data.
const MAX_DATA_BYTES: usize = 1024 * 1024;

const DNS_LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const CONFIG_KEY_MESSAGE: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// The causes that refuse `obj` (`old`: the stored object, on an update).
pub(crate) fn validate(info: &ResourceInfo, obj: &Value, old: Option<&Value>) -> Vec<FieldCause> {
    let mut v = Causes(Vec::new());
    if info.crd.is_some() {
        return v.0;
    }
    let spec = &obj["spec"];
    match (info.group.as_str(), info.kind.as_str()) {
        ("", "Pod") => {
            v.pod_spec(spec, "spec", None);
            if let Some(old) = old {
                v.pod_update(spec, &old["spec"]);
            }
        }
        ("", "Service") => v.service(spec, old.map(|o| &o["spec"])),
        ("", "Secret") => v.secret(obj, old),
        ("", "ConfigMap") => v.config_map(obj, old),
        ("", "PersistentVolumeClaim") => v.claim(spec, "spec"),
        ("apps", "Deployment") => {
            v.workload(spec, "deployment", &["Always"]);
            if spec["strategy"]["type"] == "Recreate"
                && spec["strategy"].get("rollingUpdate").is_some()
            {
                v.push(FieldCause::forbidden(
                    "spec.strategy.rollingUpdate",
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
            v.one_of(
                "spec.strategy.type",
                &spec["strategy"]["type"],
                &["Recreate", "RollingUpdate"],
            );
            v.immutable_selector(spec, old);
        }
        ("apps", "ReplicaSet") => {
            v.workload(spec, "replicaset", &["Always"]);
            v.immutable_selector(spec, old);
        }
        ("apps", "StatefulSet") => {
            v.workload(spec, "statefulset", &["Always"]);
            v.one_of(
                "spec.podManagementPolicy",
                &spec["podManagementPolicy"],
                &["OrderedReady", "Parallel"],
            );
            v.one_of(
                "spec.updateStrategy.type",
                &spec["updateStrategy"]["type"],
                &["RollingUpdate", "OnDelete"],
            );
            for (i, t) in array(&spec["volumeClaimTemplates"]).iter().enumerate() {
                v.claim(&t["spec"], &format!("spec.volumeClaimTemplates[{i}].spec"));
            }
            if let Some(old) = old {
                v.stateful_set_update(spec, &old["spec"]);
            }
        }
        ("batch", "Job") => v.job(obj, old),
        ("batch", "CronJob") => v.cron_job(spec),
        ("rbac.authorization.k8s.io", "Role") => v.rules(obj, true),
        ("rbac.authorization.k8s.io", "ClusterRole") => v.rules(obj, false),
        ("rbac.authorization.k8s.io", "RoleBinding") => v.binding(obj, old, true),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => v.binding(obj, old, false),
        _ => {}
    }
    v.0
}

fn array(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

fn is_dns_label(s: &str) -> bool {
    granary_api::names::is_dns1123_label(s)
}

fn is_config_key(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.len() <= 253
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Whether a label selector (`matchLabels`, `matchExpressions`) selects `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let labels_match = selector["matchLabels"]
        .as_object()
        .is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    let expressions_match = array(&selector["matchExpressions"]).iter().all(|e| {
        let key = str_of(&e["key"]);
        let values: Vec<&str> = array(&e["values"]).iter().map(str_of).collect();
        match str_of(&e["operator"]) {
            "In" => label(key).is_some_and(|l| values.contains(&l)),
            "NotIn" => label(key).is_none_or(|l| !values.contains(&l)),
            "Exists" => label(key).is_some(),
            "DoesNotExist" => label(key).is_none(),
            _ => false,
        }
    });
    labels_match && expressions_match
}

fn is_empty_selector(selector: &Value) -> bool {
    selector["matchLabels"]
        .as_object()
        .is_none_or(Map::is_empty)
        && array(&selector["matchExpressions"]).is_empty()
}

struct Causes(Vec<FieldCause>);

impl Causes {
    fn push(&mut self, c: FieldCause) {
        self.0.push(c);
    }

    fn one_of(&mut self, field: &str, value: &Value, allowed: &[&str]) {
        if let Some(s) = value.as_str()
            && !allowed.contains(&s)
        {
            let allowed: Vec<Value> = allowed.iter().map(|a| json!(a)).collect();
            self.push(FieldCause::not_supported(field, value, &allowed));
        }
    }

    fn non_negative(&mut self, field: &str, value: &Value) {
        if let Some(n) = value.as_i64()
            && n < 0
        {
            self.push(FieldCause::invalid(
                field,
                value,
                "must be greater than or equal to 0",
            ));
        }
    }

    fn port(&mut self, field: &str, value: &Value) {
        match value.as_i64() {
            None | Some(0) => self.push(FieldCause::required(field)),
            Some(n) if !(1..=65535).contains(&n) => self.push(FieldCause::invalid(
                field,
                value,
                "must be between 1 and 65535, inclusive",
            )),
            _ => {}
        }
    }

    /// A PodSpec at `path`; `restart` limits the restart policies a workload allows.
    fn pod_spec(&mut self, spec: &Value, path: &str, restart: Option<&[&str]>) {
        let containers = array(&spec["containers"]);
        if containers.is_empty() {
            self.push(FieldCause::required(format!("{path}.containers")));
        }
        let volumes: Vec<&str> = array(&spec["volumes"])
            .iter()
            .map(|v| str_of(&v["name"]))
            .collect();
        for (i, v) in array(&spec["volumes"]).iter().enumerate() {
            let name = str_of(&v["name"]);
            let field = format!("{path}.volumes[{i}].name");
            if name.is_empty() {
                self.push(FieldCause::required(field));
            } else if !is_dns_label(name) {
                self.push(FieldCause::invalid(field, &v["name"], DNS_LABEL_MESSAGE));
            } else if volumes[..i].contains(&name) {
                self.push(FieldCause::duplicate(field, &v["name"]));
            }
        }
        let mut names: Vec<&str> = Vec::new();
        for key in ["initContainers", "containers"] {
            for (i, c) in array(&spec[key]).iter().enumerate() {
                let at = format!("{path}.{key}[{i}]");
                let name = str_of(&c["name"]);
                if name.is_empty() {
                    self.push(FieldCause::required(format!("{at}.name")));
                } else if !is_dns_label(name) {
                    self.push(FieldCause::invalid(
                        format!("{at}.name"),
                        &c["name"],
                        DNS_LABEL_MESSAGE,
                    ));
                } else if names.contains(&name) {
                    self.push(FieldCause::duplicate(format!("{at}.name"), &c["name"]));
                }
                names.push(name);
                if str_of(&c["image"]).trim().is_empty() {
                    self.push(FieldCause::required(format!("{at}.image")));
                }
                self.one_of(
                    &format!("{at}.imagePullPolicy"),
                    &c["imagePullPolicy"],
                    &["Always", "IfNotPresent", "Never"],
                );
                self.one_of(
                    &format!("{at}.terminationMessagePolicy"),
                    &c["terminationMessagePolicy"],
                    &["File", "FallbackToLogsOnError"],
                );
                for (j, p) in array(&c["ports"]).iter().enumerate() {
                    self.port(
                        &format!("{at}.ports[{j}].containerPort"),
                        &p["containerPort"],
                    );
                    self.one_of(
                        &format!("{at}.ports[{j}].protocol"),
                        &p["protocol"],
                        &["SCTP", "TCP", "UDP"],
                    );
                }
                for (j, m) in array(&c["volumeMounts"]).iter().enumerate() {
                    let name = str_of(&m["name"]);
                    if name.is_empty() {
                        self.push(FieldCause::required(format!("{at}.volumeMounts[{j}].name")));
                    } else if !volumes.contains(&name) {
                        self.push(FieldCause {
                            reason: "FieldValueNotFound",
                            field: format!("{at}.volumeMounts[{j}].name"),
                            message: format!("Not found: {:?}", name),
                        });
                    }
                    if str_of(&m["mountPath"]).is_empty() {
                        self.push(FieldCause::required(format!(
                            "{at}.volumeMounts[{j}].mountPath"
                        )));
                    }
                }
            }
        }
        let allowed = restart.unwrap_or(&["Always", "OnFailure", "Never"]);
        let policy = &spec["restartPolicy"];
        if str_of(policy).is_empty() {
            self.push(FieldCause::required_message(
                format!("{path}.restartPolicy"),
                &format!("valid values: {}", quoted(allowed)),
            ));
        } else {
            self.one_of(&format!("{path}.restartPolicy"), policy, allowed);
        }
        self.one_of(
            &format!("{path}.dnsPolicy"),
            &spec["dnsPolicy"],
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        );
        self.non_negative(
            &format!("{path}.terminationGracePeriodSeconds"),
            &spec["terminationGracePeriodSeconds"],
        );
    }

    /// What a Pod update may change: images, activeDeadlineSeconds, tolerations
    /// (added), terminationGracePeriodSeconds; nothing else of the spec.
    fn pod_update(&mut self, spec: &Value, old: &Value) {
        let mutable = |s: &Value| {
            let mut s = s.clone();
            if let Some(m) = s.as_object_mut() {
                for key in [
                    "activeDeadlineSeconds",
                    "tolerations",
                    "terminationGracePeriodSeconds",
                ] {
                    m.remove(key);
                }
                for key in ["containers", "initContainers"] {
                    for c in m
                        .get_mut(key)
                        .and_then(Value::as_array_mut)
                        .into_iter()
                        .flatten()
                    {
                        if let Some(c) = c.as_object_mut() {
                            c.remove("image");
                        }
                    }
                }
            }
            s
        };
        if mutable(spec) != mutable(old) {
            self.push(FieldCause::forbidden(
                "spec",
                "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
            ));
        }
    }

    /// Deployment, ReplicaSet, StatefulSet: a selector that selects the template.
    fn workload(&mut self, spec: &Value, kind: &str, restart: &[&str]) {
        self.non_negative("spec.replicas", &spec["replicas"]);
        self.non_negative("spec.minReadySeconds", &spec["minReadySeconds"]);
        self.non_negative("spec.revisionHistoryLimit", &spec["revisionHistoryLimit"]);
        let selector = &spec["selector"];
        let labels = &spec["template"]["metadata"]["labels"];
        if selector.is_null() {
            self.push(FieldCause::required("spec.selector"));
        } else if is_empty_selector(selector) {
            self.push(FieldCause::invalid(
                "spec.selector",
                selector,
                &format!("empty selector is invalid for {kind}"),
            ));
        } else {
            self.selects_template(selector, labels);
        }
        self.pod_spec(
            &spec["template"]["spec"],
            "spec.template.spec",
            Some(restart),
        );
    }

    fn selects_template(&mut self, selector: &Value, labels: &Value) {
        if !selects(selector, labels) {
            self.push(FieldCause::invalid(
                "spec.template.metadata.labels",
                labels,
                "`selector` does not match template `labels`",
            ));
        }
    }

    fn immutable_selector(&mut self, spec: &Value, old: Option<&Value>) {
        if let Some(old) = old
            && spec["selector"] != old["spec"]["selector"]
        {
            self.push(FieldCause::invalid(
                "spec.selector",
                &spec["selector"],
                "field is immutable",
            ));
        }
    }

    fn stateful_set_update(&mut self, spec: &Value, old: &Value) {
        let fixed = |s: &Value| {
            let mut s = s.clone();
            if let Some(m) = s.as_object_mut() {
                for key in [
                    "replicas",
                    "ordinals",
                    "template",
                    "updateStrategy",
                    "persistentVolumeClaimRetentionPolicy",
                    "minReadySeconds",
                ] {
                    m.remove(key);
                }
            }
            s
        };
        if fixed(spec) != fixed(old) {
            self.push(FieldCause::forbidden(
                "spec",
                "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
            ));
        }
    }

    fn job(&mut self, obj: &Value, old: Option<&Value>) {
        let spec = &obj["spec"];
        for key in [
            "parallelism",
            "completions",
            "backoffLimit",
            "activeDeadlineSeconds",
            "ttlSecondsAfterFinished",
        ] {
            self.non_negative(&format!("spec.{key}"), &spec[key]);
        }
        self.one_of(
            "spec.completionMode",
            &spec["completionMode"],
            &["NonIndexed", "Indexed"],
        );
        let labels = &spec["template"]["metadata"]["labels"];
        if spec["manualSelector"] != json!(true) {
            // The generated selector: the template must carry the Job's own labels.
            let uid = super::objects::meta_str(obj, "uid").unwrap_or_default();
            let name = super::objects::meta_str(obj, "name").unwrap_or_default();
            for (key, want) in [
                ("controller-uid", uid),
                ("job-name", name),
                ("batch.kubernetes.io/controller-uid", uid),
                ("batch.kubernetes.io/job-name", name),
            ] {
                let got = &labels[key];
                if got.as_str() != Some(want) {
                    self.push(FieldCause::invalid(
                        format!("spec.template.metadata.labels[{key}]"),
                        got,
                        &format!("must be '{want}'"),
                    ));
                }
            }
            let expected = json!({"controller-uid": uid, "batch.kubernetes.io/controller-uid": uid, "job-name": name, "batch.kubernetes.io/job-name": name});
            if !selects(&spec["selector"], &expected) {
                self.push(FieldCause::invalid(
                    "spec.selector",
                    &spec["selector"],
                    "`selector` not auto-generated",
                ));
            }
        } else if spec["selector"].is_null() {
            self.push(FieldCause::required("spec.selector"));
        } else {
            self.selects_template(&spec["selector"], labels);
        }
        self.pod_spec(
            &spec["template"]["spec"],
            "spec.template.spec",
            Some(&["OnFailure", "Never"]),
        );
        if let Some(old) = old {
            if spec["selector"] != old["spec"]["selector"] {
                self.push(FieldCause::invalid(
                    "spec.selector",
                    &spec["selector"],
                    "field is immutable",
                ));
            }
            // A suspended Job's template may change (to resume it elsewhere).
            if spec["template"] != old["spec"]["template"] && old["spec"]["suspend"] != json!(true)
            {
                self.push(FieldCause::invalid(
                    "spec.template",
                    &spec["template"],
                    "field is immutable",
                ));
            }
            if spec["completionMode"] != old["spec"]["completionMode"] {
                self.push(FieldCause::invalid(
                    "spec.completionMode",
                    &spec["completionMode"],
                    "field is immutable",
                ));
            }
        }
    }

    fn cron_job(&mut self, spec: &Value) {
        let schedule = str_of(&spec["schedule"]);
        if schedule.is_empty() {
            self.push(FieldCause::required("spec.schedule"));
        } else if let Err(e) = cron_parses(schedule) {
            self.push(FieldCause::invalid("spec.schedule", &spec["schedule"], &e));
        }
        self.one_of(
            "spec.concurrencyPolicy",
            &spec["concurrencyPolicy"],
            &["Allow", "Forbid", "Replace"],
        );
        for key in [
            "successfulJobsHistoryLimit",
            "failedJobsHistoryLimit",
            "startingDeadlineSeconds",
        ] {
            self.non_negative(&format!("spec.{key}"), &spec[key]);
        }
        self.pod_spec(
            &spec["jobTemplate"]["spec"]["template"]["spec"],
            "spec.jobTemplate.spec.template.spec",
            Some(&["OnFailure", "Never"]),
        );
    }

    fn service(&mut self, spec: &Value, old: Option<&Value>) {
        let kind = str_of(&spec["type"]);
        self.one_of(
            "spec.type",
            &spec["type"],
            &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
        );
        self.one_of(
            "spec.sessionAffinity",
            &spec["sessionAffinity"],
            &["ClientIP", "None"],
        );
        let headless = spec["clusterIP"] == "None";
        let ports = array(&spec["ports"]);
        if ports.is_empty() && kind != "ExternalName" && !headless {
            self.push(FieldCause::required("spec.ports"));
        }
        if kind == "ExternalName" && str_of(&spec["externalName"]).is_empty() {
            self.push(FieldCause::required("spec.externalName"));
        }
        let mut names: Vec<&str> = Vec::new();
        for (i, p) in ports.iter().enumerate() {
            let at = format!("spec.ports[{i}]");
            let name = str_of(&p["name"]);
            if ports.len() > 1 && name.is_empty() {
                self.push(FieldCause::required(format!("{at}.name")));
            } else if !name.is_empty() && !is_dns_label(name) {
                self.push(FieldCause::invalid(
                    format!("{at}.name"),
                    &p["name"],
                    DNS_LABEL_MESSAGE,
                ));
            } else if !name.is_empty() && names.contains(&name) {
                self.push(FieldCause::duplicate(format!("{at}.name"), &p["name"]));
            }
            names.push(name);
            self.port(&format!("{at}.port"), &p["port"]);
            self.one_of(
                &format!("{at}.protocol"),
                &p["protocol"],
                &["SCTP", "TCP", "UDP"],
            );
            // 0 is Go's zero value: no node port.
            if p["nodePort"].as_i64().is_some_and(|n| n != 0)
                && matches!(kind, "ClusterIP" | "ExternalName")
            {
                self.push(FieldCause::forbidden(
                    format!("{at}.nodePort"),
                    &format!("may not be used when `type` is '{kind}'"),
                ));
            }
            if let Some(n) = p["targetPort"].as_i64()
                && !(1..=65535).contains(&n)
            {
                self.push(FieldCause::invalid(
                    format!("{at}.targetPort"),
                    &p["targetPort"],
                    "must be between 1 and 65535, inclusive",
                ));
            }
        }
        if let Some(old) = old {
            let before = str_of(&old["clusterIP"]);
            let now = str_of(&spec["clusterIP"]);
            if !before.is_empty()
                && kind != "ExternalName"
                && str_of(&old["type"]) != "ExternalName"
                && now != before
            {
                self.push(FieldCause::invalid(
                    "spec.clusterIPs[0]",
                    &spec["clusterIP"],
                    "may not change once set",
                ));
            }
        }
    }

    fn data_keys(&mut self, field: &str, data: &Value) -> usize {
        let mut size = 0;
        if let Some(m) = data.as_object() {
            for (k, v) in m {
                if !is_config_key(k) {
                    self.push(FieldCause::invalid(
                        format!("{field}[{k}]"),
                        &json!(k),
                        CONFIG_KEY_MESSAGE,
                    ));
                }
                size += str_of(v).len();
            }
        }
        size
    }

    fn immutable_data(&mut self, obj: &Value, old: Option<&Value>, fields: &[&str]) {
        let Some(old) = old else { return };
        if old["immutable"] == json!(true) {
            for f in fields {
                if obj[*f] != old[*f] {
                    self.push(FieldCause::forbidden(
                        *f,
                        "field is immutable when `immutable` is set",
                    ));
                }
            }
            if obj["immutable"] != json!(true) {
                self.push(FieldCause::forbidden(
                    "immutable",
                    "field is immutable when `immutable` is set",
                ));
            }
        }
    }

    fn secret(&mut self, obj: &Value, old: Option<&Value>) {
        let data = &obj["data"];
        // Base64 text: the decoded size is about three quarters.
        let size = self.data_keys("data", data) / 4 * 3;
        if size > MAX_DATA_BYTES {
            self.push(FieldCause::too_long("data", MAX_DATA_BYTES));
        }
        let has = |k: &str| data.get(k).is_some();
        match str_of(&obj["type"]) {
            "kubernetes.io/service-account-token" => {
                let annotation = "kubernetes.io/service-account.name";
                if str_of(&obj["metadata"]["annotations"][annotation]).is_empty() {
                    self.push(FieldCause::required(format!(
                        "metadata.annotations[{annotation}]"
                    )));
                }
            }
            "kubernetes.io/dockercfg" if !has(".dockercfg") => {
                self.push(FieldCause::required("data[.dockercfg]"));
            }
            "kubernetes.io/dockerconfigjson" if !has(".dockerconfigjson") => {
                self.push(FieldCause::required("data[.dockerconfigjson]"));
            }
            "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
                self.push(FieldCause::required("data[username]"));
                self.push(FieldCause::required("data[password]"));
            }
            "kubernetes.io/ssh-auth" if !has("ssh-privatekey") => {
                self.push(FieldCause::required("data[ssh-privatekey]"));
            }
            "kubernetes.io/tls" => {
                for key in ["tls.crt", "tls.key"] {
                    if !has(key) {
                        self.push(FieldCause::required(format!("data[{key}]")));
                    }
                }
            }
            _ => {}
        }
        if let Some(old) = old
            && obj["type"] != old["type"]
        {
            self.push(FieldCause::invalid(
                "type",
                &obj["type"],
                "field is immutable",
            ));
        }
        self.immutable_data(obj, old, &["data"]);
    }

    fn config_map(&mut self, obj: &Value, old: Option<&Value>) {
        let mut size = self.data_keys("data", &obj["data"]);
        size += self.data_keys("binaryData", &obj["binaryData"]) / 4 * 3;
        if let (Some(data), Some(binary)) = (obj["data"].as_object(), obj["binaryData"].as_object())
        {
            for k in data.keys().filter(|k| binary.contains_key(*k)) {
                self.push(FieldCause::invalid(
                    format!("data[{k}]"),
                    &json!(k),
                    "duplicate of key present in binaryData",
                ));
            }
        }
        if size > MAX_DATA_BYTES {
            self.push(FieldCause::too_long("[]", MAX_DATA_BYTES));
        }
        self.immutable_data(obj, old, &["data", "binaryData"]);
    }

    fn claim(&mut self, spec: &Value, path: &str) {
        let modes = array(&spec["accessModes"]);
        if modes.is_empty() {
            self.push(FieldCause::required_message(
                format!("{path}.accessModes"),
                "at least 1 access mode is required",
            ));
        }
        for (i, m) in modes.iter().enumerate() {
            self.one_of(
                &format!("{path}.accessModes[{i}]"),
                m,
                &[
                    "ReadOnlyMany",
                    "ReadWriteMany",
                    "ReadWriteOnce",
                    "ReadWriteOncePod",
                ],
            );
        }
        if spec["resources"]["requests"]["storage"].is_null() && spec["dataSourceRef"].is_null() {
            self.push(FieldCause::required(format!("{path}.resources[storage]")));
        }
        self.one_of(
            &format!("{path}.volumeMode"),
            &spec["volumeMode"],
            &["Block", "Filesystem"],
        );
    }

    fn rules(&mut self, obj: &Value, namespaced: bool) {
        for (i, rule) in array(&obj["rules"]).iter().enumerate() {
            let at = format!("rules[{i}]");
            if array(&rule["verbs"]).is_empty() {
                self.push(FieldCause::required_message(
                    format!("{at}.verbs"),
                    "verbs must contain at least one value",
                ));
            }
            let urls = &rule["nonResourceURLs"];
            if !array(urls).is_empty() {
                if namespaced {
                    self.push(FieldCause::invalid(
                        format!("{at}.nonResourceURLs"),
                        urls,
                        "namespaced rules cannot apply to non-resource URLs",
                    ));
                }
                if [
                    &rule["apiGroups"],
                    &rule["resources"],
                    &rule["resourceNames"],
                ]
                .iter()
                .any(|v| !array(v).is_empty())
                {
                    self.push(FieldCause::invalid(
                        format!("{at}.nonResourceURLs"),
                        urls,
                        "rules cannot apply to both regular resources and non-resource URLs",
                    ));
                }
                continue;
            }
            if array(&rule["apiGroups"]).is_empty() {
                self.push(FieldCause::required_message(
                    format!("{at}.apiGroups"),
                    "resource rules must supply at least one api group",
                ));
            }
            if array(&rule["resources"]).is_empty() {
                self.push(FieldCause::required_message(
                    format!("{at}.resources"),
                    "resource rules must supply at least one resource",
                ));
            }
        }
    }

    fn binding(&mut self, obj: &Value, old: Option<&Value>, namespaced: bool) {
        let role_ref = &obj["roleRef"];
        let kinds: &[&str] = if namespaced {
            &["Role", "ClusterRole"]
        } else {
            &["ClusterRole"]
        };
        if str_of(&role_ref["kind"]).is_empty() {
            self.push(FieldCause::not_supported(
                "roleRef.kind",
                &json!(""),
                &kinds.iter().map(|k| json!(k)).collect::<Vec<_>>(),
            ));
        } else {
            self.one_of("roleRef.kind", &role_ref["kind"], kinds);
        }
        self.one_of(
            "roleRef.apiGroup",
            &role_ref["apiGroup"],
            &["rbac.authorization.k8s.io"],
        );
        if str_of(&role_ref["name"]).is_empty() {
            self.push(FieldCause::required("roleRef.name"));
        }
        for (i, s) in array(&obj["subjects"]).iter().enumerate() {
            let at = format!("subjects[{i}]");
            if str_of(&s["name"]).is_empty() {
                self.push(FieldCause::required(format!("{at}.name")));
            }
            match str_of(&s["kind"]) {
                "ServiceAccount" => {
                    self.one_of(&format!("{at}.apiGroup"), &s["apiGroup"], &[""]);
                    if !namespaced && str_of(&s["namespace"]).is_empty() {
                        self.push(FieldCause::required(format!("{at}.namespace")));
                    }
                }
                "User" | "Group" => {
                    self.one_of(
                        &format!("{at}.apiGroup"),
                        &s["apiGroup"],
                        &["rbac.authorization.k8s.io"],
                    );
                }
                _ => self.push(FieldCause::not_supported(
                    format!("{at}.kind"),
                    &s["kind"],
                    &[json!("ServiceAccount"), json!("User"), json!("Group")],
                )),
            }
        }
        if let Some(old) = old
            && obj["roleRef"] != old["roleRef"]
        {
            self.push(FieldCause::invalid(
                "roleRef",
                &obj["roleRef"],
                "cannot change roleRef",
            ));
        }
    }
}

fn quoted(values: &[&str]) -> String {
    values
        .iter()
        .map(|v| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether a CronJob schedule parses as the CronJob controller's parser takes it:
/// five fields, or a `@yearly`-style descriptor, after an optional `TZ=`/`CRON_TZ=`.
fn cron_parses(schedule: &str) -> Result<(), String> {
    if schedule.contains("TZ") {
        return Err("cannot use TZ or CRON_TZ in schedule, use timeZone field instead".into());
    }
    let unparseable = |why: &str| Err(format!("unparseable schedule: {schedule}: {why}"));
    if let Some(descriptor) = schedule.strip_prefix('@') {
        return match descriptor {
            "yearly" | "annually" | "monthly" | "weekly" | "daily" | "midnight" | "hourly" => {
                Ok(())
            }
            _ if descriptor.starts_with("every ") => Ok(()),
            _ => unparseable(&format!("unrecognized descriptor: @{descriptor}")),
        };
    }
    let fields: Vec<&str> = schedule.split_whitespace().collect();
    if fields.len() != 5 {
        return unparseable(&format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    let ranges = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)];
    for (field, (lo, hi)) in fields.iter().zip(ranges) {
        for part in field.split(',') {
            let (range, step) = match part.split_once('/') {
                Some((r, s)) => (r, Some(s)),
                None => (part, None),
            };
            if let Some(s) = step
                && s.parse::<u32>().map_or(true, |n| n == 0)
            {
                return unparseable(&format!("failed to parse int from {s}"));
            }
            if range == "*" || range == "?" {
                continue;
            }
            let (a, b) = range.split_once('-').unwrap_or((range, range));
            for n in [a, b] {
                let value = n.parse::<u32>().ok().or_else(|| named(n));
                match value {
                    Some(v) if (lo..=hi).contains(&v) => {}
                    Some(v) => {
                        return unparseable(&format!(
                            "end of range ({v}) above maximum ({hi}): {part}"
                        ));
                    }
                    None => return unparseable(&format!("failed to parse int from {n}")),
                }
            }
        }
    }
    Ok(())
}

/// Month and weekday names a cron field may use.
fn named(s: &str) -> Option<u32> {
    const NAMES: &[&str] = &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    const DAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
    let s = s.to_ascii_lowercase();
    NAMES
        .iter()
        .position(|n| *n == s)
        .map(|i| i as u32 + 1)
        .or_else(|| DAYS.iter().position(|d| *d == s).map(|i| i as u32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    fn check(group: &str, plural: &str, mut obj: Value, old: Option<&Value>) -> Vec<String> {
        let info = Registry::new().lookup(group, "v1", plural).unwrap();
        super::super::defaults::apply(&info, &mut obj);
        validate(&info, &obj, old)
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    fn deployment(template_labels: Value, container: Value) -> Value {
        json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": template_labels}, "spec": {"containers": [container]}}}})
    }

    #[test]
    fn workloads_say_what_kube_apiserver_says() {
        assert_eq!(
            check(
                "apps",
                "deployments",
                deployment(json!({"app": "a"}), json!({"name": "a", "image": "x"})),
                None
            ),
            Vec::<String>::new()
        );
        assert_eq!(
            check(
                "apps",
                "deployments",
                deployment(json!({"app": "b"}), json!({"name": "a"})),
                None
            ),
            vec![
                "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"b\"}: `selector` does not match template `labels`",
                "spec.template.spec.containers[0].image: Required value",
            ]
        );
        let mut d = deployment(json!({"app": "a"}), json!({"name": "a", "image": "x"}));
        d["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
        assert_eq!(
            check("apps", "deployments", d, None),
            vec![
                "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""
            ]
        );
        let old = deployment(json!({"app": "a"}), json!({"name": "a", "image": "x"}));
        let mut moved = old.clone();
        moved["spec"]["selector"]["matchLabels"]["tier"] = json!("web");
        moved["spec"]["template"]["metadata"]["labels"]["tier"] = json!("web");
        assert_eq!(check("apps", "deployments", moved, Some(&old)).len(), 1);
    }

    #[test]
    fn jobs_need_their_generated_selector() {
        let mut job = json!({"metadata": {"name": "j", "uid": "u-2"}, "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}});
        let info = Registry::new().lookup("batch", "v1", "jobs").unwrap();
        super::super::defaults::apply(&info, &mut job);
        super::super::defaults::prepare_for_create(&info, &mut job);
        assert_eq!(
            validate(&info, &job, None)
                .iter()
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect::<Vec<_>>(),
            vec![
                "spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""
            ]
        );
        // A Job restored with the selector of the cluster it came from.
        let mut restored = json!({"metadata": {"name": "j", "uid": "u-3"}, "spec": {
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-old"}},
            "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "u-old", "controller-uid": "u-old"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "a", "image": "x"}]}}}});
        super::super::defaults::prepare_for_create(&info, &mut restored);
        let causes: Vec<String> = validate(&info, &restored, None)
            .iter()
            .map(|c| c.field.clone())
            .collect();
        assert_eq!(
            causes,
            vec![
                "spec.template.metadata.labels[controller-uid]",
                "spec.template.metadata.labels[batch.kubernetes.io/controller-uid]",
                "spec.selector",
            ]
        );
    }

    #[test]
    fn services_secrets_config_maps_and_rbac() {
        assert_eq!(
            check(
                "",
                "services",
                json!({"spec": {"ports": [{"port": 80}, {"port": 81}]}}),
                None
            ),
            vec![
                "spec.ports[0].name: Required value",
                "spec.ports[1].name: Required value"
            ]
        );
        assert_eq!(
            check(
                "",
                "services",
                json!({"spec": {"ports": [{"port": 80, "nodePort": 30000}]}}),
                None
            ),
            vec!["spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]
        );
        assert_eq!(
            check("", "services", json!({"spec": {}}), None),
            vec!["spec.ports: Required value"]
        );
        assert!(check("", "services", json!({"spec": {"clusterIP": "None"}}), None).is_empty());
        let old = json!({"spec": {"clusterIP": "10.96.0.5", "ports": [{"port": 80}]}});
        assert_eq!(
            check(
                "",
                "services",
                json!({"spec": {"clusterIP": "10.96.0.6", "ports": [{"port": 80}]}}),
                Some(&old)
            ),
            vec!["spec.clusterIPs[0]: Invalid value: \"10.96.0.6\": may not change once set"]
        );
        assert_eq!(
            check(
                "",
                "secrets",
                json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "YQ=="}}),
                None
            ),
            vec!["data[tls.key]: Required value"]
        );
        assert_eq!(
            check("", "secrets", json!({"data": {"bad key": "YQ=="}}), None)[0],
            format!("data[bad key]: Invalid value: \"bad key\": {CONFIG_KEY_MESSAGE}")
        );
        let old = json!({"type": "Opaque", "data": {}});
        assert_eq!(
            check(
                "",
                "secrets",
                json!({"type": "x/y", "data": {}}),
                Some(&old)
            ),
            vec!["type: Invalid value: \"x/y\": field is immutable"]
        );
        let old = json!({"immutable": true, "data": {"a": "b"}});
        assert_eq!(
            check(
                "",
                "configmaps",
                json!({"immutable": true, "data": {"a": "c"}}),
                Some(&old)
            ),
            vec!["data: Forbidden: field is immutable when `immutable` is set"]
        );
        assert_eq!(
            check(
                "rbac.authorization.k8s.io",
                "roles",
                json!({"rules": [{"resources": ["pods"]}]}),
                None
            ),
            vec![
                "rules[0].verbs: Required value: verbs must contain at least one value",
                "rules[0].apiGroups: Required value: resource rules must supply at least one api group"
            ]
        );
        assert_eq!(
            check(
                "rbac.authorization.k8s.io",
                "clusterrolebindings",
                json!({"roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "ServiceAccount", "name": "s"}]}),
                None
            ),
            vec![
                "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
                "subjects[0].namespace: Required value"
            ]
        );
        let old = json!({"roleRef": {"kind": "ClusterRole", "name": "a", "apiGroup": "rbac.authorization.k8s.io"}});
        assert_eq!(
            check(
                "rbac.authorization.k8s.io",
                "rolebindings",
                json!({"roleRef": {"kind": "ClusterRole", "name": "b"}}),
                Some(&old)
            )
            .len(),
            1
        );
    }

    #[test]
    fn cron_schedules() {
        for ok in [
            "* * * * *",
            "*/5 0-6 1,15 jan-mar mon-fri",
            "@hourly",
            "0 0 * * 7",
        ] {
            assert_eq!(cron_parses(ok), Ok(()), "{ok}");
        }
        for bad in [
            "* * * *",
            "61 * * * *",
            "*/0 * * * *",
            "@sometimes",
            "TZ=UTC * * * * *",
        ] {
            assert!(cron_parses(bad).is_err(), "{bad}");
        }
    }
}
