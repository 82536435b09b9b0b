//! Server-side apply requests (`PATCH` with `application/apply-patch+yaml`): checks the
//! configuration, restricts it to what the endpoint may change, and runs
//! [`managed::apply`] inside the store's read-modify-write, creating the object when it
//! does not exist.
//!
//! Endpoint rules, as kube-apiserver's: on the main endpoint of a kind with a status
//! subresource the configuration's `status` is ignored; on `/status` only `status` is
//! applied (the entry is recorded with `subresource: status`), and a missing object is
//! not created.

use serde_json::{Map, Value, json};

use super::errors::ApiError;
use super::managed::{self, ApplyError, Writer, conflict_message};
use super::objects::{self, Endpoint, check_type};
use super::registry::ResourceInfo;
use super::shape::Shape;
use super::state::{State, Tracking};

impl ApiError {
    /// An apply that would take fields from other managers (409, reason Conflict, one
    /// `FieldManagerConflict` cause per field).
    pub(crate) fn apply_conflict(conflicts: &[managed::Conflict]) -> Self {
        let causes: Vec<Value> = conflicts
            .iter()
            .map(|c| {
                json!({
                    "reason": "FieldManagerConflict",
                    "message": format!("conflict with {}", c.manager),
                    "field": super::fieldset::display_path(&c.path),
                })
            })
            .collect();
        ApiError {
            code: 409,
            reason: "Conflict",
            message: conflict_message(conflicts),
            details: Some(json!({"causes": causes})),
        }
    }
}

fn to_api_error(e: ApplyError) -> ApiError {
    match e {
        ApplyError::Conflicts(c) => ApiError::apply_conflict(&c),
        ApplyError::Invalid(why) => {
            ApiError::bad_request(format!("failed to create typed patch object: {why}"))
        }
    }
}

/// The part of an applied configuration an endpoint applies.
fn restrict(info: &ResourceInfo, mut config: Value, endpoint: Endpoint) -> Value {
    let Some(map) = config.as_object_mut() else {
        return config;
    };
    match endpoint {
        Endpoint::Main if info.status => {
            map.remove("status");
        }
        Endpoint::Main => {}
        Endpoint::Status => {
            let mut kept = Map::new();
            for k in ["apiVersion", "kind", "status"] {
                if let Some(v) = map.remove(k) {
                    kept.insert(k.into(), v);
                }
            }
            if let Some(meta) = objects::meta(&config) {
                let ident: Map<String, Value> = ["name", "namespace"]
                    .iter()
                    .filter_map(|k| meta.get(*k).map(|v| (k.to_string(), v.clone())))
                    .collect();
                kept.insert("metadata".into(), Value::Object(ident));
            }
            return Value::Object(kept);
        }
    }
    config
}

impl State {
    /// Applies `body` for `manager`; returns the object and whether it was created.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn apply(
        &self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
        body: Value,
        endpoint: Endpoint,
        manager: &str,
        force: bool,
    ) -> Result<(Value, bool), ApiError> {
        if body.get("apiVersion").is_none() || body.get("kind").is_none() {
            return Err(ApiError::bad_request(
                "apply patches must set apiVersion and kind",
            ));
        }
        let mut config = body;
        check_type(info, &mut config)?;
        if let Some(e) = super::metadata::decode_error(info, &config) {
            return Err(e.unappliable(info, ns, name));
        }
        if objects::meta(&config)
            .and_then(|m| m.get("managedFields"))
            .is_some_and(|v| !v.is_null())
        {
            return Err(ApiError::bad_request("metadata.managedFields must be nil"));
        }
        // A field the kind does not declare cannot be typed: kube-apiserver's field
        // manager fails the apply, whatever fieldValidation says.
        if let Some(path) = super::field_validation::take_unknown(info, &mut config.clone())
            .into_iter()
            .next()
        {
            return Err(ApiError::internal_unknown(format!(
                "failed to create typed patch object ({ns}/{name}; {}/{}, Kind={}): .{path}: field not declared in schema",
                info.group, info.version, info.kind
            )));
        }
        let mut config = restrict(info, config, endpoint);
        objects::meta_mut(&mut config).insert("name".into(), json!(name));
        let shape = Shape::root(&info.kind, info.schema.as_deref());
        let api_version = info.api_version();
        let now = self.now();
        let writer = Writer {
            manager,
            subresource: (endpoint == Endpoint::Status).then_some("status"),
            api_version: &api_version,
            now: &now,
        };
        if endpoint == Endpoint::Main && self.store.deleting(&info.gr(), ns, name).is_none() {
            let obj =
                managed::apply(&json!({}), &config, shape, &writer, force).map_err(to_api_error)?;
            let ns_opt = (!ns.is_empty()).then_some(ns);
            match self.create(info, ns_opt, obj, Tracking::Given) {
                Ok(created) => return Ok((created, true)),
                // Lost a race with another creator: apply to what is there now.
                Err(e) if e.reason == "AlreadyExists" => {}
                Err(e) => return Err(e),
            }
        }
        let out = self.modify(info, ns, name, endpoint, false, Tracking::Given, |cur| {
            managed::apply(&cur, &config, shape, &writer, force).map_err(to_api_error)
        })?;
        Ok((out, false))
    }
}
