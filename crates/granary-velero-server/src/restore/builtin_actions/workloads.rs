//! What the built-in actions change in Services, Jobs and Pods before they are created
//! again (Velero's `service_action.go`, `job_action.go`, `pod_action.go`): the values the
//! old cluster assigned and the new one must assign afresh. Pure functions on the item
//! as JSON; fields of an unexpected type are left alone, never a panic.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::super::actions::ResourceIdentifier;

/// The annotation `kubectl apply` writes; a nodePort it names was chosen by the user.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The labels the Job controller adds with the Job's UID (`batch.kubernetes.io/…`
/// since Kubernetes 1.27, the bare one before).
pub const JOB_CONTROLLER_UID_LABELS: [&str; 2] =
    ["batch.kubernetes.io/controller-uid", "controller-uid"];

fn spec_mut(item: &mut Value) -> Option<&mut Map<String, Value>> {
    item.get_mut("spec")?.as_object_mut()
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// A Service as it is to be created: its cluster IPs cleared unless it is headless
/// (`clusterIP: None`); unless `preserve_node_ports`, the node ports and the health
/// check node port the cluster assigned are dropped, keeping those the user chose (named
/// in the last-applied-configuration annotation, else owned in `managed_fields`, the
/// backup's `metadata.managedFields`). `Err` when the annotation is not valid JSON or
/// names a nodePort that is not a number (Velero fails the item then, too).
pub fn service_for_restore(
    svc: &Value,
    preserve_node_ports: bool,
    managed_fields: Option<&Value>,
) -> Result<Value, String> {
    let mut out = svc.clone();
    let annotation = svc
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .filter(|_| !preserve_node_ports);
    let last_applied = match annotation {
        Some(text) => Some(
            serde_json::from_str::<Value>(text)
                .map_err(|e| format!("annotation {LAST_APPLIED} is not valid JSON: {e}"))?,
        ),
        None => None,
    };
    let Some(spec) = spec_mut(&mut out) else {
        return Ok(out);
    };
    if spec.get("clusterIP").and_then(Value::as_str) != Some("None") {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
    if preserve_node_ports {
        return Ok(out);
    }
    let managed: Vec<&Value> = managed_fields
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.get("fieldsV1"))
        .collect();
    drop_node_ports(spec, last_applied.as_ref(), &managed)?;
    drop_health_check_node_port(spec, last_applied.as_ref(), &managed);
    Ok(out)
}

fn drop_node_ports(
    spec: &mut Map<String, Value>,
    last_applied: Option<&Value>,
    managed: &[&Value],
) -> Result<(), String> {
    if spec.get("type").and_then(Value::as_str) == Some("ExternalName") {
        return Ok(());
    }
    let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    if let Some(applied) = last_applied {
        let mut named = BTreeSet::new();
        let mut unnamed = BTreeSet::new();
        for p in applied
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let node_port = match p.get("nodePort") {
                None => continue,
                Some(Value::Number(n)) => n.as_f64().map_or(0, |f| f as i64),
                Some(Value::String(s)) => s.trim().parse::<i64>().map_err(|_| {
                    format!("annotation {LAST_APPLIED}: nodePort {s:?} is not a number")
                })?,
                Some(_) => 0,
            };
            if node_port > 0 {
                match p.get("name") {
                    None => {
                        unnamed.insert(node_port);
                    }
                    Some(name) => {
                        named.insert(name.as_str().unwrap_or_default().to_owned());
                    }
                }
            }
        }
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            let name = port.get("name").and_then(Value::as_str).unwrap_or("");
            let keep = if name.is_empty() {
                port.get("nodePort")
                    .and_then(Value::as_i64)
                    .is_some_and(|n| unnamed.contains(&n))
            } else {
                named.contains(name)
            };
            if !keep {
                port.remove("nodePort");
            }
        }
        return Ok(());
    }
    // Ports are keyed in managed fields by port and protocol: `k:{"port":80,"protocol":"TCP"}`.
    let owned: BTreeSet<&str> = managed
        .iter()
        .filter_map(|f| f.pointer("/f:spec/f:ports").and_then(Value::as_object))
        .flat_map(|ports| ports.iter())
        .filter(|(_, v)| v.get("f:nodePort").is_some())
        .map(|(k, _)| k.as_str())
        .collect();
    for port in ports.iter_mut().filter_map(Value::as_object_mut) {
        let key = format!(
            "k:{{\"port\":{},\"protocol\":\"{}\"}}",
            port.get("port").and_then(Value::as_i64).unwrap_or(0),
            port.get("protocol").and_then(Value::as_str).unwrap_or("")
        );
        if !owned.contains(key.as_str()) {
            port.remove("nodePort");
        }
    }
    Ok(())
}

fn drop_health_check_node_port(
    spec: &mut Map<String, Value>,
    last_applied: Option<&Value>,
    managed: &[&Value],
) {
    let local_lb = spec.get("externalTrafficPolicy").and_then(Value::as_str) == Some("Local")
        && spec.get("type").and_then(Value::as_str) == Some("LoadBalancer");
    let set = spec
        .get("healthCheckNodePort")
        .and_then(Value::as_i64)
        .is_some_and(|n| n != 0);
    if !local_lb || !set {
        return;
    }
    let chosen_in_annotation = last_applied
        .and_then(|a| a.pointer("/spec/healthCheckNodePort"))
        .and_then(Value::as_i64)
        .is_some_and(|n| n != 0);
    let owned = managed
        .iter()
        .any(|f| f.pointer("/f:spec/f:healthCheckNodePort").is_some());
    if !chosen_in_annotation && !owned {
        spec.remove("healthCheckNodePort");
    }
}

/// Removes `keys` from the object at `pointer`, if it is one.
fn remove_keys(item: &mut Value, pointer: &str, keys: &[&str]) {
    if let Some(map) = item.pointer_mut(pointer).and_then(Value::as_object_mut) {
        for k in keys {
            map.remove(*k);
        }
    }
}

/// A Job without the controller-uid labels of its old UID in its selector and pod
/// template (the new Job gets new ones; the old ones would select nothing).
pub fn job_for_restore(job: &Value) -> Value {
    let mut out = job.clone();
    remove_keys(
        &mut out,
        "/spec/selector/matchLabels",
        &JOB_CONTROLLER_UID_LABELS,
    );
    remove_keys(
        &mut out,
        "/spec/template/metadata/labels",
        &JOB_CONTROLLER_UID_LABELS,
    );
    out
}

/// Keeps the entries of the array at `key` of `obj` whose `name` does not start with
/// `prefix`; the key goes when nothing is left (Go drops an empty slice).
fn drop_named(obj: &mut Map<String, Value>, key: &str, prefix: &str) {
    let Some(list) = obj.get_mut(key).and_then(Value::as_array_mut) else {
        return;
    };
    list.retain(|v| !str_at(v, "/name").starts_with(prefix));
    if list.is_empty() {
        obj.remove(key);
    }
}

/// A Pod as it is to be created: not bound to the old node (`nodeName`), without the
/// resolved `priority` (the admission plugin sets it from the class again), and without
/// the volumes and mounts of its service account's legacy token secret
/// (`<serviceAccountName>-token-…`), which the new cluster mounts afresh.
pub fn pod_for_restore(pod: &Value) -> Value {
    let mut out = pod.clone();
    let prefix = format!("{}-token-", str_at(pod, "/spec/serviceAccountName"));
    let Some(spec) = spec_mut(&mut out) else {
        return out;
    };
    spec.remove("nodeName");
    spec.remove("priority");
    drop_named(spec, "volumes", &prefix);
    for key in ["containers", "initContainers"] {
        for c in spec
            .get_mut(key)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            drop_named(c, "volumeMounts", &prefix);
        }
    }
    out
}

/// The PriorityClass a Pod names, restored before it (Velero's pod action adds it).
pub fn pod_priority_class(pod: &Value) -> Option<ResourceIdentifier> {
    let name = str_at(pod, "/spec/priorityClassName");
    (!name.is_empty())
        .then(|| ResourceIdentifier::new("scheduling.k8s.io", "priorityclasses", "", name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "ns"}, "spec": spec})
    }

    fn with_last_applied(mut s: Value, applied: Value) -> Value {
        s["metadata"]["annotations"] = json!({ LAST_APPLIED: applied.to_string() });
        s
    }

    #[test]
    fn cluster_ips_are_cleared_except_headless() {
        let out = service_for_restore(
            &svc(json!({"clusterIP": "10.0.0.7", "clusterIPs": ["10.0.0.7"], "ports": [{"port": 80}]})),
            false,
            None,
        )
        .unwrap();
        assert_eq!(out["spec"], json!({"ports": [{"port": 80}]}));
        let headless = svc(json!({"clusterIP": "None", "clusterIPs": ["None"]}));
        assert_eq!(
            service_for_restore(&headless, false, None).unwrap(),
            headless
        );
        // Only clusterIPs set: cleared too (Go reads the absent clusterIP as "").
        let out = service_for_restore(&svc(json!({"clusterIPs": ["fd00::1"]})), false, None);
        assert_eq!(out.unwrap()["spec"], json!({}));
    }

    #[test]
    fn assigned_node_ports_go_unless_preserved() {
        let s = svc(json!({"type": "NodePort", "ports": [
            {"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30080},
            {"name": "https", "port": 443, "protocol": "TCP", "nodePort": 30443},
        ]}));
        let out = service_for_restore(&s, false, None).unwrap();
        assert_eq!(
            out["spec"]["ports"],
            json!([{"name": "http", "port": 80, "protocol": "TCP"},
                   {"name": "https", "port": 443, "protocol": "TCP"}])
        );
        let kept = service_for_restore(&s, true, None).unwrap();
        assert_eq!(kept["spec"]["ports"], s["spec"]["ports"]);
        // ExternalName services keep whatever they have.
        let ext = svc(json!({"type": "ExternalName", "ports": [{"port": 1, "nodePort": 30001}]}));
        assert_eq!(
            service_for_restore(&ext, false, None).unwrap()["spec"]["ports"][0]["nodePort"],
            30001
        );
    }

    #[test]
    fn node_ports_named_in_last_applied_stay() {
        let s = with_last_applied(
            svc(json!({"type": "NodePort", "ports": [
                {"name": "http", "port": 80, "nodePort": 30080},
                {"name": "metrics", "port": 9090, "nodePort": 31000},
                {"port": 81, "nodePort": 30081},
                {"port": 82, "nodePort": 30082},
            ]})),
            json!({"spec": {"ports": [
                {"name": "http", "port": 80, "nodePort": 30080},
                {"name": "metrics", "port": 9090},
                {"port": 81, "nodePort": "30081"},
            ]}}),
        );
        let out = service_for_restore(&s, false, None).unwrap();
        let ports: Vec<Option<i64>> = out["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["nodePort"].as_i64())
            .collect();
        assert_eq!(ports, vec![Some(30080), None, Some(30081), None]);
    }

    #[test]
    fn bad_last_applied_fails_the_item() {
        let mut s = svc(json!({"ports": [{"port": 80, "nodePort": 30080}]}));
        s["metadata"]["annotations"] = json!({ LAST_APPLIED: "{not json" });
        assert!(service_for_restore(&s, false, None).is_err());
        let s = with_last_applied(
            svc(json!({"ports": [{"port": 80, "nodePort": 30080}]})),
            json!({"spec": {"ports": [{"port": 80, "nodePort": "high"}]}}),
        );
        let err = service_for_restore(&s, false, None).unwrap_err();
        assert!(err.contains("high"), "{err}");
        // With preserveNodePorts the annotation is not read at all.
        assert!(service_for_restore(&s, true, None).is_ok());
        let mut broken = svc(json!({"ports": [{"port": 80, "nodePort": 30080}]}));
        broken["metadata"]["annotations"] = json!({ LAST_APPLIED: "{not json" });
        assert!(service_for_restore(&broken, true, None).is_ok());
    }

    #[test]
    fn node_ports_owned_in_managed_fields_stay() {
        let s = svc(json!({"type": "NodePort", "ports": [
            {"port": 80, "protocol": "TCP", "nodePort": 30080},
            {"port": 53, "protocol": "UDP", "nodePort": 30053},
        ]}));
        let managed = json!([
            {"manager": "kubectl", "fieldsV1": {"f:spec": {"f:ports": {
                "k:{\"port\":80,\"protocol\":\"TCP\"}": {"f:nodePort": {}, "f:port": {}},
                "k:{\"port\":53,\"protocol\":\"UDP\"}": {"f:port": {}},
            }}}},
            {"manager": "no-fields"},
            {"manager": "odd", "fieldsV1": "not an object"},
        ]);
        let out = service_for_restore(&s, false, Some(&managed)).unwrap();
        assert_eq!(out["spec"]["ports"][0]["nodePort"], 30080);
        assert!(out["spec"]["ports"][1].get("nodePort").is_none());
    }

    #[test]
    fn health_check_node_port_only_for_local_load_balancers() {
        let lb = |extra: Value| {
            let mut spec = json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local", "healthCheckNodePort": 32000});
            spec.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            svc(spec)
        };
        let out = service_for_restore(&lb(json!({})), false, None).unwrap();
        assert!(out["spec"].get("healthCheckNodePort").is_none());
        let cluster_policy = lb(json!({"externalTrafficPolicy": "Cluster"}));
        let out = service_for_restore(&cluster_policy, false, None).unwrap();
        assert_eq!(out["spec"]["healthCheckNodePort"], 32000);
        let chosen = with_last_applied(
            lb(json!({})),
            json!({"spec": {"healthCheckNodePort": 32000}}),
        );
        let out = service_for_restore(&chosen, false, None).unwrap();
        assert_eq!(out["spec"]["healthCheckNodePort"], 32000);
        let managed = json!([{"fieldsV1": {"f:spec": {"f:healthCheckNodePort": {}}}}]);
        let out = service_for_restore(&lb(json!({})), false, Some(&managed)).unwrap();
        assert_eq!(out["spec"]["healthCheckNodePort"], 32000);
        let out = service_for_restore(&lb(json!({})), true, None).unwrap();
        assert_eq!(out["spec"]["healthCheckNodePort"], 32000);
    }

    #[test]
    fn services_of_odd_shapes_do_not_panic() {
        for s in [
            json!({}),
            json!({"spec": "x"}),
            json!({"spec": {"ports": "x"}}),
            json!({"spec": {"ports": [1, null, {"nodePort": "x", "name": 3}]}}),
            json!({"metadata": {"annotations": {LAST_APPLIED: 5}}, "spec": {"ports": [{"nodePort": 1}]}}),
            with_last_applied(
                svc(json!({"ports": [{"nodePort": 1}]})),
                json!({"spec": {"ports": [{"nodePort": [1], "name": 7}, "x"]}}),
            ),
        ] {
            let _ = service_for_restore(&s, false, Some(&json!("odd")));
        }
    }

    #[test]
    fn jobs_lose_their_controller_uid_labels() {
        let job = json!({"spec": {
            "selector": {"matchLabels": {"controller-uid": "u1", "batch.kubernetes.io/controller-uid": "u1", "app": "x"}},
            "template": {"metadata": {"labels": {"controller-uid": "u1", "batch.kubernetes.io/controller-uid": "u1", "job-name": "j"}}},
        }});
        let out = job_for_restore(&job);
        assert_eq!(out["spec"]["selector"]["matchLabels"], json!({"app": "x"}));
        assert_eq!(
            out["spec"]["template"]["metadata"]["labels"],
            json!({"job-name": "j"})
        );
        for odd in [
            json!({}),
            json!({"spec": {"selector": null}}),
            json!({"spec": {"template": {"metadata": {"labels": ["x"]}}}}),
        ] {
            assert_eq!(job_for_restore(&odd), odd);
        }
    }

    #[test]
    fn pods_lose_node_priority_and_legacy_token_mounts() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {
            "nodeName": "node-1", "priority": 1000, "priorityClassName": "high",
            "serviceAccountName": "app",
            "volumes": [{"name": "app-token-abcde", "secret": {}}, {"name": "data", "emptyDir": {}}],
            "containers": [
                {"name": "c", "volumeMounts": [{"name": "app-token-abcde", "mountPath": "/var/run"}, {"name": "data", "mountPath": "/d"}]},
                {"name": "only-token", "volumeMounts": [{"name": "app-token-abcde", "mountPath": "/var/run"}]},
            ],
            "initContainers": [{"name": "i", "volumeMounts": [{"name": "app-token-abcde"}]}],
        }});
        let out = pod_for_restore(&pod);
        assert_eq!(
            out["spec"],
            json!({
                "priorityClassName": "high", "serviceAccountName": "app",
                "volumes": [{"name": "data", "emptyDir": {}}],
                "containers": [
                    {"name": "c", "volumeMounts": [{"name": "data", "mountPath": "/d"}]},
                    {"name": "only-token"},
                ],
                "initContainers": [{"name": "i"}],
            })
        );
        assert_eq!(
            pod_priority_class(&pod),
            Some(ResourceIdentifier::new(
                "scheduling.k8s.io",
                "priorityclasses",
                "",
                "high"
            ))
        );
    }

    #[test]
    fn pods_without_service_account_use_velero_s_prefix() {
        // Go builds the prefix from an empty name: "-token-".
        let pod = json!({"spec": {"volumes": [{"name": "-token-x"}, {"name": "default-token-x"}]}});
        assert_eq!(
            pod_for_restore(&pod)["spec"]["volumes"],
            json!([{"name": "default-token-x"}])
        );
        assert_eq!(pod_priority_class(&pod), None);
        for odd in [
            json!({}),
            json!({"spec": []}),
            json!({"spec": {"containers": "x", "volumes": [1, "a"]}}),
            json!({"spec": {"containers": [1, {"volumeMounts": 2}]}}),
        ] {
            let _ = pod_for_restore(&odd);
            let _ = pod_priority_class(&odd);
        }
    }
}
