//! The server's shared state and the verbs on objects that both the HTTP layer and the
//! background controllers call: create, get, update, patch, delete, scale.

use std::sync::Arc;
use std::time::Duration;

use chrono::SecondsFormat;
use serde_json::{Value, json};

use super::Clock;
use super::errors::{ApiError, FieldCause};
use super::field_validation::Directive;
use super::managed::{self, Writer};
use super::metadata;
use super::objects::{
    self, DeleteDecision, Endpoint, Propagation, UpdateDecision, check_preconditions,
    decide_delete, meta_str, prepare_create, prepare_update,
};
use super::patch::{PatchKind, apply_patch};
use super::registry::{Registry, ResourceInfo, StoredAs};
use super::schema::validate_and_prune;
use super::shape::Shape;
use super::store::{Mutation, Store};

pub(crate) struct State {
    pub store: Store,
    pub registry: Registry,
    pub token: String,
    /// Maps bearer tokens to identities (the admin token and the token file's users).
    pub authn: super::authn::Authenticator,
    pub clock: Clock,
    pub bookmark_interval: Duration,
    pub shutdown: tokio_util::sync::CancellationToken,
    /// `127.0.0.1:<port>`, for discovery's serverAddressByClientCIDRs.
    pub address: String,
    /// The opt-in log of API calls (tests of RBAC rules).
    pub recorder: super::recorder::Recorder,
    /// Held from reading the Services' addresses and node ports in use to the write of
    /// a Service (see [`State::allocations`]).
    pub service_writes: std::sync::Mutex<()>,
}

/// Options of a delete (query parameters and `DeleteOptions` body merged).
#[derive(Debug, Clone)]
pub(crate) struct DeleteOptions {
    pub propagation: Option<Propagation>,
    pub preconditions: Option<Value>,
}

impl DeleteOptions {
    pub(crate) fn parse(
        body: Option<&Value>,
        query_policy: Option<&str>,
    ) -> Result<Self, ApiError> {
        let policy = body
            .and_then(|b| b.get("propagationPolicy"))
            .and_then(Value::as_str)
            .or(query_policy);
        let orphan = body
            .and_then(|b| b.get("orphanDependents"))
            .and_then(Value::as_bool);
        let propagation = match (policy, orphan) {
            (Some("Background"), _) => Some(Propagation::Background),
            (Some("Foreground"), _) => Some(Propagation::Foreground),
            (Some("Orphan"), _) => Some(Propagation::Orphan),
            (Some(other), _) => {
                return Err(ApiError::bad_request(format!(
                    "unsupported propagationPolicy {other:?}: must be Background, Foreground or Orphan"
                )));
            }
            (None, Some(true)) => Some(Propagation::Orphan),
            (None, Some(false)) => Some(Propagation::Background),
            (None, None) => None,
        };
        Ok(DeleteOptions {
            propagation,
            preconditions: body.and_then(|b| b.get("preconditions")).cloned(),
        })
    }
}

/// How a write records managedFields.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tracking {
    /// The server's own writes: entries stay as they are.
    None,
    /// A client's create, update or patch by this field manager.
    Update(String),
    /// The object carries the entries already (server-side apply computed them).
    Given,
}

/// Records a non-apply write by `manager` in `new`'s managedFields.
fn track_update(
    cur: Option<&Value>,
    new: &mut Value,
    info: &ResourceInfo,
    manager: &str,
    endpoint: Endpoint,
    now: &str,
) {
    let api_version = info.api_version();
    let writer = Writer {
        manager,
        subresource: (endpoint == Endpoint::Status).then_some("status"),
        api_version: &api_version,
        now,
    };
    managed::track_update(
        cur,
        new,
        Shape::root(&info.kind, info.schema.as_deref()),
        &writer,
    );
}

/// Turns a stored object into what `info` serves: relabelled to the served version
/// (CRD conversion `None`), or converted when another resource's store holds it.
pub(crate) fn to_served(info: &ResourceInfo, mut obj: Value) -> Value {
    if info.stored_as == Some(StoredAs::CoreEvent) {
        return super::events::core_to_events_v1(&obj);
    }
    if info.version != info.storage_version
        && let Some(m) = obj.as_object_mut()
    {
        m.insert("apiVersion".into(), Value::String(info.api_version()));
    }
    obj
}

fn to_storage(info: &ResourceInfo, mut obj: Value) -> Value {
    if info.stored_as == Some(StoredAs::CoreEvent) {
        return super::events::events_v1_to_core(&obj);
    }
    if info.version != info.storage_version
        && let Some(m) = obj.as_object_mut()
    {
        m.insert(
            "apiVersion".into(),
            Value::String(info.storage_api_version()),
        );
    }
    obj
}

/// Validates (and prunes) a custom object against its version's schema.
pub(crate) fn validate_custom(info: &ResourceInfo, obj: &mut Value) -> Result<(), ApiError> {
    let Some(schema) = &info.schema else {
        return Ok(());
    };
    let errors = validate_and_prune(schema, obj);
    if errors.is_empty() {
        Ok(())
    } else {
        let name = meta_str(obj, "name").unwrap_or_default().to_string();
        Err(ApiError::invalid(&info.group, &info.kind, &name, errors))
    }
}

fn is_service(info: &ResourceInfo) -> bool {
    info.group.is_empty() && info.kind == "Service"
}

/// Validates a (defaulted) built-in object; `old` is the stored one on an update.
fn check_builtin(info: &ResourceInfo, obj: &Value, old: Option<&Value>) -> Result<(), ApiError> {
    let causes = super::validation::validate(info, obj, old);
    if causes.is_empty() {
        Ok(())
    } else {
        let name = meta_str(obj, "name").unwrap_or_default();
        Err(ApiError::invalid(&info.group, &info.kind, name, causes))
    }
}

/// Reads `.a.b` style paths (the forms CRD scale paths use).
pub(crate) fn get_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    for part in path.trim_start_matches('.').split('.') {
        cur = cur.get(part)?;
    }
    Some(cur)
}

fn set_path(obj: &mut Value, path: &str, v: Value) {
    let mut cur = obj;
    let parts: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let map = cur.as_object_mut().expect("made an object above");
        if i + 1 == parts.len() {
            map.insert(part.to_string(), v);
            return;
        }
        cur = map.entry(part.to_string()).or_insert_with(|| json!({}));
    }
}

impl State {
    /// The cluster IPs and node ports of every Service but `ns/name` (call with
    /// `service_writes` held).
    fn allocations(&self, ns: &str, name: &str) -> super::services::InUse {
        let gr = super::store::GroupResource::new("", "services");
        let (all, _) = self.store.list(&gr, None, None);
        let others: Vec<Value> = all
            .iter()
            .filter(|((n, m), _)| !(n == ns && m == name))
            .filter_map(|(_, data)| serde_json::from_slice(data).ok())
            .collect();
        super::services::InUse::of(others.iter())
    }

    pub(crate) fn now_time(&self) -> chrono::DateTime<chrono::Utc> {
        self.clock.now()
    }

    pub(crate) fn now(&self) -> String {
        self.clock.now().to_rfc3339_opts(SecondsFormat::Secs, true)
    }

    fn check_namespace(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
    ) -> Result<(), ApiError> {
        let Some(ns) = ns.filter(|_| info.namespaced) else {
            return Ok(());
        };
        let nsgr = super::store::GroupResource::new("", "namespaces");
        match self.store.deleting(&nsgr, "", ns) {
            None => Err(ApiError::not_found("", "namespaces", ns)),
            Some(true) => Err(ApiError::forbidden(format!(
                "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                super::errors::qualified(&info.group, &info.plural)
            ))),
            Some(false) => Ok(()),
        }
    }

    fn check_crd_active(&self, info: &ResourceInfo) -> Result<(), ApiError> {
        if let Some(crd) = &info.crd {
            let gr = super::store::GroupResource::new(
                "apiextensions.k8s.io",
                "customresourcedefinitions",
            );
            if self.store.deleting(&gr, "", crd).unwrap_or(false) {
                return Err(ApiError::method_not_allowed(
                    "create not allowed while custom resource definition is terminating",
                ));
            }
        }
        Ok(())
    }

    /// Creates an object; `tracking` says how its managedFields are recorded.
    pub(crate) fn create(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        body: Value,
        tracking: Tracking,
    ) -> Result<Value, ApiError> {
        let uid = uuid::Uuid::new_v4().to_string();
        let now = self.now();
        let mut obj = prepare_create(info, body, ns, &now, &uid)?;
        let name = meta_str(&obj, "name").unwrap_or_default().to_string();
        self.check_namespace(info, ns, &name)?;
        self.check_crd_active(info)?;
        if let Some(check) = self.escalation_check(info) {
            let ns = if info.namespaced {
                ns.unwrap_or_default()
            } else {
                ""
            };
            check.check(None, &obj, ns)?;
        }
        if info.crd.is_some() {
            validate_custom(info, &mut obj)?;
        }
        if info.plural == "customresourcedefinitions" {
            super::crd::validate_crd(&obj)?;
        }
        let _service_writes = is_service(info).then(|| self.service_writes.lock());
        if info.crd.is_none() {
            super::defaults::apply(info, &mut obj);
            super::defaults::prepare_for_create(info, &mut obj);
            if is_service(info) {
                let in_use = self.allocations(ns.unwrap_or_default(), &name);
                super::services::allocate(&mut obj, None, &in_use)
                    .map_err(|causes| ApiError::invalid(&info.group, &info.kind, &name, causes))?;
            }
            check_builtin(info, &obj, None)?;
        }
        if let Tracking::Update(manager) = &tracking {
            track_update(None, &mut obj, info, manager, Endpoint::Main, &now);
        }
        let stored = to_storage(info, obj);
        let ns_key = if info.namespaced {
            ns.unwrap_or_default()
        } else {
            ""
        };
        let out = self
            .store
            .mutate(&info.gr(), ns_key, &name, |cur, _| match cur {
                Some(_) => Err(ApiError::already_exists(&info.group, &info.plural, &name)),
                None => Ok(Mutation::Put(stored)),
            })?;
        Ok(to_served(info, out.object))
    }

    pub(crate) fn get(&self, info: &ResourceInfo, ns: &str, name: &str) -> Result<Value, ApiError> {
        self.store
            .get(&info.gr(), ns, name)
            .map(|o| to_served(info, o))
            .ok_or_else(|| ApiError::not_found(&info.group, &info.plural, name))
    }

    /// The common read-modify-write of update and patch: `change` turns the stored
    /// object (at the served version) into the client's desired object.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn modify(
        &self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
        endpoint: Endpoint,
        require_rv: bool,
        tracking: Tracking,
        change: impl FnOnce(Value) -> Result<Value, ApiError>,
    ) -> Result<Value, ApiError> {
        let now = self.now();
        let escalation = self.escalation_check(info);
        let _service_writes = is_service(info).then(|| self.service_writes.lock());
        let in_use = is_service(info).then(|| self.allocations(ns, name));
        let out = self.store.mutate(&info.gr(), ns, name, |cur, _| {
            let Some(cur) = cur else {
                return Err(ApiError::not_found(&info.group, &info.plural, name));
            };
            let cur = to_served(info, cur);
            let mut desired = change(cur.clone())?;
            if endpoint == Endpoint::Status
                && matches!(tracking, Tracking::Update(_))
                && let Some(m) = desired.get_mut("metadata").and_then(Value::as_object_mut)
            {
                // A subresource write never sets managedFields (kube-apiserver keeps
                // the stored ones).
                m.remove("managedFields");
            }
            objects::check_type(info, &mut desired)?;
            check_identity(info, &desired, ns, name)?;
            if let Some(check) = &escalation {
                check.check(Some(&cur), &desired, ns)?;
            }
            if info.crd.is_some() {
                // Prune first so unknown fields alone do not count as a change.
                let _ = validate_and_prune(
                    info.schema.as_deref().unwrap_or(&Value::Null),
                    &mut desired,
                );
            } else if endpoint == Endpoint::Main {
                // Defaulted first, so leaving out a defaulted field is no change.
                super::defaults::apply(info, &mut desired);
                if let Some(in_use) = &in_use {
                    super::services::allocate(&mut desired, Some(&cur), in_use).map_err(
                        |causes| ApiError::invalid(&info.group, &info.kind, name, causes),
                    )?;
                }
            }
            let decision = prepare_update(info, &cur, desired, endpoint, require_rv)?;
            Ok(match decision {
                UpdateDecision::Unchanged(v) => Mutation::Unchanged(v),
                UpdateDecision::Store(mut v) => {
                    if info.crd.is_some() {
                        validate_custom(info, &mut v)?;
                    } else if endpoint == Endpoint::Main {
                        check_builtin(info, &v, Some(&cur))?;
                    }
                    if info.plural == "customresourcedefinitions" {
                        super::crd::validate_crd(&v)?;
                    }
                    if let Tracking::Update(manager) = &tracking {
                        track_update(Some(&cur), &mut v, info, manager, endpoint, &now);
                    }
                    Mutation::Put(to_storage(info, v))
                }
                UpdateDecision::Remove(v) => Mutation::Remove(to_storage(info, v)),
            })
        })?;
        Ok(to_served(info, out.object))
    }

    pub(crate) fn update(
        &self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
        body: Value,
        endpoint: Endpoint,
        manager: &str,
    ) -> Result<Value, ApiError> {
        // kube-apiserver decodes the body before anything else (on /status too).
        if let Some(e) = metadata::decode_error(info, &body) {
            return Err(e.undecodable(info));
        }
        let mut body = body;
        metadata::normalize_body(info, &mut body);
        let tracking = Tracking::Update(manager.to_string());
        self.modify(info, ns, name, endpoint, true, tracking, |_| Ok(body))
    }

    /// Patches an object (server-side apply goes to [`State::apply`]); returns it with
    /// the field-validation warnings of a JSON patch (whose unknown fields are found
    /// in the object it produces; the other kinds' bodies are checked before).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn patch(
        &self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
        kind: PatchKind,
        body: Value,
        endpoint: Endpoint,
        manager: &str,
        directive: Directive,
    ) -> Result<(Value, Vec<String>), ApiError> {
        if kind == PatchKind::Strategic && info.crd.is_some() {
            return Err(ApiError::unsupported_media_type(
                "application/strategic-merge-patch+json (not supported for custom resources)",
            ));
        }
        let tracking = Tracking::Update(manager.to_string());
        let mut warnings = Vec::new();
        let out = self.modify(info, ns, name, endpoint, false, tracking, |cur| {
            let api_version = info.api_version();
            let mut patched = apply_patch(kind, &cur, &body, (&api_version, &info.kind))?;
            // kube-apiserver decodes the patched object into the kind's type.
            if let Some(e) = metadata::decode_error(info, &patched) {
                return Err(e.unpatchable());
            }
            if kind == PatchKind::Json {
                let unknown = super::field_validation::take_unknown(info, &mut patched);
                warnings = super::field_validation::outcome(directive, &unknown, true)?;
            }
            metadata::normalize_body(info, &mut patched);
            Ok(patched)
        })?;
        Ok((out, warnings))
    }

    pub(crate) fn delete(
        &self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let now = self.now();
        let propagation = opts.propagation.unwrap_or(Propagation::Background);
        let out = self.store.mutate(&info.gr(), ns, name, |cur, _| {
            let Some(cur) = cur else {
                return Err(ApiError::not_found(&info.group, &info.plural, name));
            };
            check_preconditions(info, &cur, opts.preconditions.as_ref())?;
            Ok(match decide_delete(info, cur, propagation, &now) {
                DeleteDecision::Remove(v) => Mutation::Remove(v),
                DeleteDecision::Mark(v) => Mutation::Put(v),
                DeleteDecision::Unchanged(v) => Mutation::Unchanged(v),
            })
        })?;
        Ok(to_served(info, out.object))
    }

    /// Reads the autoscaling/v1 `Scale` of an object.
    pub(crate) fn get_scale(
        &self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
    ) -> Result<Value, ApiError> {
        let obj = self.get(info, ns, name)?;
        Ok(scale_of(info, &obj))
    }

    /// Writes a `Scale` (after `change` turns the current Scale into the desired one).
    pub(crate) fn update_scale(
        &self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
        change: impl FnOnce(Value) -> Result<Value, ApiError>,
    ) -> Result<Value, ApiError> {
        let Some(paths) = info.scale.clone() else {
            return Err(ApiError::path_not_found());
        };
        let out = self.modify(
            info,
            ns,
            name,
            Endpoint::Main,
            false,
            Tracking::None,
            |cur| {
                let scale = change(scale_of(info, &cur))?;
                if let Some(rv) = meta_str(&scale, "resourceVersion")
                    && Some(rv) != meta_str(&cur, "resourceVersion")
                {
                    return Err(ApiError::stale(&info.group, &info.plural, name));
                }
                let replicas = scale.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
                if !replicas.is_i64() || replicas.as_i64().is_some_and(|r| r < 0) {
                    return Err(ApiError::invalid(
                        "autoscaling",
                        "Scale",
                        name,
                        vec![FieldCause::invalid(
                            "spec.replicas",
                            &replicas,
                            "must be greater than or equal to 0",
                        )],
                    ));
                }
                let mut next = cur;
                set_path(&mut next, &paths.spec_replicas, replicas);
                Ok(next)
            },
        )?;
        Ok(scale_of(info, &out))
    }
}

/// Name and namespace are immutable; a body must name the object of its URL.
fn check_identity(info: &ResourceInfo, obj: &Value, ns: &str, name: &str) -> Result<(), ApiError> {
    match meta_str(obj, "name") {
        Some(n) if n != name => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        _ => {}
    }
    if info.namespaced
        && let Some(n) = meta_str(obj, "namespace")
        && n != ns
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(())
}

pub(crate) fn scale_of(info: &ResourceInfo, obj: &Value) -> Value {
    let paths = info
        .scale
        .clone()
        .unwrap_or_else(|| super::registry::ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: None,
        });
    let m = objects::meta(obj).cloned().unwrap_or_default();
    let mut meta = serde_json::Map::new();
    for f in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = m.get(f) {
            meta.insert(f.into(), v.clone());
        }
    }
    let selector = match &paths.label_selector {
        Some(p) => get_path(obj, p).and_then(Value::as_str).map(String::from),
        None => obj
            .pointer("/spec/selector")
            .and_then(super::selectors::LabelSelector::from_object)
            .map(|s| s.to_string_form()),
    };
    let mut status = json!({
        "replicas": get_path(obj, &paths.status_replicas).cloned().unwrap_or(json!(0)),
    });
    if let Some(s) = selector {
        status["selector"] = json!(s);
    }
    json!({
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": meta,
        "spec": {"replicas": get_path(obj, &paths.spec_replicas).cloned().unwrap_or(json!(0))},
        "status": status,
    })
}

pub(crate) type SharedState = Arc<State>;
