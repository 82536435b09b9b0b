//! Bodies encoded from k8s-rs-pb's typed messages (generated code, independent of the
//! decoder), as kubectl's Go client would write them, decoded and compared with the
//! JSON the same object has in the API; and the compiled descriptors checked against
//! the `.proto` files.

use std::collections::BTreeMap;

use k8s_rs_pb::api::{apps, batch, core, networking, policy, rbac};
use k8s_rs_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_rs_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_rs_pb::apimachinery::pkg::util::intstr::IntOrString;
use protobuf::{Message, MessageField};
use serde_json::{Value, json};

use super::decode;

fn ok(body: &[u8]) -> Value {
    decode(body).unwrap_or_else(|e| panic!("decodes: {}", e.message))
}

/// `m` in the `k8s\0` + `runtime.Unknown` envelope.
fn wrap(api_version: &str, kind: &str, m: &impl Message) -> Vec<u8> {
    let mut unknown = k8s_rs_pb::apimachinery::pkg::runtime::Unknown::new();
    let type_meta = unknown.typeMeta.mut_or_insert_default();
    type_meta.apiVersion = Some(api_version.into());
    type_meta.kind = Some(kind.into());
    unknown.raw = Some(m.write_to_bytes().expect("encodes"));
    let mut out = b"k8s\0".to_vec();
    out.extend(unknown.write_to_bytes().expect("encodes"));
    out
}

fn object_meta(name: &str, namespace: &str) -> MessageField<meta::ObjectMeta> {
    let mut m = meta::ObjectMeta::new();
    m.name = Some(name.into());
    if !namespace.is_empty() {
        m.namespace = Some(namespace.into());
    }
    // What Go writes for fields that are not pointers: empty, zero.
    m.generateName = Some(String::new());
    m.generation = Some(0);
    m.creationTimestamp = MessageField::some(meta::Time::new());
    MessageField::some(m)
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn int_or_string_int(n: i32) -> MessageField<IntOrString> {
    let mut v = IntOrString::new();
    v.type_ = Some(0);
    v.intVal = Some(n);
    MessageField::some(v)
}

fn int_or_string_str(s: &str) -> MessageField<IntOrString> {
    let mut v = IntOrString::new();
    v.type_ = Some(1);
    v.strVal = Some(s.into());
    MessageField::some(v)
}

fn quantity(s: &str) -> Quantity {
    let mut q = Quantity::new();
    q.string = Some(s.into());
    q
}

fn selector(app: &str) -> MessageField<meta::LabelSelector> {
    let mut s = meta::LabelSelector::new();
    s.matchLabels = labels(&[("app", app)]);
    MessageField::some(s)
}

fn pod_template(
    app: &str,
    container: core::v1::Container,
) -> MessageField<core::v1::PodTemplateSpec> {
    let mut t = core::v1::PodTemplateSpec::new();
    let mut m = meta::ObjectMeta::new();
    m.labels = labels(&[("app", app)]);
    t.metadata = MessageField::some(m);
    let spec = t.spec.mut_or_insert_default();
    spec.containers.push(container);
    spec.restartPolicy = Some("OnFailure".into());
    MessageField::some(t)
}

fn container(name: &str, image: &str) -> core::v1::Container {
    let mut c = core::v1::Container::new();
    c.name = Some(name.into());
    c.image = Some(image.into());
    c.resources = MessageField::some(core::v1::ResourceRequirements::new());
    c
}

#[test]
fn deployments_keep_int_or_string_quantities_and_pointer_zeros() {
    let mut nginx = container("nginx", "nginx");
    let resources = nginx.resources.mut_or_insert_default();
    resources.limits.insert("memory".into(), quantity("512Mi"));
    resources.requests.insert("cpu".into(), quantity("100m"));
    let mut d = apps::v1::Deployment::new();
    d.metadata = object_meta("d1", "pbtest");
    let spec = d.spec.mut_or_insert_default();
    spec.replicas = Some(0);
    spec.selector = selector("d1");
    spec.template = pod_template("d1", nginx);
    let strategy = spec.strategy.mut_or_insert_default();
    strategy.type_ = Some("RollingUpdate".into());
    let rolling = strategy.rollingUpdate.mut_or_insert_default();
    rolling.maxSurge = int_or_string_str("25%");
    rolling.maxUnavailable = int_or_string_int(0);
    d.status = MessageField::some(apps::v1::DeploymentStatus::new());
    assert_eq!(
        ok(&wrap("apps/v1", "Deployment", &d)),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d1", "namespace": "pbtest"},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "d1"}},
                "template": {
                    "metadata": {"labels": {"app": "d1"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx",
                        "resources": {"limits": {"memory": "512Mi"}, "requests": {"cpu": "100m"}}}],
                        "restartPolicy": "OnFailure"}},
                "strategy": {"type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "25%"}}},
            "status": {}})
    );
}

#[test]
fn jobs_and_cronjobs() {
    let mut job = batch::v1::Job::new();
    job.metadata = object_meta("j1", "pbtest");
    let spec = job.spec.mut_or_insert_default();
    spec.backoffLimit = Some(0);
    spec.suspend = Some(false);
    let mut c = container("j1", "busybox");
    c.command = vec!["sh".into(), "-c".into(), "".into()];
    spec.template = pod_template("j1", c);
    assert_eq!(
        ok(&wrap("batch/v1", "Job", &job)),
        json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j1", "namespace": "pbtest"},
            "spec": {"backoffLimit": 0, "suspend": false,
                "template": {"metadata": {"labels": {"app": "j1"}},
                    "spec": {"containers": [{"name": "j1", "image": "busybox",
                        "command": ["sh", "-c", ""], "resources": {}}],
                        "restartPolicy": "OnFailure"}}}})
    );
    let mut cj = batch::v1::CronJob::new();
    cj.metadata = object_meta("cj1", "pbtest");
    let spec = cj.spec.mut_or_insert_default();
    spec.schedule = Some("*/5 * * * *".into());
    let template = spec.jobTemplate.mut_or_insert_default();
    let mut m = meta::ObjectMeta::new();
    m.name = Some("cj1".into());
    template.metadata = MessageField::some(m);
    template.spec.mut_or_insert_default().template =
        pod_template("cj1", container("cj1", "busybox"));
    let v = ok(&wrap("batch/v1", "CronJob", &cj));
    assert_eq!(v["spec"]["schedule"], "*/5 * * * *");
    assert_eq!(v["spec"]["jobTemplate"]["metadata"], json!({"name": "cj1"}));
    assert_eq!(
        v["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"],
        "busybox"
    );
}

#[test]
fn services_have_int_or_string_target_ports() {
    let mut svc = core::v1::Service::new();
    svc.metadata = object_meta("s1", "pbtest");
    let spec = svc.spec.mut_or_insert_default();
    spec.type_ = Some("ClusterIP".into());
    spec.selector = labels(&[("app", "s1")]);
    for (name, port, target) in [
        ("http", 80, int_or_string_int(8080)),
        ("web", 443, int_or_string_str("https")),
    ] {
        let mut p = core::v1::ServicePort::new();
        p.name = Some(name.into());
        p.protocol = Some("TCP".into());
        p.port = Some(port);
        p.targetPort = target;
        spec.ports.push(p);
    }
    svc.status = MessageField::some(core::v1::ServiceStatus::new());
    assert_eq!(
        ok(&wrap("v1", "Service", &svc)),
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "s1", "namespace": "pbtest"},
            "spec": {"type": "ClusterIP", "selector": {"app": "s1"}, "ports": [
                {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
                {"name": "web", "protocol": "TCP", "port": 443, "targetPort": "https"}]},
            "status": {}})
    );
}

#[test]
fn pods_have_rfc3339_times_and_inline_references() {
    let time = |seconds: i64| {
        let mut t = meta::Time::new();
        t.seconds = Some(seconds);
        t.nanos = Some(0);
        MessageField::some(t)
    };
    let mut pod = core::v1::Pod::new();
    pod.metadata = object_meta("p1", "pbtest");
    pod.metadata.mut_or_insert_default().creationTimestamp = time(1_700_000_000);
    let mut c = container("c", "busybox");
    let mut env = core::v1::EnvVar::new();
    env.name = Some("FROM_CM".into());
    let mut key_ref = core::v1::ConfigMapKeySelector::new();
    key_ref.localObjectReference.mut_or_insert_default().name = Some("cm1".into());
    key_ref.key = Some("a".into());
    env.valueFrom.mut_or_insert_default().configMapKeyRef = MessageField::some(key_ref);
    c.env.push(env);
    let spec = pod.spec.mut_or_insert_default();
    spec.containers.push(c);
    spec.automountServiceAccountToken = Some(false);
    spec.terminationGracePeriodSeconds = Some(0);
    let status = pod.status.mut_or_insert_default();
    status.phase = Some("Running".into());
    status.startTime = time(1_700_000_060);
    let mut cond = core::v1::PodCondition::new();
    cond.type_ = Some("Ready".into());
    cond.status = Some("True".into());
    cond.lastTransitionTime = time(1_700_000_120);
    cond.lastProbeTime = MessageField::some(meta::Time::new()); // Go's zero time: null
    status.conditions.push(cond);
    assert_eq!(
        ok(&wrap("v1", "Pod", &pod)),
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p1", "namespace": "pbtest",
                "creationTimestamp": "2023-11-14T22:13:20Z"},
            "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {},
                "env": [{"name": "FROM_CM",
                    "valueFrom": {"configMapKeyRef": {"name": "cm1", "key": "a"}}}]}],
                "automountServiceAccountToken": false,
                "terminationGracePeriodSeconds": 0},
            "status": {"phase": "Running", "startTime": "2023-11-14T22:14:20Z",
                "conditions": [{"type": "Ready", "status": "True",
                    "lastTransitionTime": "2023-11-14T22:15:20Z"}]}})
    );
}

#[test]
fn leases_keep_microseconds() {
    let mut lease = k8s_rs_pb::api::coordination::v1::Lease::new();
    lease.metadata = object_meta("l1", "pbtest");
    let spec = lease.spec.mut_or_insert_default();
    spec.holderIdentity = Some("me".into());
    let mut t = meta::Time::new();
    t.seconds = Some(1_700_000_000);
    t.nanos = Some(123_456_789);
    spec.renewTime = MessageField::some(t);
    let v = ok(&wrap("coordination.k8s.io/v1", "Lease", &lease));
    assert_eq!(v["spec"]["renewTime"], "2023-11-14T22:13:20.123456Z");
}

#[test]
fn secret_bytes_are_base64() {
    let mut s = core::v1::Secret::new();
    s.metadata = object_meta("s1", "pbtest");
    s.data.insert("pw".into(), b"s3cr3t\0\xff".to_vec());
    s.data.insert("empty".into(), Vec::new());
    s.type_ = Some("Opaque".into());
    s.immutable = Some(true);
    assert_eq!(
        ok(&wrap("v1", "Secret", &s)),
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s1", "namespace": "pbtest"},
            "data": {"pw": "czNjcjN0AP8=", "empty": ""},
            "type": "Opaque", "immutable": true})
    );
}

#[test]
fn role_bindings_from_typed_messages() {
    let mut rb = rbac::v1::RoleBinding::new();
    rb.metadata = object_meta("rb1", "pbtest");
    let mut subject = rbac::v1::Subject::new();
    subject.kind = Some("ServiceAccount".into());
    subject.apiGroup = Some(String::new());
    subject.name = Some("sa1".into());
    subject.namespace = Some("pbtest".into());
    rb.subjects.push(subject);
    let role_ref = rb.roleRef.mut_or_insert_default();
    role_ref.apiGroup = Some("rbac.authorization.k8s.io".into());
    role_ref.kind = Some("ClusterRole".into());
    role_ref.name = Some("admin".into());
    assert_eq!(
        ok(&wrap("rbac.authorization.k8s.io/v1", "RoleBinding", &rb)),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "rb1", "namespace": "pbtest"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa1", "namespace": "pbtest"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "admin"}})
    );
}

#[test]
fn pod_disruption_budgets_and_ingresses() {
    let mut pdb = policy::v1::PodDisruptionBudget::new();
    pdb.metadata = object_meta("pdb1", "pbtest");
    let spec = pdb.spec.mut_or_insert_default();
    spec.minAvailable = int_or_string_str("50%");
    spec.selector = selector("web");
    assert_eq!(
        ok(&wrap("policy/v1", "PodDisruptionBudget", &pdb)),
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "pdb1", "namespace": "pbtest"},
            "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}}})
    );

    let mut ing = networking::v1::Ingress::new();
    ing.metadata = object_meta("ing1", "pbtest");
    let spec = ing.spec.mut_or_insert_default();
    spec.ingressClassName = Some("nginx".into());
    let mut rule = networking::v1::IngressRule::new();
    rule.host = Some("foo.example".into());
    let mut path = networking::v1::HTTPIngressPath::new();
    path.path = Some("/bar".into());
    path.pathType = Some("Exact".into());
    let service = path
        .backend
        .mut_or_insert_default()
        .service
        .mut_or_insert_default();
    service.name = Some("svc1".into());
    service.port.mut_or_insert_default().number = Some(8080);
    rule.ingressRuleValue
        .mut_or_insert_default()
        .http
        .mut_or_insert_default()
        .paths
        .push(path);
    spec.rules.push(rule);
    assert_eq!(
        ok(&wrap("networking.k8s.io/v1", "Ingress", &ing)),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "ing1", "namespace": "pbtest"},
            "spec": {"ingressClassName": "nginx", "rules": [{"host": "foo.example",
                "http": {"paths": [{"path": "/bar", "pathType": "Exact",
                    "backend": {"service": {"name": "svc1", "port": {"number": 8080}}}}]}}]}})
    );
}

#[test]
fn a_field_unknown_deep_inside_is_named() {
    let mut c = container("c", "busybox");
    // Field 99 of Container does not exist.
    c.special_fields.mut_unknown_fields().add_varint(99, 1);
    let mut d = apps::v1::Deployment::new();
    d.metadata = object_meta("d1", "pbtest");
    d.spec.mut_or_insert_default().template = pod_template("d1", c);
    let err = decode(&wrap("apps/v1", "Deployment", &d)).expect_err("refused");
    assert_eq!(err.code, 400);
    assert!(
        err.message.contains("field number 99")
            && err
                .message
                .contains("Deployment.spec.template.spec.containers[0]"),
        "{}",
        err.message
    );
}

#[test]
fn every_inline_field_exists() {
    for full in super::json::INLINE {
        let (message, field) = full.rsplit_once('.').expect("a dotted name");
        let (package, name) = message.rsplit_once('.').expect("a dotted name");
        let found = super::message_in(package, name).and_then(|m| m.field_by_name(field));
        assert!(found.is_some(), "{full}");
    }
}

/// `m`, encoded by its generated code and read back through the compiled descriptor.
fn through_descriptor(m: &impl Message, package: &str, name: &str) -> Result<Value, String> {
    let descriptor = super::message_in(package, name).expect("compiled");
    let bytes = m.write_to_bytes().expect("encodes");
    let parsed = descriptor.parse_from_bytes(&bytes).expect("parses");
    super::json::message(&*parsed, name)
}

/// `src/k8s.fds` is what protobuf-parse makes of k8s-rs-pb's `.proto` files, with the
/// doc comments of messages and fields (`GRANARY_REGENERATE=1` rewrites it).
#[test]
fn compiled_descriptors_match_the_proto_files() {
    let root = super::proto_root();
    let mut set = protobuf_parse::Parser::new()
        .pure()
        .include(&root)
        .inputs(super::GENERATED_FROM.iter().map(|p| root.join(p)))
        .file_descriptor_set()
        .expect("the .proto files compile");
    set.file.sort_by(|a, b| a.name().cmp(b.name()));
    // The doc comments of messages and their fields (the OpenAPI descriptions, see
    // builtin_schema.rs) as source info: protobuf-parse's pure parser records none, so
    // they are read from the files here.
    for file in &mut set.file {
        let text = std::fs::read_to_string(root.join(file.name())).unwrap_or_default();
        let mut info = protobuf::descriptor::SourceCodeInfo::new();
        for (path, comment) in doc_comments(&text) {
            let mut location = protobuf::descriptor::source_code_info::Location::new();
            location.path = path;
            location.leading_comments = Some(comment);
            info.location.push(location);
        }
        file.source_code_info = if info.location.is_empty() {
            protobuf::MessageField::none()
        } else {
            protobuf::MessageField::some(info)
        };
    }
    let compiled = set.write_to_bytes().expect("encodes");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/k8s.fds");
    if std::env::var("GRANARY_REGENERATE").is_ok_and(|v| v == "1") {
        std::fs::write(path, &compiled).expect("writes k8s.fds");
    }
    assert!(
        compiled == super::DESCRIPTORS,
        "crates/granary-apiserver/src/k8s.fds is stale: run this test with GRANARY_REGENERATE=1"
    );
    // Every file links, and every served built-in kind has its message.
    assert!(super::files().len() >= super::GENERATED_FROM.len());
    for kind in crate::builtin::BUILTIN_KINDS {
        let gv = if kind.group.is_empty() {
            kind.version.to_string()
        } else {
            format!("{}/{}", kind.group, kind.version)
        };
        assert!(
            super::descriptor(&gv, kind.kind).is_some(),
            "{gv} {}",
            kind.kind
        );
    }
}

/// The `//` comment lines right above each top-level message (path `[4, m]`) and each
/// of its fields (`[4, m, 2, f]`) of a `generated.proto`, as protoc records leading
/// comments (the text after `//`, one line each).
fn doc_comments(text: &str) -> Vec<(Vec<i32>, String)> {
    let mut out = Vec::new();
    let mut comment = String::new();
    let (mut message, mut field, mut depth) = (-1i32, -1i32, 0usize);
    for line in text.lines().map(str::trim) {
        if let Some(c) = line.strip_prefix("//") {
            comment.push_str(c);
            comment.push('\n');
            continue;
        }
        let doc = std::mem::take(&mut comment);
        if depth == 0 && line.starts_with("message ") {
            message += 1;
            field = -1;
            if !doc.is_empty() {
                out.push((vec![4, message], doc));
            }
        } else if depth == 1
            && line.ends_with(';')
            && line.contains(" = ")
            && !line.starts_with("option ")
        {
            field += 1;
            if !doc.is_empty() {
                out.push((vec![4, message, 2, field], doc));
            }
        }
        depth += line.matches('{').count();
        depth -= line.matches('}').count();
    }
    out
}

#[test]
fn doc_comments_are_found_by_message_and_field() {
    let text = "// A thing.\nmessage A {\n  // Its size.\n  // +optional\n  optional int32 size = 1;\n\n  map<string, string> labels = 2;\n}\n\nmessage B {\n  // The name.\n  optional string name = 1;\n}\n";
    assert_eq!(
        doc_comments(text),
        vec![
            (vec![4, 0], " A thing.\n".to_string()),
            (vec![4, 0, 2, 0], " Its size.\n +optional\n".to_string()),
            (vec![4, 1, 2, 0], " The name.\n".to_string()),
        ]
    );
}

#[test]
fn crd_schemas_have_their_json_keys_and_raw_values() {
    use k8s_rs_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
    // A CRD whose schema uses `x-kubernetes-*`, a default (raw JSON) and `additionalProperties: true`.
    let mut crd = ext::CustomResourceDefinition::new();
    crd.metadata = object_meta("widgets.example.com", "");
    let spec = crd.spec.mut_or_insert_default();
    spec.group = Some("example.com".into());
    let mut version = ext::CustomResourceDefinitionVersion::new();
    version.name = Some("v1".into());
    let mut props = ext::JSONSchemaProps::new();
    props.type_ = Some("object".into());
    props.xKubernetesPreserveUnknownFields = Some(true);
    let mut size = ext::JSONSchemaProps::new();
    size.type_ = Some("integer".into());
    size.default.mut_or_insert_default().raw = Some(b"3".to_vec());
    props.properties.insert("size".into(), size);
    props.additionalProperties.mut_or_insert_default().allows = Some(true);
    version.schema.mut_or_insert_default().openAPIV3Schema = MessageField::some(props);
    spec.versions.push(version);
    let v = ok(&wrap(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        &crd,
    ));
    assert_eq!(
        v["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"size": {"type": "integer", "default": 3}},
            "additionalProperties": true})
    );
    assert!(v["metadata"].get("namespace").is_none());
}

#[test]
fn durations_and_micro_times_read_as_go_writes_them() {
    const META: &str = "apimachinery.pkg.apis.meta.v1";
    let mut d = meta::Duration::new();
    d.duration = Some(90 * 60 * 1_000_000_000 + 500_000_000);
    assert_eq!(
        through_descriptor(&d, META, "Duration"),
        Ok(json!("1h30m0.5s"))
    );
    d.duration = Some(-1_000_000);
    assert_eq!(through_descriptor(&d, META, "Duration"), Ok(json!("-1ms")));
    let mut fields = meta::FieldsV1::new();
    fields.Raw = Some(br#"{"f:data":{}}"#.to_vec());
    assert_eq!(
        through_descriptor(&fields, META, "FieldsV1"),
        Ok(json!({"f:data": {}}))
    );
    let mut t = meta::MicroTime::new();
    t.seconds = Some(1_700_000_000);
    t.nanos = Some(5_000);
    assert_eq!(
        through_descriptor(&t, META, "MicroTime"),
        Ok(json!("2023-11-14T22:13:20.000005Z"))
    );
}
