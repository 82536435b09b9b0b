//! `/openapi/v2` (JSON and the protobuf form kubectl 1.20 asks for) and `/openapi/v3`,
//! built from the registry: custom resources get their CRD schema, built-ins the schema
//! generated from their Go types' descriptors (`builtin_schema.rs`), each carrying
//! `x-kubernetes-group-version-kind` (kubectl explain and client-side validation find
//! a kind's schema by it).

use serde_json::{Map, Value, json};

use super::builtin_schema::Flavor;
use super::registry::{Registry, ResourceInfo};

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// The generated schema of built-in `info` (its descriptor's message), if it is one.
fn builtin_message(info: &ResourceInfo) -> Option<protobuf::reflect::MessageDescriptor> {
    if info.crd.is_some() || info.schema.is_some() {
        return None;
    }
    super::protobuf::descriptor_of(&info.api_version(), &info.kind)
}

/// The definitions of the built-in kinds among `infos` and everything they use, with
/// ObjectMeta's (custom resources point at it).
fn builtin_definitions(
    infos: &[std::sync::Arc<ResourceInfo>],
    flavor: Flavor,
) -> Map<String, Value> {
    let roots: Vec<_> = infos.iter().filter_map(|i| builtin_message(i)).collect();
    let defs = match flavor {
        Flavor::V2 => super::builtin_schema::all(flavor).clone(),
        Flavor::V3 => super::builtin_schema::definitions(&roots, flavor),
    };
    defs.into_iter().collect()
}

fn gvk(info: &ResourceInfo) -> Value {
    json!([{"group": info.group, "version": info.version, "kind": info.kind}])
}

/// Turns a structural v3 schema into what kube-apiserver publishes in v2: no
/// `nullable`, no `anyOf`/`oneOf`/`allOf`/`not`, int-or-string untyped, and objects
/// that preserve unknown fields left open.
fn to_v2(schema: &Value) -> Value {
    let Some(map) = schema.as_object() else {
        return schema.clone();
    };
    let mut out = Map::new();
    let preserve = map.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
    let int_or_string = map.get("x-kubernetes-int-or-string") == Some(&json!(true));
    for (k, v) in map {
        match k.as_str() {
            "nullable"
            | "anyOf"
            | "oneOf"
            | "allOf"
            | "not"
            | "default"
            | "x-kubernetes-validations" => {}
            "type" if int_or_string => {}
            "properties" if preserve => {}
            "properties" => {
                let props: Map<String, Value> = v
                    .as_object()
                    .map(|p| p.iter().map(|(n, s)| (n.clone(), to_v2(s))).collect())
                    .unwrap_or_default();
                out.insert(k.clone(), Value::Object(props));
            }
            "items" | "additionalProperties" if v.is_object() => {
                out.insert(k.clone(), to_v2(v));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

/// The definition of one served resource, with `metadata_ref` pointing at ObjectMeta.
fn definition(
    info: &ResourceInfo,
    metadata_ref: &str,
    v2: bool,
    builtins: &Map<String, Value>,
) -> Value {
    if let Some(m) = builtin_message(info)
        && let Some(generated) = builtins.get(&super::builtin_schema::definition_name(&m))
    {
        let mut def = generated.clone();
        def["x-kubernetes-group-version-kind"] = gvk(info);
        return def;
    }
    let mut def = match &info.schema {
        Some(s) if v2 => to_v2(s),
        Some(s) => (**s).clone(),
        None => json!({
            "description": format!("{} ({}), served by the embedded API server.", info.kind, info.api_version()),
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
        }),
    };
    if info.schema.is_some()
        && let Some(obj) = def.as_object_mut()
    {
        obj.entry("type").or_insert(json!("object"));
        if let Some(props) = obj.get_mut("properties").and_then(Value::as_object_mut) {
            props.insert("apiVersion".into(), json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}));
            props.insert("kind".into(), json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}));
            props.insert("metadata".into(), json!({"$ref": metadata_ref}));
        }
    }
    def["x-kubernetes-group-version-kind"] = gvk(info);
    def
}

fn sorted(registry: &Registry) -> Vec<std::sync::Arc<ResourceInfo>> {
    let mut all = registry.all();
    all.sort_by(|a, b| a.openapi_name.cmp(&b.openapi_name));
    all
}

/// The swagger 2.0 document.
pub(crate) fn v2(registry: &Registry) -> Value {
    let infos = sorted(registry);
    let mut defs = builtin_definitions(&infos, Flavor::V2);
    let meta_ref = format!("#/definitions/{OBJECT_META}");
    for info in &infos {
        let def = definition(info, &meta_ref, true, &defs);
        defs.insert(info.openapi_name.clone(), def);
    }
    let mut paths = Map::new();
    for info in sorted(registry) {
        paths.insert(
            object_path(&info),
            json!({"patch": {
                "operationId": format!("patch{}", info.kind),
                // kubectl validates server-side when the server names these.
                "parameters": [
                    {"name": "dryRun", "in": "query", "type": "string", "uniqueItems": true},
                    {"name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": true},
                ],
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {"group": info.group, "version": info.version, "kind": info.kind},
            }}),
        );
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "definitions": defs,
    })
}

/// `/api[s/<group>]/<version>/[namespaces/{namespace}/]<plural>/{name}`.
fn object_path(info: &ResourceInfo) -> String {
    let prefix = if info.group.is_empty() {
        "/api".to_string()
    } else {
        format!("/apis/{}", info.group)
    };
    let scope = if info.namespaced {
        "namespaces/{namespace}/"
    } else {
        ""
    };
    format!("{prefix}/{}/{scope}{}/{{name}}", info.version, info.plural)
}

/// `/openapi/v3`: one entry per group-version.
pub(crate) fn v3_index(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for (g, versions) in registry.groups() {
        for v in versions {
            let p = if g.is_empty() {
                format!("api/{v}")
            } else {
                format!("apis/{g}/{v}")
            };
            let url = format!("/openapi/v3/{p}");
            paths.insert(p, json!({"serverRelativeURL": url}));
        }
    }
    json!({"paths": paths})
}

/// `/openapi/v3/apis/<g>/<v>` (or `api/v1`).
pub(crate) fn v3_group_version(registry: &Registry, path: &str) -> Option<Value> {
    let parts: Vec<&str> = path.split('/').collect();
    let (group, version) = match parts.as_slice() {
        ["api", v] => ("", *v),
        ["apis", g, v] => (*g, *v),
        _ => return None,
    };
    let infos = registry.resources(group, version);
    if infos.is_empty() {
        return None;
    }
    let meta_ref = format!("#/components/schemas/{OBJECT_META}");
    let mut schemas = builtin_definitions(&infos, Flavor::V3);
    let mut paths = Map::new();
    for info in infos {
        let def = definition(&info, &meta_ref, false, &schemas);
        schemas.insert(info.openapi_name.clone(), def);
        // kubectl explain finds a resource's kind through the operation on its path.
        let prefix = if group.is_empty() {
            "/api".to_string()
        } else {
            format!("/apis/{group}")
        };
        let scope = if info.namespaced {
            "namespaces/{namespace}/"
        } else {
            ""
        };
        let path = format!("{prefix}/{version}/{scope}{}/{{name}}", info.plural);
        let schema_ref = format!("#/components/schemas/{}", info.openapi_name);
        paths.insert(
            path,
            json!({
                "get": {
                    "operationId": format!("read{}", info.kind),
                    "x-kubernetes-action": "get",
                    "x-kubernetes-group-version-kind": {"group": info.group, "version": info.version, "kind": info.kind},
                    "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": schema_ref}}}}}
                },
                // kubectl (1.27+) validates server-side when the patch operation names
                // `fieldValidation`, instead of falling back to client-side validation.
                "patch": {
                    "operationId": format!("patch{}", info.kind),
                    "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": {"group": info.group, "version": info.version, "kind": info.kind},
                    "parameters": [
                        {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                        {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    ],
                    "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": schema_ref}}}}}
                },
            }),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// Minimal protobuf writer for the gnostic `openapi.v2.Document` message.
struct Pb(Vec<u8>);

impl Pb {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn tag(&mut self, field: u32, wire: u8) {
        self.varint(((field as u64) << 3) | wire as u64);
    }
    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.tag(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn string(&mut self, field: u32, s: &str) {
        self.bytes(field, s.as_bytes());
    }
    fn message(&mut self, field: u32, f: impl FnOnce(&mut Pb)) {
        let mut inner = Pb(Vec::new());
        f(&mut inner);
        self.bytes(field, &inner.0);
    }
    fn double(&mut self, field: u32, v: f64) {
        self.tag(field, 1);
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn int(&mut self, field: u32, v: i64) {
        self.tag(field, 0);
        self.varint(v as u64);
    }
    fn boolean(&mut self, field: u32, v: bool) {
        self.tag(field, 0);
        self.varint(u64::from(v));
    }
    /// `Any { yaml = 2 }` (JSON is YAML).
    fn any(&mut self, field: u32, v: &Value) {
        self.message(field, |m| m.string(2, &v.to_string()));
    }
}

/// gnostic `Operation`: operationId (5), query parameters (8, as
/// `ParametersItem.parameter.non_body_parameter.query_parameter_sub_schema`) and vendor
/// extensions (13, `NamedAny` with a YAML value).
fn encode_operation(pb: &mut Pb, op: &Value) {
    if let Some(id) = op.get("operationId").and_then(Value::as_str) {
        pb.string(5, id);
    }
    for p in op
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        pb.message(8, |item| {
            item.message(1, |param| {
                param.message(2, |non_body| {
                    non_body.message(3, |q| {
                        q.string(2, "query");
                        if let Some(name) = p.get("name").and_then(Value::as_str) {
                            q.string(4, name);
                        }
                        q.string(6, "string");
                    });
                });
            });
        });
    }
    if let Some(map) = op.as_object() {
        for (k, v) in map.iter().filter(|(k, _)| k.starts_with("x-")) {
            pb.message(13, |named| {
                named.string(1, k);
                named.any(2, v);
            });
        }
    }
}

fn encode_schema(pb: &mut Pb, s: &Value) {
    let Some(map) = s.as_object() else { return };
    let str_field = |pb: &mut Pb, k: &str, f: u32| {
        if let Some(v) = map.get(k).and_then(Value::as_str) {
            pb.string(f, v);
        }
    };
    str_field(pb, "$ref", 1);
    str_field(pb, "format", 2);
    str_field(pb, "title", 3);
    str_field(pb, "description", 4);
    for (k, f) in [("maximum", 7), ("minimum", 9)] {
        if let Some(v) = map.get(k).and_then(Value::as_f64) {
            pb.double(f, v);
        }
    }
    for (k, f) in [("exclusiveMaximum", 8), ("exclusiveMinimum", 10)] {
        if let Some(v) = map.get(k).and_then(Value::as_bool) {
            pb.boolean(f, v);
        }
    }
    for (k, f) in [
        ("maxLength", 11),
        ("minLength", 12),
        ("maxItems", 14),
        ("minItems", 15),
    ] {
        if let Some(v) = map.get(k).and_then(Value::as_i64) {
            pb.int(f, v);
        }
    }
    str_field(pb, "pattern", 13);
    if let Some(req) = map.get("required").and_then(Value::as_array) {
        for r in req.iter().filter_map(Value::as_str) {
            pb.string(19, r);
        }
    }
    if let Some(vals) = map.get("enum").and_then(Value::as_array) {
        for v in vals {
            pb.any(20, v);
        }
    }
    match map.get("additionalProperties") {
        Some(Value::Bool(b)) => pb.message(21, |m| m.boolean(2, *b)),
        Some(v @ Value::Object(_)) => pb.message(21, |m| m.message(1, |s| encode_schema(s, v))),
        _ => {}
    }
    if let Some(t) = map.get("type").and_then(Value::as_str) {
        pb.message(22, |m| m.string(1, t));
    }
    if let Some(items) = map.get("items").filter(|v| v.is_object()) {
        pb.message(23, |m| m.message(1, |s| encode_schema(s, items)));
    }
    if let Some(props) = map.get("properties").and_then(Value::as_object) {
        pb.message(25, |m| {
            for (name, schema) in props {
                m.message(1, |ns| {
                    ns.string(1, name);
                    ns.message(2, |s| encode_schema(s, schema));
                });
            }
        });
    }
    for (k, v) in map.iter().filter(|(k, _)| k.starts_with("x-")) {
        pb.message(31, |m| {
            m.string(1, k);
            m.any(2, v);
        });
    }
}

/// The v2 document as `application/com.github.proto-openapi.spec.v2@v1.0+protobuf`.
pub(crate) fn v2_protobuf(registry: &Registry) -> Vec<u8> {
    let doc = v2(registry);
    let mut pb = Pb(Vec::new());
    pb.string(1, "2.0");
    pb.message(2, |m| {
        m.string(1, "Kubernetes");
        m.string(2, "v1.33.0");
    });
    // Paths: each object path's patch operation, whose dryRun query parameter is how
    // kubectl (before 1.26) learns that a kind supports server-side dry run.
    pb.message(8, |paths| {
        let Some(all) = doc.get("paths").and_then(Value::as_object) else {
            return;
        };
        for (path, item) in all {
            let Some(op) = item.get("patch") else {
                continue;
            };
            paths.message(2, |named| {
                named.string(1, path);
                named.message(2, |item| item.message(8, |o| encode_operation(o, op)));
            });
        }
    });
    if let Some(defs) = doc.get("definitions").and_then(Value::as_object) {
        pb.message(9, |m| {
            for (name, schema) in defs {
                m.message(1, |ns| {
                    ns.string(1, name);
                    ns.message(2, |s| encode_schema(s, schema));
                });
            }
        });
    }
    pb.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_conversion_drops_what_swagger_cannot_say() {
        let s = json!({"type": "object", "properties": {
            "a": {"type": "string", "nullable": true},
            "p": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "f": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"x": {"type": "string"}}}
        }});
        let v = to_v2(&s);
        assert!(v["properties"]["a"].get("nullable").is_none());
        assert!(
            v["properties"]["p"].get("type").is_none()
                && v["properties"]["p"].get("anyOf").is_none()
        );
        assert!(v["properties"]["f"].get("properties").is_none());
    }

    #[test]
    fn protobuf_varints() {
        let mut pb = Pb(Vec::new());
        pb.varint(300);
        assert_eq!(pb.0, [0xac, 0x02]);
        let doc = v2_protobuf(&Registry::new());
        assert_eq!(&doc[..5], &[0x0a, 3, b'2', b'.', b'0']);
    }
}
