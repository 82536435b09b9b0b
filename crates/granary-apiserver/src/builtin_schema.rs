//! OpenAPI schemas of the built-in kinds, generated from the compiled Kubernetes
//! descriptors (`k8s.fds`) as kube-openapi generates them from the Go types: one
//! definition per type, named as upstream names it (`io.k8s.api.apps.v1.DeploymentSpec`),
//! fields by their JSON names (embedded structs inlined), descriptions from the doc
//! comments (without the `+marker` lines), `x-kubernetes-patch-strategy` and
//! `x-kubernetes-patch-merge-key` from the strategic-merge metadata, and the
//! apimachinery types with their own JSON form as upstream publishes them (times as
//! date-time strings, int-or-strings and quantities, raw objects). `kubectl explain`
//! reads these; kubectl before 1.26 validates manifests against the v2 form.
//!
//! Not generated: `required` (the protos do not say which fields Go requires, and a
//! wrong one would make old kubectls refuse a valid manifest client-side) and enums.

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use protobuf::reflect::{MessageDescriptor, RuntimeFieldType, RuntimeType};
use serde_json::{Map, Value, json};

/// Which document the schemas are for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Flavor {
    /// Swagger 2.0 (`/openapi/v2`): `$ref` to `#/definitions/`.
    V2,
    /// OpenAPI 3 (`/openapi/v3/...`): `allOf: [$ref]` to `#/components/schemas/`.
    V3,
}

/// Upstream's definition name of message `m`.
pub(crate) fn definition_name(m: &MessageDescriptor) -> String {
    format!("io.k8s.{}", m.full_name().replace('_', "-"))
}

fn reference(m: &MessageDescriptor, flavor: Flavor) -> String {
    match flavor {
        Flavor::V2 => format!("#/definitions/{}", definition_name(m)),
        Flavor::V3 => format!("#/components/schemas/{}", definition_name(m)),
    }
}

/// A field's schema pointing at message `m`, with its description.
fn ref_schema(m: &MessageDescriptor, description: Option<&str>, flavor: Flavor) -> Value {
    let target = reference(m, flavor);
    let mut s = match flavor {
        Flavor::V2 => json!({"$ref": target}),
        Flavor::V3 => json!({"allOf": [{"$ref": target}]}),
    };
    if let Some(d) = description {
        s["description"] = json!(d);
    }
    s
}

/// The schema of an apimachinery type with its own JSON form, or `None` for a struct.
fn special(m: &MessageDescriptor, flavor: Flavor) -> Option<Value> {
    let int_or_string = || match flavor {
        Flavor::V2 => json!({"type": "string", "format": "int-or-string"}),
        Flavor::V3 => json!({"x-kubernetes-int-or-string": true,
            "anyOf": [{"type": "integer"}, {"type": "string"}]}),
    };
    Some(match m.full_name() {
        "apimachinery.pkg.apis.meta.v1.Time" | "apimachinery.pkg.apis.meta.v1.MicroTime" => {
            json!({"type": "string", "format": "date-time"})
        }
        "apimachinery.pkg.apis.meta.v1.Duration" => json!({"type": "string"}),
        "apimachinery.pkg.util.intstr.IntOrString" => int_or_string(),
        "apimachinery.pkg.api.resource.Quantity" => match flavor {
            Flavor::V2 => json!({"type": "string"}),
            Flavor::V3 => int_or_string(),
        },
        "apimachinery.pkg.apis.meta.v1.FieldsV1" | "apimachinery.pkg.runtime.RawExtension" => {
            json!({"type": "object"})
        }
        "apimachinery.pkg.apis.meta.v1.Verbs" => {
            json!({"type": "array", "items": {"type": "string"}})
        }
        name if name.starts_with("apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON")
            && name != "apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps" =>
        {
            json!({})
        }
        _ => return None,
    })
}

fn scalar(t: &RuntimeType) -> Value {
    match t {
        RuntimeType::I32 | RuntimeType::U32 => json!({"type": "integer", "format": "int32"}),
        RuntimeType::I64 | RuntimeType::U64 => json!({"type": "integer", "format": "int64"}),
        RuntimeType::F32 | RuntimeType::F64 => json!({"type": "number", "format": "double"}),
        RuntimeType::Bool => json!({"type": "boolean"}),
        RuntimeType::VecU8 => json!({"type": "string", "format": "byte"}),
        _ => json!({"type": "string"}),
    }
}

/// The JSON key of proto field `name` of message `message`.
fn json_key(message: &str, name: &str) -> String {
    if message == "apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps" {
        return super::protobuf::schema_props_key(name);
    }
    let mut chars = name.chars();
    match chars.next() {
        Some(first) if first.is_ascii_uppercase() => {
            first.to_ascii_lowercase().to_string() + chars.as_str()
        }
        _ => name.to_string(),
    }
}

/// Doc comments as upstream's descriptions: marker lines (`+optional`) dropped, the
/// lines of a paragraph joined with spaces, paragraphs with a blank line.
fn description(comment: &str) -> Option<String> {
    let mut paragraphs: Vec<String> = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for line in comment.lines().map(str::trim) {
        if line.starts_with('+') || line.starts_with("---") {
            continue;
        }
        if line.is_empty() {
            if !current.is_empty() {
                paragraphs.push(current.join(" "));
                current.clear();
            }
        } else {
            current.push(line);
        }
    }
    if !current.is_empty() {
        paragraphs.push(current.join(" "));
    }
    let text = paragraphs.join("\n\n");
    (!text.is_empty()).then_some(text)
}

/// (message full name, field name or "") → doc comment, from the descriptors' source
/// info (kept for leading comments only).
fn comments() -> &'static HashMap<(String, String), String> {
    static COMMENTS: OnceLock<HashMap<(String, String), String>> = OnceLock::new();
    COMMENTS.get_or_init(|| {
        let mut out = HashMap::new();
        for file in super::protobuf::files() {
            let proto = file.proto();
            let package = proto.package();
            for loc in &proto.source_code_info.location {
                let Some(text) = loc.leading_comments.as_deref() else {
                    continue;
                };
                // [4, message] and [4, message, 2, field]: top-level messages only.
                let (message, field) = match loc.path.as_slice() {
                    [4, m] => (*m, None),
                    [4, m, 2, f] => (*m, Some(*f)),
                    _ => continue,
                };
                let Some(msg) = proto.message_type.get(message as usize) else {
                    continue;
                };
                let field_name = match field {
                    Some(f) => match msg.field.get(f as usize) {
                        Some(f) => f.name().to_string(),
                        None => continue,
                    },
                    None => String::new(),
                };
                out.insert(
                    (format!("{package}.{}", msg.name()), field_name),
                    text.to_string(),
                );
            }
        }
        out
    })
}

fn comment(message: &str, field: &str) -> Option<String> {
    comments()
        .get(&(message.to_string(), field.to_string()))
        .and_then(|c| description(c))
}

fn patch_meta(message: &str, field: &str) -> Option<(&'static str, &'static str)> {
    super::strategic::meta::FIELDS
        .iter()
        .find(|(m, f, _, _)| *m == message && *f == field)
        .map(|(_, _, strategy, key)| (*strategy, *key))
}

/// Adds message `m`'s fields (and those of the structs it inlines) to `props`; every
/// message type met is pushed to `todo`.
fn fields(
    m: &MessageDescriptor,
    props: &mut Map<String, Value>,
    todo: &mut Vec<MessageDescriptor>,
    flavor: Flavor,
) {
    let full = m.full_name().to_string();
    for f in m.fields() {
        let name = f.name().to_string();
        if super::protobuf::is_inline(&f) {
            if let RuntimeFieldType::Singular(RuntimeType::Message(inlined)) =
                f.runtime_field_type()
            {
                fields(&inlined, props, todo, flavor);
            }
            continue;
        }
        let doc = comment(&full, &name);
        let of = |t: &RuntimeType, todo: &mut Vec<MessageDescriptor>, doc: Option<&str>| match t {
            RuntimeType::Message(inner) => {
                todo.push(inner.clone());
                ref_schema(inner, doc, flavor)
            }
            t => {
                let mut s = scalar(t);
                if let Some(d) = doc {
                    s["description"] = json!(d);
                }
                s
            }
        };
        let mut schema = match f.runtime_field_type() {
            RuntimeFieldType::Singular(t) => of(&t, todo, doc.as_deref()),
            RuntimeFieldType::Repeated(t) => {
                let mut s = json!({"type": "array", "items": of(&t, todo, None)});
                if let Some(d) = &doc {
                    s["description"] = json!(d);
                }
                s
            }
            RuntimeFieldType::Map(_, t) => {
                let mut s = json!({"type": "object", "additionalProperties": of(&t, todo, None)});
                if let Some(d) = &doc {
                    s["description"] = json!(d);
                }
                s
            }
        };
        if let Some((strategy, key)) = patch_meta(&full, &name) {
            schema["x-kubernetes-patch-strategy"] = json!(strategy);
            if !key.is_empty() {
                schema["x-kubernetes-patch-merge-key"] = json!(key);
            }
        }
        props.insert(json_key(&full, &name), schema);
    }
}

/// The type meta every kind has (not a field of its message: Go inlines `TypeMeta`).
fn type_meta(props: &mut Map<String, Value>) {
    props.insert("apiVersion".into(), json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"}));
    props.insert("kind".into(), json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"}));
}

/// The definition of message `m` (its fields referencing other definitions); a `kind`
/// also gets `apiVersion` and `kind`.
fn definition(
    m: &MessageDescriptor,
    kind: bool,
    todo: &mut Vec<MessageDescriptor>,
    flavor: Flavor,
) -> Value {
    let mut def = special(m, flavor).unwrap_or_else(|| {
        let mut props = Map::new();
        if kind {
            type_meta(&mut props);
        }
        fields(m, &mut props, todo, flavor);
        json!({"type": "object", "properties": props})
    });
    if let Some(d) = comment(m.full_name(), "") {
        def["description"] = json!(d);
    }
    def
}

/// The definitions of `kinds`, of ObjectMeta and of every type they use, by upstream
/// name.
pub(crate) fn definitions(kinds: &[MessageDescriptor], flavor: Flavor) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let mut todo: Vec<MessageDescriptor> = object_meta().into_iter().collect();
    for m in kinds {
        let def = definition(m, true, &mut todo, flavor);
        out.insert(definition_name(m), def);
    }
    while let Some(m) = todo.pop() {
        let name = definition_name(&m);
        if out.contains_key(&name) {
            continue;
        }
        let def = definition(&m, false, &mut todo, flavor);
        out.insert(name, def);
    }
    out
}

/// [`definitions`] of every served built-in kind, computed once per flavor.
pub(crate) fn all(flavor: Flavor) -> &'static BTreeMap<String, Value> {
    static V2: OnceLock<BTreeMap<String, Value>> = OnceLock::new();
    static V3: OnceLock<BTreeMap<String, Value>> = OnceLock::new();
    let cell = match flavor {
        Flavor::V2 => &V2,
        Flavor::V3 => &V3,
    };
    cell.get_or_init(|| {
        let roots: Vec<MessageDescriptor> = super::builtin::BUILTIN_KINDS
            .iter()
            .filter_map(|k| {
                let gv = if k.group.is_empty() {
                    k.version.to_string()
                } else {
                    format!("{}/{}", k.group, k.version)
                };
                super::protobuf::descriptor_of(&gv, k.kind)
            })
            .collect();
        definitions(&roots, flavor)
    })
}

/// The descriptor of `ObjectMeta` (custom resources' `metadata` points at it).
pub(crate) fn object_meta() -> Option<MessageDescriptor> {
    super::protobuf::message_in_package("apimachinery.pkg.apis.meta.v1", "ObjectMeta")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_read_like_upstreams() {
        let defs = all(Flavor::V2);
        assert!(
            defs["io.k8s.api.apps.v1.Deployment"]["properties"]
                .get("kind")
                .is_some()
        );
        assert!(
            defs["io.k8s.api.core.v1.PodTemplateSpec"]["properties"]
                .get("kind")
                .is_none()
        );
        let deploy = &defs["io.k8s.api.apps.v1.DeploymentSpec"];
        assert_eq!(
            deploy["properties"]["replicas"]["type"], "integer",
            "{deploy}"
        );
        assert_eq!(
            deploy["properties"]["template"]["$ref"],
            "#/definitions/io.k8s.api.core.v1.PodTemplateSpec"
        );
        let replicas = deploy["properties"]["replicas"]["description"]
            .as_str()
            .unwrap();
        assert!(
            replicas.starts_with("Number of desired pods."),
            "{replicas}"
        );
        assert!(!replicas.contains("+optional"), "{replicas}");
        let containers = &defs["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(
            containers["items"]["$ref"],
            "#/definitions/io.k8s.api.core.v1.Container"
        );
        // Inlined structs' fields are the parent's; special types have their JSON form.
        let volume = &defs["io.k8s.api.core.v1.Volume"]["properties"];
        assert!(volume.get("emptyDir").is_some() && volume.get("volumeSource").is_none());
        assert_eq!(
            defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"],
            "int-or-string"
        );
        assert_eq!(
            defs["io.k8s.apimachinery.pkg.apis.meta.v1.Time"]["format"],
            "date-time"
        );
        let labels =
            &defs["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]["labels"];
        assert_eq!(labels["additionalProperties"]["type"], "string");
        let crd = &defs["io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps"]
            ["properties"];
        assert!(
            crd.get("x-kubernetes-preserve-unknown-fields").is_some() && crd.get("$ref").is_some()
        );
        // v3 points through allOf.
        let v3 = all(Flavor::V3);
        assert_eq!(
            v3["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["template"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.PodTemplateSpec"
        );
        assert_eq!(
            v3["io.k8s.apimachinery.pkg.api.resource.Quantity"]["x-kubernetes-int-or-string"],
            true
        );
    }

    #[test]
    fn marker_lines_are_dropped_and_paragraphs_kept() {
        assert_eq!(
            description(" Number of pods.\n Defaults to 1.\n +optional\n\n More text.\n")
                .as_deref(),
            Some("Number of pods. Defaults to 1.\n\nMore text.")
        );
        assert_eq!(description(" +k8s:openapi-gen=true\n"), None);
    }
}
