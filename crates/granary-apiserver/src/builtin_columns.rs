//! Server-side printing of the built-in kinds users `kubectl get` most: the columns
//! kube-apiserver's table convertor prints for them (its printers of `pkg/printers`),
//! written from its documented output, for every built-in kind the server serves but
//! Events (whose table is in `table.rs`). Priority-1 columns show with `-o wide`.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

/// A column: name, type, priority (0 always shown, 1 with `-o wide`), description.
type Column = (&'static str, &'static str, u8, &'static str);

const NAME: Column = (
    "Name",
    "string",
    0,
    "Name must be unique within a namespace.",
);
const AGE: Column = (
    "Age",
    "string",
    0,
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
);
const CONTAINERS: Column = (
    "Containers",
    "string",
    1,
    "Names of each container in the template.",
);
const IMAGES: Column = (
    "Images",
    "string",
    1,
    "Images referenced by each container in the template.",
);
const SELECTOR: Column = ("Selector", "string", 1, "Label selector for pods.");

/// The columns of built-in `kind` of `group`, if it has its own.
fn columns_of(group: &str, kind: &str) -> Option<Vec<Column>> {
    Some(match (group, kind) {
        ("apps", "Deployment") => vec![
            NAME,
            ("Ready", "string", 0, "Number of the pod with ready state."),
            (
                "Up-to-date",
                "string",
                0,
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
            ),
            (
                "Available",
                "string",
                0,
                "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ],
        ("apps", "ReplicaSet") => vec![
            NAME,
            ("Desired", "integer", 0, "Number of desired pods."),
            ("Current", "integer", 0, "Number of actual replicas."),
            (
                "Ready",
                "integer",
                0,
                "The number of ready replicas for this replica set.",
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ],
        ("apps", "StatefulSet") => vec![
            NAME,
            ("Ready", "string", 0, "Number of the pod with ready state."),
            AGE,
            CONTAINERS,
            IMAGES,
        ],
        ("apps", "DaemonSet") => vec![
            NAME,
            (
                "Desired",
                "integer",
                0,
                "The total number of nodes that should be running the daemon pod.",
            ),
            (
                "Current",
                "integer",
                0,
                "The number of nodes that are running at least 1 daemon pod.",
            ),
            (
                "Ready",
                "integer",
                0,
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
            ),
            (
                "Up-to-date",
                "integer",
                0,
                "The total number of nodes that are running updated daemon pod.",
            ),
            (
                "Available",
                "integer",
                0,
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
            ),
            (
                "Node Selector",
                "string",
                0,
                "NodeSelector is a selector which must be true for the pod to fit on a node.",
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ],
        ("batch", "Job") => vec![
            NAME,
            ("Status", "string", 0, "Status of the job."),
            (
                "Completions",
                "string",
                0,
                "The desired number of successfully finished pods the job should be run with.",
            ),
            (
                "Duration",
                "string",
                0,
                "Time required to complete the job.",
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ],
        ("batch", "CronJob") => vec![
            NAME,
            ("Schedule", "string", 0, "The schedule in Cron format."),
            (
                "Timezone",
                "string",
                0,
                "The time zone name for the given schedule.",
            ),
            (
                "Suspend",
                "boolean",
                0,
                "This flag tells the controller to suspend subsequent executions.",
            ),
            (
                "Active",
                "integer",
                0,
                "A list of pointers to currently running jobs.",
            ),
            (
                "Last Schedule",
                "string",
                0,
                "Information when was the last time the job was successfully scheduled.",
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ],
        ("", "Service") => vec![
            NAME,
            ("Type", "string", 0, "The type of service."),
            ("Cluster-IP", "string", 0, "The cluster IP of the service."),
            (
                "External-IP",
                "string",
                0,
                "The external IPs of the service.",
            ),
            ("Port(s)", "string", 0, "The ports of the service."),
            AGE,
            (
                "Selector",
                "string",
                1,
                "Route service traffic to pods with label keys and values matching this selector.",
            ),
        ],
        ("", "Pod") => vec![
            NAME,
            (
                "Ready",
                "string",
                0,
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            (
                "Status",
                "string",
                0,
                "The aggregate status of the containers in this pod.",
            ),
            (
                "Restarts",
                "string",
                0,
                "The number of times the containers in this pod have been restarted.",
            ),
            AGE,
            ("IP", "string", 1, "IP address allocated to the pod."),
            ("Node", "string", 1, "Name of the Node this pod runs on."),
        ],
        ("", "ConfigMap") => vec![
            NAME,
            ("Data", "integer", 0, "The number of entries in the data."),
            AGE,
        ],
        ("", "Secret") => vec![
            NAME,
            ("Type", "string", 0, "The type of the secret."),
            ("Data", "integer", 0, "The number of entries in the data."),
            AGE,
        ],
        ("", "ServiceAccount") => vec![
            NAME,
            ("Secrets", "integer", 0, "The number of secrets."),
            AGE,
        ],
        ("", "Namespace") => vec![
            NAME,
            ("Status", "string", 0, "The status of the namespace."),
            AGE,
        ],
        ("", "PersistentVolumeClaim") => vec![
            NAME,
            (
                "Status",
                "string",
                0,
                "Phase represents the current phase of PersistentVolumeClaim.",
            ),
            (
                "Volume",
                "string",
                0,
                "VolumeName is the binding reference to the PersistentVolume backing this claim.",
            ),
            (
                "Capacity",
                "string",
                0,
                "Capacity represents the actual resources of the underlying volume.",
            ),
            (
                "Access Modes",
                "string",
                0,
                "AccessModes contains the desired access modes the volume should have.",
            ),
            (
                "StorageClass",
                "string",
                0,
                "StorageClassName is the name of the StorageClass required by the claim.",
            ),
            (
                "VolumeAttributesClass",
                "string",
                0,
                "VolumeAttributesClassName may be used to set the VolumeAttributesClass used by this claim.",
            ),
            AGE,
            (
                "VolumeMode",
                "string",
                1,
                "VolumeMode defines what type of volume is required by the claim.",
            ),
        ],
        ("", "PersistentVolume") => vec![
            NAME,
            (
                "Capacity",
                "string",
                0,
                "capacity is the description of the persistent volume's resources and capacity.",
            ),
            (
                "Access Modes",
                "string",
                0,
                "accessModes contains all ways the volume can be mounted.",
            ),
            (
                "Reclaim Policy",
                "string",
                0,
                "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim.",
            ),
            (
                "Status",
                "string",
                0,
                "phase indicates if a volume is available, bound to a claim, or released by a claim.",
            ),
            (
                "Claim",
                "string",
                0,
                "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim.",
            ),
            (
                "StorageClass",
                "string",
                0,
                "storageClassName is the name of StorageClass to which this persistent volume belongs.",
            ),
            (
                "VolumeAttributesClass",
                "string",
                0,
                "Name of VolumeAttributesClass to which this persistent volume belongs.",
            ),
            (
                "Reason",
                "string",
                0,
                "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.",
            ),
            AGE,
            (
                "VolumeMode",
                "string",
                1,
                "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state.",
            ),
        ],
        ("", "ResourceQuota") => vec![
            NAME,
            AGE,
            (
                "Request",
                "string",
                0,
                "Request represents a minimum amount of cpu/memory that a container may consume.",
            ),
            (
                "Limit",
                "string",
                0,
                "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
            ),
        ],
        ("coordination.k8s.io", "Lease") => vec![
            NAME,
            (
                "Holder",
                "string",
                0,
                "holderIdentity contains the identity of the holder of a current lease.",
            ),
            AGE,
        ],
        ("policy", "PodDisruptionBudget") => vec![
            NAME,
            (
                "Min Available",
                "string",
                0,
                "The minimum number of pods that must be available simultaneously.",
            ),
            (
                "Max Unavailable",
                "string",
                0,
                "The maximum number of pods that may be unavailable simultaneously.",
            ),
            (
                "Allowed Disruptions",
                "integer",
                0,
                "Calculated number of pods that may be disrupted at this time.",
            ),
            AGE,
        ],
        ("networking.k8s.io", "Ingress") => vec![
            NAME,
            (
                "Class",
                "string",
                0,
                "The name of the IngressClass resource that should be used for ingress.",
            ),
            (
                "Hosts",
                "string",
                0,
                "Hosts that incoming requests are matched against before the ingress rule.",
            ),
            (
                "Address",
                "string",
                0,
                "Address is a list containing ingress points for the load-balancer.",
            ),
            (
                "Ports",
                "string",
                0,
                "Ports of TLS configurations that open.",
            ),
            AGE,
        ],
        ("scheduling.k8s.io", "PriorityClass") => vec![
            NAME,
            ("Value", "integer", 0, "The value of this priority class."),
            (
                "Global-Default",
                "boolean",
                0,
                "globalDefault specifies whether this PriorityClass should be considered as the default priority.",
            ),
            AGE,
            (
                "PreemptionPolicy",
                "string",
                0,
                "preemptionPolicy is the Policy for preempting pods with lower priority.",
            ),
        ],
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole")
        | ("apiextensions.k8s.io", "CustomResourceDefinition") => vec![
            NAME,
            (
                "Created At",
                "date",
                0,
                "CreationTimestamp is a timestamp representing the server time when this object was created.",
            ),
        ],
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => vec![
            NAME,
            ("Role", "string", 0, "Role of this binding."),
            AGE,
            ("Users", "string", 1, "Users in the roleBinding."),
            ("Groups", "string", 1, "Groups in the roleBinding."),
            (
                "ServiceAccounts",
                "string",
                1,
                "ServiceAccounts in the roleBinding.",
            ),
        ],
        _ => return None,
    })
}

/// The column definitions of `kind`, when it has its own.
pub(crate) fn column_definitions(group: &str, kind: &str) -> Option<Vec<Value>> {
    columns_of(group, kind).map(|cols| {
        cols.iter()
            .map(|(name, ty, priority, description)| {
                let format = if *name == "Name" { "name" } else { "" };
                json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
            })
            .collect()
    })
}

fn int(obj: &Value, pointer: &str) -> i64 {
    obj.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn joined(items: Option<&Value>, field: &str) -> String {
    items
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|c| c[field].as_str().unwrap_or_default())
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// `a=b,c=d` of a label map; `<none>` when empty.
fn label_map(v: Option<&Value>) -> String {
    let pairs: Vec<String> = v
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}

/// A label selector as kubectl prints it (`matchLabels` and simple expressions).
fn selector(v: Option<&Value>) -> String {
    let Some(v) = v.filter(|v| v.is_object()) else {
        return "<none>".into();
    };
    let mut parts: Vec<String> = v
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    for e in v
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = e["values"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        parts.push(match e["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other}"),
        });
    }
    if parts.is_empty() {
        "<none>".into()
    } else {
        parts.join(",")
    }
}

fn entries(v: Option<&Value>) -> i64 {
    v.and_then(Value::as_object).map_or(0, |m| m.len() as i64)
}

fn parse_time(v: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(v)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The cells after Name of `obj`, one per column after the first (`age`: its Age).
pub(crate) fn cells(
    group: &str,
    kind: &str,
    obj: &Value,
    age: &str,
    now: &DateTime<Utc>,
) -> Vec<Value> {
    let pod_spec = |p: &str| obj.pointer(p);
    let template = |field: &str| joined(pod_spec("/spec/template/spec/containers"), field);
    match (group, kind) {
        ("apps", "Deployment") => vec![
            json!(format!(
                "{}/{}",
                int(obj, "/status/readyReplicas"),
                int(obj, "/spec/replicas")
            )),
            json!(int(obj, "/status/updatedReplicas")),
            json!(int(obj, "/status/availableReplicas")),
            json!(age),
            json!(template("name")),
            json!(template("image")),
            json!(selector(obj.pointer("/spec/selector"))),
        ],
        ("apps", "ReplicaSet") => vec![
            json!(int(obj, "/spec/replicas")),
            json!(int(obj, "/status/replicas")),
            json!(int(obj, "/status/readyReplicas")),
            json!(age),
            json!(template("name")),
            json!(template("image")),
            json!(selector(obj.pointer("/spec/selector"))),
        ],
        ("apps", "StatefulSet") => vec![
            json!(format!(
                "{}/{}",
                int(obj, "/status/readyReplicas"),
                int(obj, "/spec/replicas")
            )),
            json!(age),
            json!(template("name")),
            json!(template("image")),
        ],
        ("apps", "DaemonSet") => vec![
            json!(int(obj, "/status/desiredNumberScheduled")),
            json!(int(obj, "/status/currentNumberScheduled")),
            json!(int(obj, "/status/numberReady")),
            json!(int(obj, "/status/updatedNumberScheduled")),
            json!(int(obj, "/status/numberAvailable")),
            json!(label_map(obj.pointer("/spec/template/spec/nodeSelector"))),
            json!(age),
            json!(template("name")),
            json!(template("image")),
            json!(selector(obj.pointer("/spec/selector"))),
        ],
        ("batch", "Job") => {
            let condition = |t: &str| {
                obj.pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .is_some_and(|cs| cs.iter().any(|c| c["type"] == t && c["status"] == "True"))
            };
            let status = if condition("Complete") {
                "Complete"
            } else if condition("Failed") {
                "Failed"
            } else if condition("FailureTarget") {
                "FailureTarget"
            } else if obj.pointer("/spec/suspend") == Some(&json!(true)) {
                "Suspended"
            } else {
                "Running"
            };
            let completions = match obj.pointer("/spec/completions").and_then(Value::as_i64) {
                Some(c) => format!("{}/{c}", int(obj, "/status/succeeded")),
                None => format!(
                    "{}/1 of {}",
                    int(obj, "/status/succeeded"),
                    int(obj, "/spec/parallelism").max(1)
                ),
            };
            let start = parse_time(text(obj, "/status/startTime"));
            let end = parse_time(text(obj, "/status/completionTime")).unwrap_or(*now);
            let duration = start.map_or(String::new(), |s| {
                super::table::human_age((end - s).num_seconds())
            });
            vec![
                json!(status),
                json!(completions),
                json!(duration),
                json!(age),
                json!(template("name")),
                json!(template("image")),
                json!(selector(obj.pointer("/spec/selector"))),
            ]
        }
        ("batch", "CronJob") => {
            let containers = |field: &str| {
                joined(
                    obj.pointer("/spec/jobTemplate/spec/template/spec/containers"),
                    field,
                )
            };
            let last = parse_time(text(obj, "/status/lastScheduleTime")).map_or_else(
                || "<none>".to_string(),
                |t| super::table::human_age((*now - t).num_seconds()),
            );
            let tz = text(obj, "/spec/timeZone");
            vec![
                json!(text(obj, "/spec/schedule")),
                json!(if tz.is_empty() { "<none>" } else { tz }),
                json!(
                    obj.pointer("/spec/suspend")
                        .and_then(Value::as_bool)
                        .unwrap_or(false)
                ),
                json!(
                    obj.pointer("/status/active")
                        .and_then(Value::as_array)
                        .map_or(0, Vec::len)
                ),
                json!(last),
                json!(age),
                json!(containers("name")),
                json!(containers("image")),
                json!(selector(obj.pointer("/spec/jobTemplate/spec/selector"))),
            ]
        }
        ("", "Service") => {
            let ty = match text(obj, "/spec/type") {
                "" => "ClusterIP",
                t => t,
            };
            let cluster_ip = match text(obj, "/spec/clusterIP") {
                "" => "<none>",
                ip => ip,
            };
            let mut external: Vec<String> = obj
                .pointer("/spec/externalIPs")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            if ty == "LoadBalancer" {
                for i in obj
                    .pointer("/status/loadBalancer/ingress")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let ip = i["ip"].as_str().or(i["hostname"].as_str());
                    external.extend(ip.map(String::from));
                }
            }
            let external = match (ty, external.is_empty()) {
                ("ExternalName", _) => text(obj, "/spec/externalName").to_string(),
                ("LoadBalancer", true) => "<pending>".into(),
                (_, true) => "<none>".into(),
                _ => external.join(","),
            };
            let ports: Vec<String> = obj
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|p| {
                    let proto = p["protocol"].as_str().unwrap_or("TCP");
                    match p["nodePort"].as_i64().filter(|n| *n > 0) {
                        Some(n) => format!("{}:{n}/{proto}", p["port"]),
                        None => format!("{}/{proto}", p["port"]),
                    }
                })
                .collect();
            vec![
                json!(ty),
                json!(cluster_ip),
                json!(external),
                json!(if ports.is_empty() {
                    "<none>".to_string()
                } else {
                    ports.join(",")
                }),
                json!(age),
                json!(label_map(obj.pointer("/spec/selector"))),
            ]
        }
        ("", "Pod") => {
            let statuses = obj
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let total = obj
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let ready = statuses.iter().filter(|s| s["ready"] == true).count();
            let restarts: i64 = statuses
                .iter()
                .map(|s| s["restartCount"].as_i64().unwrap_or(0))
                .sum();
            let waiting = statuses
                .iter()
                .find_map(|s| s.pointer("/state/waiting/reason").and_then(Value::as_str));
            let status = if obj.pointer("/metadata/deletionTimestamp").is_some() {
                "Terminating".to_string()
            } else if let Some(reason) = waiting {
                reason.to_string()
            } else {
                match (text(obj, "/status/reason"), text(obj, "/status/phase")) {
                    ("", "") => "Pending".into(),
                    ("", phase) => phase.into(),
                    (reason, _) => reason.into(),
                }
            };
            let or_none = |s: &str| {
                if s.is_empty() {
                    "<none>".to_string()
                } else {
                    s.to_string()
                }
            };
            vec![
                json!(format!("{ready}/{total}")),
                json!(status),
                json!(restarts.to_string()),
                json!(age),
                json!(or_none(text(obj, "/status/podIP"))),
                json!(or_none(text(obj, "/spec/nodeName"))),
            ]
        }
        ("", "ConfigMap") => vec![
            json!(entries(obj.get("data")) + entries(obj.get("binaryData"))),
            json!(age),
        ],
        ("", "Secret") => vec![
            json!(match text(obj, "/type") {
                "" => "Opaque",
                t => t,
            }),
            json!(entries(obj.get("data"))),
            json!(age),
        ],
        ("", "ServiceAccount") => vec![
            json!(
                obj.get("secrets")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len)
            ),
            json!(age),
        ],
        ("", "Namespace") => vec![
            json!(match text(obj, "/status/phase") {
                "" => "Active",
                p => p,
            }),
            json!(age),
        ],
        ("", "PersistentVolumeClaim") => {
            let deleting = obj.pointer("/metadata/deletionTimestamp").is_some();
            let phase = text(obj, "/status/phase");
            let bound = phase == "Bound";
            vec![
                json!(if deleting { "Terminating" } else { phase }),
                json!(text(obj, "/spec/volumeName")),
                json!(if bound {
                    text(obj, "/status/capacity/storage")
                } else {
                    ""
                }),
                json!(if bound {
                    access_modes(obj.pointer("/status/accessModes"))
                } else {
                    String::new()
                }),
                json!(or_unset(text(obj, "/spec/storageClassName"))),
                json!(or_unset(text(obj, "/spec/volumeAttributesClassName"))),
                json!(age),
                json!(or_unset(text(obj, "/spec/volumeMode"))),
            ]
        }
        ("", "PersistentVolume") => {
            let claim = match (
                text(obj, "/spec/claimRef/namespace"),
                text(obj, "/spec/claimRef/name"),
            ) {
                (_, "") => String::new(),
                (ns, name) => format!("{ns}/{name}"),
            };
            let deleting = obj.pointer("/metadata/deletionTimestamp").is_some();
            vec![
                json!(text(obj, "/spec/capacity/storage")),
                json!(access_modes(obj.pointer("/spec/accessModes"))),
                json!(text(obj, "/spec/persistentVolumeReclaimPolicy")),
                json!(if deleting {
                    "Terminating"
                } else {
                    text(obj, "/status/phase")
                }),
                json!(claim),
                json!(text(obj, "/spec/storageClassName")),
                json!(or_unset(text(obj, "/spec/volumeAttributesClassName"))),
                json!(text(obj, "/status/reason")),
                json!(age),
                json!(or_unset(text(obj, "/spec/volumeMode"))),
            ]
        }
        ("", "ResourceQuota") => {
            let (mut request, mut limit) = (Vec::new(), Vec::new());
            if let Some(hard) = obj.pointer("/status/hard").and_then(Value::as_object) {
                for (name, quantity) in hard {
                    let used = obj
                        .pointer(&format!(
                            "/status/used/{}",
                            name.replace('~', "~0").replace('/', "~1")
                        ))
                        .and_then(Value::as_str)
                        .unwrap_or("0");
                    let entry = format!("{name}: {used}/{}", quantity.as_str().unwrap_or_default());
                    if name.starts_with("limits.") {
                        limit.push(entry);
                    } else {
                        request.push(entry);
                    }
                }
            }
            vec![
                json!(age),
                json!(request.join(", ")),
                json!(limit.join(", ")),
            ]
        }
        ("coordination.k8s.io", "Lease") => {
            vec![json!(text(obj, "/spec/holderIdentity")), json!(age)]
        }
        ("policy", "PodDisruptionBudget") => {
            let or_na = |v: Option<&Value>| match v {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => "N/A".to_string(),
            };
            vec![
                json!(or_na(obj.pointer("/spec/minAvailable"))),
                json!(or_na(obj.pointer("/spec/maxUnavailable"))),
                json!(int(obj, "/status/disruptionsAllowed")),
                json!(age),
            ]
        }
        ("networking.k8s.io", "Ingress") => {
            let rules = obj.pointer("/spec/rules").and_then(Value::as_array);
            let hosts: Vec<&str> = rules
                .into_iter()
                .flatten()
                .filter_map(|r| r["host"].as_str())
                .collect();
            let addresses: Vec<&str> = obj
                .pointer("/status/loadBalancer/ingress")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|i| i["ip"].as_str().or(i["hostname"].as_str()))
                .collect();
            let tls = obj
                .pointer("/spec/tls")
                .and_then(Value::as_array)
                .is_some_and(|t| !t.is_empty());
            let class = text(obj, "/spec/ingressClassName");
            vec![
                json!(if class.is_empty() { "<none>" } else { class }),
                json!(if hosts.is_empty() {
                    "*".to_string()
                } else {
                    hosts.join(",")
                }),
                json!(addresses.join(",")),
                json!(if tls { "80, 443" } else { "80" }),
                json!(age),
            ]
        }
        ("scheduling.k8s.io", "PriorityClass") => vec![
            json!(int(obj, "/value")),
            json!(
                obj.get("globalDefault")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            ),
            json!(age),
            json!(text(obj, "/preemptionPolicy")),
        ],
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole")
        | ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            vec![json!(text(obj, "/metadata/creationTimestamp"))]
        }
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            let subjects = obj.get("subjects").and_then(Value::as_array);
            let of = |kind: &str| -> String {
                subjects
                    .into_iter()
                    .flatten()
                    .filter(|s| s["kind"] == kind)
                    .map(|s| match (kind, s["namespace"].as_str()) {
                        ("ServiceAccount", ns) => format!(
                            "{}/{}",
                            ns.unwrap_or_default(),
                            s["name"].as_str().unwrap_or_default()
                        ),
                        _ => s["name"].as_str().unwrap_or_default().to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            vec![
                json!(format!(
                    "{}/{}",
                    text(obj, "/roleRef/kind"),
                    text(obj, "/roleRef/name")
                )),
                json!(age),
                json!(of("User")),
                json!(of("Group")),
                json!(of("ServiceAccount")),
            ]
        }
        _ => vec![json!(age)],
    }
}

fn or_unset(s: &str) -> &str {
    if s.is_empty() { "<unset>" } else { s }
}

/// Access modes as kubectl abbreviates them (`RWO,ROX`).
fn access_modes(v: Option<&Value>) -> String {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|m| match m {
            "ReadWriteOnce" => "RWO",
            "ReadOnlyMany" => "ROX",
            "ReadWriteMany" => "RWX",
            "ReadWriteOncePod" => "RWOP",
            other => other,
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_cell_per_column() {
        let now = Utc::now();
        for (group, kind) in [
            ("apps", "Deployment"),
            ("apps", "ReplicaSet"),
            ("apps", "StatefulSet"),
            ("apps", "DaemonSet"),
            ("batch", "Job"),
            ("batch", "CronJob"),
            ("", "Service"),
            ("", "Pod"),
            ("", "ConfigMap"),
            ("", "Secret"),
            ("", "ServiceAccount"),
            ("", "Namespace"),
            ("", "PersistentVolumeClaim"),
            ("", "PersistentVolume"),
            ("", "ResourceQuota"),
            ("coordination.k8s.io", "Lease"),
            ("policy", "PodDisruptionBudget"),
            ("networking.k8s.io", "Ingress"),
            ("scheduling.k8s.io", "PriorityClass"),
            ("rbac.authorization.k8s.io", "Role"),
            ("rbac.authorization.k8s.io", "ClusterRole"),
            ("rbac.authorization.k8s.io", "RoleBinding"),
            ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
            ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ] {
            let columns = column_definitions(group, kind).expect("columns");
            let cells = cells(group, kind, &json!({}), "1m", &now);
            assert_eq!(cells.len() + 1, columns.len(), "{kind}");
        }
        assert!(column_definitions("", "Event").is_none());
        let binding = json!({"roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "jane"}, {"kind": "ServiceAccount", "name": "ci", "namespace": "build"}]});
        assert_eq!(
            cells(
                "rbac.authorization.k8s.io",
                "RoleBinding",
                &binding,
                "3d",
                &now
            ),
            vec![
                json!("ClusterRole/view"),
                json!("3d"),
                json!("jane"),
                json!(""),
                json!("build/ci")
            ]
        );
        let claim = json!({"spec": {"volumeName": "pv-1", "storageClassName": "standard", "volumeMode": "Filesystem"},
            "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}});
        assert_eq!(
            cells("", "PersistentVolumeClaim", &claim, "1m", &now)[..6],
            [
                json!("Bound"),
                json!("pv-1"),
                json!("1Gi"),
                json!("RWO"),
                json!("standard"),
                json!("<unset>")
            ]
        );
    }

    #[test]
    fn cells_read_like_kubectl() {
        let now = Utc::now();
        let d = json!({"spec": {"replicas": 3, "selector": {"matchLabels": {"app": "d"}},
            "template": {"spec": {"containers": [{"name": "a", "image": "nginx"}, {"name": "b", "image": "busybox"}]}}},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
        assert_eq!(
            cells("apps", "Deployment", &d, "5m", &now),
            vec![
                json!("2/3"),
                json!(3),
                json!(2),
                json!("5m"),
                json!("a,b"),
                json!("nginx,busybox"),
                json!("app=d")
            ]
        );
        let svc = json!({"spec": {"type": "NodePort", "clusterIP": "10.0.0.1",
            "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
            "selector": {"app": "d"}}});
        assert_eq!(
            cells("", "Service", &svc, "1h", &now),
            vec![
                json!("NodePort"),
                json!("10.0.0.1"),
                json!("<none>"),
                json!("80:30080/TCP,53/UDP"),
                json!("1h"),
                json!("app=d")
            ]
        );
        let job = json!({"spec": {"completions": 2}, "status": {"succeeded": 2,
            "conditions": [{"type": "Complete", "status": "True"}]}});
        assert_eq!(
            cells("batch", "Job", &job, "2m", &now)[..2],
            [json!("Complete"), json!("2/2")]
        );
    }
}
