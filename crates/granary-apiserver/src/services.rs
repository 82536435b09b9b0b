//! Service cluster IPs and node ports, allocated as kube-apiserver's Service storage
//! allocates them: a Service that needs an address gets a free one from the service
//! range (or keeps the one it asked for, when it is free and in range); a NodePort or
//! LoadBalancer Service gets a free node port per port; an update that leaves them out
//! keeps the ones it had (`patchAllocatedValues`). The range is kubeadm's and kind's
//! default, 10.96.0.0/12; node ports are 30000-32767.
//!
//! What is in use is read from the stored Services by the state, under one lock held
//! from that read to the write (allocation is pure here).

use std::collections::HashSet;
use std::net::Ipv4Addr;

use serde_json::{Map, Value, json};

use super::errors::FieldCause;

/// The first address of the service range, and its size (a /12).
const RANGE_START: u32 = u32::from_be_bytes([10, 96, 0, 0]);
const RANGE_SIZE: u32 = 1 << 20;
const RANGE: &str = "10.96.0.0/12";
const NODE_PORTS: std::ops::RangeInclusive<u32> = 30000..=32767;

/// The addresses and node ports other Services hold.
#[derive(Default)]
pub(crate) struct InUse {
    pub ips: HashSet<Ipv4Addr>,
    pub node_ports: HashSet<u32>,
}

impl InUse {
    /// Collects what `services` (stored Service objects) hold.
    pub(crate) fn of<'a>(services: impl Iterator<Item = &'a Value>) -> InUse {
        let mut out = InUse::default();
        for s in services {
            let spec = &s["spec"];
            for ip in spec["clusterIPs"].as_array().into_iter().flatten() {
                if let Some(ip) = ip.as_str().and_then(|s| s.parse().ok()) {
                    out.ips.insert(ip);
                }
            }
            for p in spec["ports"].as_array().into_iter().flatten() {
                if let Some(n) = node_port(p) {
                    out.node_ports.insert(n as u32);
                }
            }
            if let Some(n) = spec["healthCheckNodePort"].as_u64() {
                out.node_ports.insert(n as u32);
            }
        }
        out
    }
}

/// A port's node port; 0 is none (Go's zero value: a protobuf client sends it).
fn node_port(port: &Value) -> Option<u64> {
    port["nodePort"].as_u64().filter(|n| *n != 0)
}

fn str_of<'a>(spec: &'a Map<String, Value>, key: &str) -> &'a str {
    spec.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn needs_cluster_ip(spec: &Map<String, Value>) -> bool {
    str_of(spec, "type") != "ExternalName"
}

fn needs_node_ports(spec: &Map<String, Value>) -> bool {
    match str_of(spec, "type") {
        "NodePort" => true,
        "LoadBalancer" => spec.get("allocateLoadBalancerNodePorts") != Some(&json!(false)),
        _ => false,
    }
}

/// A pseudo-random start, so that addresses spread as kube-apiserver's do.
fn random_u32() -> u32 {
    let b = uuid::Uuid::new_v4().into_bytes();
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Fills in a Service's `clusterIP(s)`, IP families and node ports; `old` is the stored
/// Service on an update. Errors are kube-apiserver's field causes.
pub(crate) fn allocate(
    svc: &mut Value,
    old: Option<&Value>,
    in_use: &InUse,
) -> Result<(), Vec<FieldCause>> {
    let old_spec = old.and_then(|o| o.get("spec")).and_then(Value::as_object);
    let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    if let Some(old_spec) = old_spec {
        keep_allocated(spec, old_spec);
    }
    let mut causes = Vec::new();
    if needs_cluster_ip(spec) {
        cluster_ip(spec, old_spec, in_use, &mut causes);
    }
    if needs_node_ports(spec) {
        node_ports(spec, old_spec, in_use, &mut causes);
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(causes)
    }
}

/// `patchAllocatedValues`: an update that leaves out what was allocated keeps it.
fn keep_allocated(spec: &mut Map<String, Value>, old: &Map<String, Value>) {
    if needs_cluster_ip(old) && needs_cluster_ip(spec) {
        for key in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            let missing = match spec.get(key) {
                None | Some(Value::Null) => true,
                Some(Value::String(s)) => s.is_empty(),
                Some(Value::Array(a)) => a.is_empty(),
                _ => false,
            };
            if missing && let Some(v) = old.get(key) {
                spec.insert(key.into(), v.clone());
            }
        }
    }
    if needs_node_ports(old) && needs_node_ports(spec) {
        let ports = |s: &Map<String, Value>| -> Vec<(String, Option<u64>)> {
            s.get("ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|p| {
                    (
                        p["name"].as_str().unwrap_or_default().to_string(),
                        node_port(p),
                    )
                })
                .collect()
        };
        let old_ports = ports(old);
        let used: HashSet<u64> = ports(spec).into_iter().filter_map(|(_, n)| n).collect();
        if let Some(new_ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
            for p in new_ports.iter_mut().filter_map(Value::as_object_mut) {
                if node_port(&Value::Object(p.clone())).is_some() {
                    continue;
                }
                let name = p.get("name").and_then(Value::as_str).unwrap_or_default();
                if let Some((_, Some(n))) = old_ports.iter().find(|(o, _)| o == name)
                    && !used.contains(n)
                {
                    p.insert("nodePort".into(), json!(n));
                }
            }
        }
    }
}

fn cluster_ip(
    spec: &mut Map<String, Value>,
    old: Option<&Map<String, Value>>,
    in_use: &InUse,
    causes: &mut Vec<FieldCause>,
) {
    let mut ip = str_of(spec, "clusterIP").to_string();
    if ip.is_empty()
        && let Some(first) = spec
            .get("clusterIPs")
            .and_then(|v| v.get(0))
            .and_then(Value::as_str)
    {
        ip = first.to_string();
    }
    let kept = old.map(|o| str_of(o, "clusterIP")).unwrap_or_default();
    if !kept.is_empty() && ip != kept {
        // A changed address: validation refuses it (it may not change once set).
        return;
    }
    if ip.is_empty() {
        let start = random_u32() % RANGE_SIZE;
        let free = (0..RANGE_SIZE)
            .map(|i| RANGE_START + (start + i) % RANGE_SIZE)
            // The network address, the first (the `kubernetes` Service's) and the
            // broadcast address are never handed out.
            .filter(|a| *a > RANGE_START + 1 && *a < RANGE_START + RANGE_SIZE - 1)
            .map(Ipv4Addr::from)
            .find(|a| !in_use.ips.contains(a));
        let Some(free) = free else {
            causes.push(FieldCause::invalid(
                "spec.clusterIPs",
                &json!([]),
                "failed to allocate IP: range is full",
            ));
            return;
        };
        ip = free.to_string();
    } else if ip != "None" && ip != kept {
        let Ok(addr) = ip.parse::<Ipv4Addr>() else {
            causes.push(FieldCause::invalid(
                "spec.clusterIPs[0]",
                &json!(ip),
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ));
            return;
        };
        let n = u32::from(addr);
        let message = if !(RANGE_START..RANGE_START + RANGE_SIZE).contains(&n) {
            Some(format!(
                "failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. The range of valid IPs is {RANGE}"
            ))
        } else if in_use.ips.contains(&addr) {
            Some(format!(
                "failed to allocate IP {ip}: provided IP is already allocated"
            ))
        } else {
            None
        };
        if let Some(message) = message {
            causes.push(FieldCause::invalid(
                "spec.clusterIPs",
                &json!([ip]),
                &message,
            ));
            return;
        }
    }
    spec.insert("clusterIP".into(), json!(ip));
    spec.insert("clusterIPs".into(), json!([ip]));
    spec.entry("ipFamilyPolicy").or_insert(json!("SingleStack"));
    spec.entry("ipFamilies").or_insert(json!(["IPv4"]));
}

fn node_ports(
    spec: &mut Map<String, Value>,
    old: Option<&Map<String, Value>>,
    in_use: &InUse,
    causes: &mut Vec<FieldCause>,
) {
    let kept: HashSet<u64> = old
        .and_then(|o| o.get("ports"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(node_port)
        .collect();
    let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) else {
        return;
    };
    let mut taken: HashSet<u32> = HashSet::new();
    for (i, p) in ports.iter_mut().enumerate() {
        let given = node_port(p);
        let Some(p) = p.as_object_mut() else { continue };
        match given {
            Some(n) if kept.contains(&n) => {
                taken.insert(n as u32);
            }
            Some(n) => {
                let field = format!("spec.ports[{i}].nodePort");
                let message = if !NODE_PORTS.contains(&(n as u32)) {
                    Some(format!(
                        "provided port is not in the valid range. The range of valid ports is {}-{}",
                        NODE_PORTS.start(),
                        NODE_PORTS.end()
                    ))
                } else if in_use.node_ports.contains(&(n as u32)) || taken.contains(&(n as u32)) {
                    Some("provided port is already allocated".to_string())
                } else {
                    None
                };
                match message {
                    Some(m) => causes.push(FieldCause::invalid(&field, &json!(n), &m)),
                    None => {
                        taken.insert(n as u32);
                    }
                }
            }
            None => {
                let size = NODE_PORTS.end() - NODE_PORTS.start() + 1;
                let start = random_u32() % size;
                let free = (0..size)
                    .map(|k| NODE_PORTS.start() + (start + k) % size)
                    .find(|n| !in_use.node_ports.contains(n) && !taken.contains(n));
                match free {
                    Some(n) => {
                        taken.insert(n);
                        p.insert("nodePort".into(), json!(n));
                    }
                    None => causes.push(FieldCause::invalid(
                        format!("spec.ports[{i}].nodePort"),
                        &json!(0),
                        "failed to allocate a nodePort: range is full",
                    )),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(spec: Value) -> Value {
        json!({"metadata": {"name": "s"}, "spec": spec})
    }

    #[test]
    fn addresses_and_node_ports_are_allocated_once_and_kept() {
        let mut s = svc(
            json!({"type": "NodePort", "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81, "nodePort": 30081}]}),
        );
        allocate(&mut s, None, &InUse::default()).unwrap();
        let ip: Ipv4Addr = s["spec"]["clusterIP"].as_str().unwrap().parse().unwrap();
        assert_eq!(ip.octets()[0], 10);
        assert!((96..112).contains(&ip.octets()[1]));
        assert_eq!(s["spec"]["clusterIPs"], json!([ip.to_string()]));
        assert_eq!(s["spec"]["ipFamilies"], json!(["IPv4"]));
        let a = s["spec"]["ports"][0]["nodePort"].as_u64().unwrap();
        assert!((30000..=32767).contains(&a));
        assert_eq!(s["spec"]["ports"][1]["nodePort"], 30081);
        // An update that leaves both out keeps them.
        let mut update = svc(
            json!({"type": "NodePort", "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]}),
        );
        allocate(&mut update, Some(&s), &InUse::default()).unwrap();
        assert_eq!(update["spec"]["clusterIP"], s["spec"]["clusterIP"]);
        assert_eq!(update["spec"]["ports"], s["spec"]["ports"]);
        // Another Service cannot take them.
        let in_use = InUse::of([&s].into_iter());
        let mut other = svc(
            json!({"type": "NodePort", "clusterIP": ip.to_string(), "ports": [{"port": 80, "nodePort": 30081}]}),
        );
        let causes = allocate(&mut other, None, &in_use).unwrap_err();
        assert_eq!(causes[0].field, "spec.clusterIPs");
        assert!(
            causes[0]
                .message
                .contains("provided IP is already allocated"),
            "{}",
            causes[0].message
        );
        assert_eq!(causes[1].field, "spec.ports[0].nodePort");
        assert!(
            causes[1]
                .message
                .contains("provided port is already allocated")
        );
    }

    #[test]
    fn headless_external_and_out_of_range() {
        let mut s = svc(json!({"type": "ClusterIP", "clusterIP": "None"}));
        allocate(&mut s, None, &InUse::default()).unwrap();
        assert_eq!(s["spec"]["clusterIPs"], json!(["None"]));
        let mut s = svc(json!({"type": "ExternalName", "externalName": "x.example.com"}));
        allocate(&mut s, None, &InUse::default()).unwrap();
        assert_eq!(s["spec"].get("clusterIP"), None);
        let mut s = svc(json!({"type": "ClusterIP", "clusterIP": "10.0.0.9"}));
        let causes = allocate(&mut s, None, &InUse::default()).unwrap_err();
        assert_eq!(
            causes[0].message,
            "Invalid value: []string{\"10.0.0.9\"}: failed to allocate IP 10.0.0.9: the provided IP (10.0.0.9) is not in the valid range. The range of valid IPs is 10.96.0.0/12"
        );
        let mut s = svc(json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 80}]}));
        let causes = allocate(&mut s, None, &InUse::default()).unwrap_err();
        assert!(
            causes[0]
                .message
                .contains("The range of valid ports is 30000-32767")
        );
    }
}
