//! Kubernetes protobuf request bodies, decoded to the JSON the same object has in the
//! API. Newer kubectls (1.32 here; 1.20 still sends JSON) encode the objects of their
//! own generators as `application/vnd.kubernetes.protobuf` (`kubectl create
//! deployment|job|cronjob|service|configmap|secret|role|…`, `kubectl auth can-i`);
//! kube-apiserver accepts that for every built-in kind, so the embedded server must too.
//!
//! The envelope is the 4-byte magic `k8s\0` followed by a `runtime.Unknown` message
//! (type meta, the raw object, its encoding and content type). The raw object is parsed
//! as a dynamic message of its kind's descriptor and its reflection is walked into JSON
//! (see `protobuf_json.rs`). The descriptors are the Kubernetes v1.33 `generated.proto`
//! files, compiled into `k8s.fds` (a `FileDescriptorSet`) from the copies the
//! `k8s-rs-pb` crate ships; a unit test rebuilds it and fails on drift. (k8s-rs-pb's own
//! generated `file_descriptor()` cannot be used: each one lists itself as its
//! dependencies and deadlocks on first use.) A field the descriptor does not know is an
//! error naming it, never silently dropped. A group or kind with no descriptor (custom
//! resources) gets 415 with what to do instead.

use std::sync::OnceLock;

use protobuf::Message;
use protobuf::descriptor::FileDescriptorSet;
use protobuf::reflect::{FileDescriptor, MessageDescriptor, ReflectValueRef};
use serde_json::Value;

use super::errors::ApiError;

mod json;

pub(crate) use json::schema_props_key;

/// The prefix of every Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\0";

/// The compiled descriptors (see the module docs and `GENERATED_FROM`).
const DESCRIPTORS: &[u8] = include_bytes!("k8s.fds");

/// The `.proto` files (paths inside k8s-rs-pb's `src/v1_33/`) compiled into `k8s.fds`.
#[cfg(test)]
pub(crate) const GENERATED_FROM: &[&str] = &[
    "apimachinery/pkg/api/resource/generated.proto",
    "apimachinery/pkg/apis/meta/v1/generated.proto",
    "apimachinery/pkg/runtime/generated.proto",
    "apimachinery/pkg/runtime/schema/generated.proto",
    "apimachinery/pkg/util/intstr/generated.proto",
    "apiextensions_apiserver/pkg/apis/apiextensions/v1/generated.proto",
    "api/admissionregistration/v1/generated.proto",
    "api/apps/v1/generated.proto",
    "api/authentication/v1/generated.proto",
    "api/authorization/v1/generated.proto",
    "api/autoscaling/v1/generated.proto",
    "api/autoscaling/v2/generated.proto",
    "api/batch/v1/generated.proto",
    "api/certificates/v1/generated.proto",
    "api/coordination/v1/generated.proto",
    "api/core/v1/generated.proto",
    "api/discovery/v1/generated.proto",
    "api/events/v1/generated.proto",
    "api/flowcontrol/v1/generated.proto",
    "api/networking/v1/generated.proto",
    "api/node/v1/generated.proto",
    "api/policy/v1/generated.proto",
    "api/rbac/v1/generated.proto",
    "api/scheduling/v1/generated.proto",
    "api/storage/v1/generated.proto",
];

/// The proto package of each built-in group/version (stable versions: those the server
/// serves and the ones kubectl's generators write).
const GROUP_VERSIONS: &[(&str, &str)] = &[
    ("v1", "api.core.v1"),
    (
        "admissionregistration.k8s.io/v1",
        "api.admissionregistration.v1",
    ),
    ("apps/v1", "api.apps.v1"),
    ("authentication.k8s.io/v1", "api.authentication.v1"),
    ("authorization.k8s.io/v1", "api.authorization.v1"),
    ("autoscaling/v1", "api.autoscaling.v1"),
    ("autoscaling/v2", "api.autoscaling.v2"),
    ("batch/v1", "api.batch.v1"),
    ("certificates.k8s.io/v1", "api.certificates.v1"),
    ("coordination.k8s.io/v1", "api.coordination.v1"),
    ("discovery.k8s.io/v1", "api.discovery.v1"),
    ("events.k8s.io/v1", "api.events.v1"),
    ("flowcontrol.apiserver.k8s.io/v1", "api.flowcontrol.v1"),
    ("networking.k8s.io/v1", "api.networking.v1"),
    ("node.k8s.io/v1", "api.node.v1"),
    ("policy/v1", "api.policy.v1"),
    ("rbac.authorization.k8s.io/v1", "api.rbac.v1"),
    ("scheduling.k8s.io/v1", "api.scheduling.v1"),
    ("storage.k8s.io/v1", "api.storage.v1"),
    (
        "apiextensions.k8s.io/v1",
        "apiextensions_apiserver.pkg.apis.apiextensions.v1",
    ),
];

/// Every compiled file, linked once.
pub(crate) fn files() -> &'static [FileDescriptor] {
    static FILES: OnceLock<Vec<FileDescriptor>> = OnceLock::new();
    FILES.get_or_init(|| {
        let set = FileDescriptorSet::parse_from_bytes(DESCRIPTORS)
            .expect("k8s.fds is a FileDescriptorSet (a unit test rebuilds and checks it)");
        FileDescriptor::new_dynamic_fds(set.file, &[])
            .expect("k8s.fds holds every file its files import (a unit test checks it)")
    })
}

/// The message `name` of proto package `package`.
fn message_in(package: &str, name: &str) -> Option<MessageDescriptor> {
    files()
        .iter()
        .filter(|f| f.package() == package)
        .find_map(|f| f.message_by_package_relative_name(name))
}

/// [`message_in`], for the schema generator.
pub(crate) fn message_in_package(package: &str, name: &str) -> Option<MessageDescriptor> {
    message_in(package, name)
}

/// Whether field `f` is an embedded Go struct whose fields JSON lifts into its parent.
pub(crate) fn is_inline(f: &protobuf::reflect::FieldDescriptor) -> bool {
    json::INLINE.contains(&f.full_name().as_str())
}

/// The message of `kind` in `api_version`, if it is a built-in one.
fn descriptor(api_version: &str, kind: &str) -> Option<MessageDescriptor> {
    let (_, package) = GROUP_VERSIONS.iter().find(|(gv, _)| *gv == api_version)?;
    message_in(package, kind)
}

/// The field of message `m` that JSON key `key` names, with the message declaring it.
/// Proto names are the JSON names (but for a few upper-cased ones, `Webhooks`), and the
/// fields of a message Go inlines (`json:",inline"`, [`json::INLINE`]) are its parent's.
pub(crate) fn json_field(
    m: &MessageDescriptor,
    key: &str,
) -> Option<(MessageDescriptor, protobuf::reflect::FieldDescriptor)> {
    use protobuf::reflect::{RuntimeFieldType, RuntimeType};
    for f in m.fields() {
        if json::INLINE.contains(&f.full_name().as_str()) {
            if let RuntimeFieldType::Singular(RuntimeType::Message(inlined)) =
                f.runtime_field_type()
                && let Some(found) = json_field(&inlined, key)
            {
                return Some(found);
            }
            continue;
        }
        // Field names are ASCII: only the first letter's case may differ.
        let name = f.name();
        let lower_first = name.len() == key.len()
            && name
                .get(..1)
                .zip(key.get(..1))
                .is_some_and(|(n, k)| n.eq_ignore_ascii_case(k))
            && name.get(1..) == key.get(1..);
        if name == key || lower_first {
            return Some((m.clone(), f));
        }
    }
    None
}

/// The message of built-in `kind` in `api_version` (strategic merge patch walks it).
pub(crate) fn descriptor_of(api_version: &str, kind: &str) -> Option<MessageDescriptor> {
    descriptor(api_version, kind)
}

/// Decodes a protobuf request body to the object's JSON.
pub(crate) fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let bad = |m: String| ApiError::bad_request(format!("error decoding protobuf body: {m}"));
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("it does not start with the Kubernetes protobuf prefix".into()))?;
    let unknown = message_in("apimachinery.pkg.runtime", "Unknown")
        .expect("k8s.fds has runtime.Unknown")
        .parse_from_bytes(envelope)
        .map_err(|e| bad(format!("the runtime.Unknown envelope: {e}")))?;
    let unknown = &*unknown;
    let type_meta = match json::get(unknown, "typeMeta") {
        Some(ReflectValueRef::Message(m)) => Some(m),
        _ => None,
    };
    let api_version = type_meta
        .as_ref()
        .map_or("", |m| json::get_str(&**m, "apiVersion"));
    let kind = type_meta
        .as_ref()
        .map_or("", |m| json::get_str(&**m, "kind"));
    if !json::get_str(unknown, "contentEncoding").is_empty() {
        return Err(bad(
            "encoded (compressed) raw objects are not supported".into()
        ));
    }
    let content_type = json::get_str(unknown, "contentType");
    if !content_type.is_empty() && content_type != "application/vnd.kubernetes.protobuf" {
        return Err(bad(format!(
            "contentType {content_type:?}: the raw object must be protobuf"
        )));
    }
    let Some(message) = descriptor(api_version, kind) else {
        return Err(ApiError::unsupported_media_type_because(format!(
            "this server decodes protobuf bodies only for built-in kinds, and \
             {api_version:?} {kind:?} is not one; send it as JSON or YAML (for example with \
             `kubectl apply -f`)"
        )));
    };
    let raw = json::get_bytes(unknown, "raw").unwrap_or_default();
    let object = message
        .parse_from_bytes(raw)
        .map_err(|e| bad(format!("{kind}: {e}")))?;
    let mut object = json::message(&*object, kind).map_err(bad)?;
    if let Value::Object(map) = &mut object {
        map.insert("apiVersion".into(), Value::String(api_version.to_string()));
        map.insert("kind".into(), Value::String(kind.to_string()));
    }
    Ok(object)
}

/// Where k8s-rs-pb's v1.33 `.proto` files are (a dev-dependency: found with `cargo
/// metadata`), for the tests that rebuild what is generated from them.
#[cfg(test)]
pub(crate) fn proto_root() -> std::path::PathBuf {
    use serde_json::Value;
    // Only this platform's packages: a fresh machine's registry cache holds those alone
    // (the build downloads no other platform's), and `--offline` must find them all.
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = std::process::Command::new(rustc)
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    let version = String::from_utf8_lossy(&version.stdout);
    let host = version
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let metadata = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", host])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        metadata.status.success(),
        "{}",
        String::from_utf8_lossy(&metadata.stderr)
    );
    let metadata: Value = serde_json::from_slice(&metadata.stdout).expect("JSON");
    let manifest = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == "k8s-rs-pb")
        .and_then(|p| p["manifest_path"].as_str())
        .expect("k8s-rs-pb is a dev-dependency");
    std::path::Path::new(manifest)
        .parent()
        .expect("a directory")
        .join("src/v1_33")
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod typed_tests;
