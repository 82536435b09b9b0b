//! HTTP: bearer-token authentication, path routing in kube-apiserver's URL layout,
//! and turning verb results and errors into responses.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, Request, State as AxumState};
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderMap, Method, StatusCode, header};
use serde_json::{Value, json};

use super::authn::{Identity, UserInfo};
use super::discovery;
use super::errors::{ApiError, FieldCause};
use super::list::{ListQuery, list_body};
use super::objects::Endpoint;
use super::openapi;
use super::patch::{PatchKind, apply_patch, parse_body};
use super::recorder::ApiCall;
use super::registry::ResourceInfo;
use super::state::{DeleteOptions, SharedState, Tracking};
use super::table;
use super::watch::{self, WatchParams};

/// Largest request body accepted: kube-apiserver's `MaxRequestBodyBytes` (3 MiB, twice
/// etcd's request limit because JSON is larger than the protobuf kept in etcd).
pub(crate) const MAX_BODY: usize = 3 * 1024 * 1024;
/// How much of an over-long body is read and dropped before giving up on the
/// connection: enough that a client still sending reads the 413 instead of a reset.
const DRAIN_LIMIT: usize = 16 * MAX_BODY;
/// The most watch events sent as one chunk.
const WATCH_BATCH: usize = 64;

/// Reads a request body of at most `limit` bytes; a longer one is 413
/// RequestEntityTooLarge, as kube-apiserver answers it.
async fn read_body(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    let mut stream = body.into_data_stream();
    let mut buf = bytes::BytesMut::new();
    let mut seen = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::bad_request(format!("reading body: {e}")))?;
        seen += chunk.len();
        if seen <= limit {
            buf.extend_from_slice(&chunk);
        } else if seen > DRAIN_LIMIT {
            break;
        }
    }
    if seen > limit {
        return Err(ApiError::request_entity_too_large(limit));
    }
    Ok(buf.freeze())
}

pub(crate) fn router(state: SharedState) -> Router {
    Router::new().fallback(handle).with_state(state)
}

fn respond(code: StatusCode, body: Bytes) -> Response {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .expect("status and static header are valid")
}

/// Server-side field validation of a write's body (`field_validation`): the fields the
/// kind does not declare are dropped; the warnings to send, or the refusal.
fn validate_fields(
    req: &ApiRequest,
    info: &ResourceInfo,
    body: &mut Value,
    patch: bool,
) -> Result<Vec<String>, ApiError> {
    use super::field_validation::{Directive, outcome, take_unknown};
    let directive = Directive::parse(req.param("fieldValidation"))?;
    let unknown = take_unknown(info, body);
    outcome(directive, &unknown, patch)
}

/// `response` with a `Warning: 299 - "<text>"` header per warning (kube-apiserver's
/// form, which kubectl prints as `Warning: <text>`).
fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let value = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
        if let Ok(v) = header::HeaderValue::from_str(&value) {
            response.headers_mut().append(header::WARNING, v);
        }
    }
    response
}

/// `/api` and `/apis` answer by the `Accept` header (aggregated discovery or not): caches
/// must keep them apart.
fn vary_accept(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::VARY, header::HeaderValue::from_static("Accept"));
    response
}

fn json_response(code: StatusCode, v: &Value) -> Response {
    respond(code, Bytes::from(v.to_string()))
}

pub(crate) fn error_response(e: &ApiError) -> Response {
    let code = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(code, &e.to_status())
}

async fn handle(AxumState(state): AxumState<SharedState>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    if matches!(path.as_str(), "/healthz" | "/livez" | "/readyz") {
        return Response::new(Body::from("ok"));
    }
    let identity = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| bearer_token(v.as_bytes()))
        .and_then(|presented| state.authn.authenticate(presented));
    let Some(identity) = identity else {
        return error_response(&ApiError::unauthorized());
    };
    let query: Vec<(String, String)> = Query::<Vec<(String, String)>>::try_from_uri(req.uri())
        .map(|q| q.0)
        .unwrap_or_default();
    let method = req.method().clone();
    let headers = req.headers().clone();
    let user = match &identity {
        Identity::Admin => super::recorder::admin_user(&headers),
        Identity::User(u) => u.name.clone(),
    };
    let call = super::recorder::attributes(user, &method, &path, &query);
    state.recorder.record(&call);
    if let Identity::User(u) = &identity
        && let Err(e) = authorize(&state, u, &call, &headers)
    {
        return error_response(&e);
    }
    let body = match read_body(req.into_body(), MAX_BODY).await {
        Ok(b) => b,
        Err(e) => return error_response(&e),
    };
    let req = ApiRequest {
        method,
        headers,
        query,
        body,
    };
    // API answers are JSON only (the OpenAPI documents negotiate their own forms): a
    // client that takes no JSON gets 406, never a body it cannot read.
    if !path.starts_with("/openapi")
        && !super::negotiation::accepts_json(req.header(header::ACCEPT))
    {
        return error_response(&super::negotiation::not_acceptable());
    }
    if req.method == Method::POST && path == SELF_SUBJECT_ACCESS_REVIEWS {
        return match req
            .json_body()
            .and_then(|review| self_subject_access_review(&state, &identity, &call.user, review))
        {
            Ok(review) => json_response(StatusCode::CREATED, &review),
            Err(e) => error_response(&e),
        };
    }
    if req.method == Method::POST && path == SELF_SUBJECT_RULES_REVIEWS {
        return match req
            .json_body()
            .and_then(|review| self_subject_rules_review(&state, &identity, &call.user, review))
        {
            Ok(review) => json_response(StatusCode::CREATED, &review),
            Err(e) => error_response(&e),
        };
    }
    if req.method == Method::POST && path == SELF_SUBJECT_REVIEWS {
        return json_response(
            StatusCode::CREATED,
            &self_subject_review(&identity, &call.user),
        );
    }
    let routed = match &identity {
        Identity::User(u) => super::rbac::as_requester(u, &call, || route(&state, &path, &req)),
        Identity::Admin => route(&state, &path, &req),
    };
    match routed {
        Ok(r) => r,
        Err(e) => error_response(&e),
    }
}

/// Where `kubectl auth can-i` asks what it may do.
const SELF_SUBJECT_ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
/// Where `kubectl auth can-i --list` asks for every rule it holds in a namespace.
const SELF_SUBJECT_RULES_REVIEWS: &str = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";
/// Where `kubectl auth whoami` asks who it is.
const SELF_SUBJECT_REVIEWS: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

/// The requester as RBAC sees it: a token-file user, or the server's own token
/// (`system:masters`, or whom it impersonates).
fn requester(identity: &Identity, user_name: &str) -> UserInfo {
    match identity {
        Identity::User(u) => u.clone(),
        Identity::Admin => UserInfo {
            name: user_name.to_string(),
            uid: String::new(),
            groups: vec![
                "system:masters".to_string(),
                super::authn::AUTHENTICATED.to_string(),
            ],
        },
    }
}

/// `POST .../selfsubjectrulesreviews`: every rule the requester holds in
/// `spec.namespace` (kube-apiserver requires the namespace).
fn self_subject_rules_review(
    state: &SharedState,
    identity: &Identity,
    user_name: &str,
    mut review: Value,
) -> Result<Value, ApiError> {
    let namespace = review
        .pointer("/spec/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if namespace.is_empty() {
        return Err(ApiError::invalid(
            "authorization.k8s.io",
            "SelfSubjectRulesReview",
            "",
            vec![FieldCause::required_message(
                "spec.namespace",
                "namespace is required",
            )],
        ));
    }
    let user = requester(identity, user_name);
    review["apiVersion"] = json!("authorization.k8s.io/v1");
    review["kind"] = json!("SelfSubjectRulesReview");
    review["status"] = state.rbac_policy().rules_review_status(&user, &namespace);
    Ok(review)
}

/// `POST .../selfsubjectreviews`: who the requester is.
fn self_subject_review(identity: &Identity, user_name: &str) -> Value {
    let user = requester(identity, user_name);
    let mut info = json!({"username": user.name, "groups": user.groups});
    if !user.uid.is_empty() {
        info["uid"] = json!(user.uid);
    }
    json!({
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": null},
        "status": {"userInfo": info},
    })
}

/// Authorizes a token-file user's request with RBAC. Such users cannot impersonate
/// (only the server's own token can).
fn authorize(
    state: &SharedState,
    user: &UserInfo,
    call: &ApiCall,
    headers: &HeaderMap,
) -> Result<(), ApiError> {
    let policy = state.rbac_policy();
    if let Some(target) = headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok())
    {
        let impersonate = ApiCall {
            verb: "impersonate".into(),
            group: String::new(),
            resource: "users".into(),
            subresource: String::new(),
            namespace: String::new(),
            name: target.to_string(),
            non_resource_path: String::new(),
            user: user.name.clone(),
        };
        return Err(super::rbac::forbidden(&impersonate));
    }
    if policy.allows(user, call) {
        Ok(())
    } else {
        Err(super::rbac::forbidden(call))
    }
}

/// `POST .../selfsubjectaccessreviews`: whether the requesting user may do what the
/// review's spec describes; the review comes back with its status filled in.
fn self_subject_access_review(
    state: &SharedState,
    identity: &Identity,
    user_name: &str,
    mut review: Value,
) -> Result<Value, ApiError> {
    let spec = review.get("spec").cloned().unwrap_or(Value::Null);
    let Some(call) = super::rbac::review_attributes(user_name, &spec) else {
        return Err(ApiError::invalid(
            "authorization.k8s.io",
            "SelfSubjectAccessReview",
            "",
            vec![FieldCause::required_message(
                "spec.resourceAttributes",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )],
        ));
    };
    let allowed = match identity {
        Identity::Admin => true,
        Identity::User(u) => state.rbac_policy().allows(u, &call),
    };
    review["apiVersion"] = json!("authorization.k8s.io/v1");
    review["kind"] = json!("SelfSubjectAccessReview");
    review["status"] = json!({"allowed": allowed});
    Ok(review)
}

/// The token of an `Authorization: Bearer <token>` header (the scheme is
/// case-insensitive, as kube-apiserver reads it).
fn bearer_token(header: &[u8]) -> Option<&[u8]> {
    let (scheme, token) = header.split_at_checked(7)?;
    scheme.eq_ignore_ascii_case(b"bearer ").then_some(token)
}

struct ApiRequest {
    method: Method,
    headers: HeaderMap,
    query: Vec<(String, String)>,
    body: Bytes,
}

impl ApiRequest {
    fn param(&self, k: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }
    fn header(&self, k: header::HeaderName) -> &str {
        self.headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }
    /// The request's `fieldManager`, else kube-apiserver's default: the user agent up to
    /// its first `/` (`unknown` without one).
    fn field_manager(&self) -> String {
        if let Some(m) = self.param("fieldManager").filter(|m| !m.is_empty()) {
            return m.to_string();
        }
        let ua = self.header(header::USER_AGENT);
        match ua.split('/').next().map(str::trim) {
            Some(prefix) if !prefix.is_empty() => prefix.chars().take(128).collect(),
            _ => "unknown".to_string(),
        }
    }
    fn wants_metadata(&self) -> bool {
        super::partial::wanted(self.header(header::ACCEPT))
    }

    fn wants_table(&self) -> bool {
        self.header(header::ACCEPT).contains("as=Table")
    }
    fn json_body(&self) -> Result<Value, ApiError> {
        let ct = self.header(header::CONTENT_TYPE);
        if ct.contains("yaml") {
            let text = std::str::from_utf8(&self.body)
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
            return serde_saphyr::from_str(text)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")));
        }
        if ct.contains("protobuf") {
            return super::protobuf::decode(&self.body);
        }
        serde_json::from_slice(&self.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding body: {e}")))
    }
}

fn route(state: &SharedState, path: &str, req: &ApiRequest) -> Result<Response, ApiError> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let get_only = |v: Option<Value>| -> Result<Response, ApiError> {
        if req.method != Method::GET {
            return Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({path})"
            )));
        }
        v.map(|v| json_response(StatusCode::OK, &v))
            .ok_or_else(ApiError::path_not_found)
    };
    match segs.as_slice() {
        [] => get_only(Some(
            json!({"paths": ["/api", "/api/v1", "/apis", "/openapi/v2", "/openapi/v3", "/version"]}),
        )),
        ["version"] => get_only(Some(discovery::version())),
        ["api"] | ["apis"] => {
            let core = segs == ["api"];
            let Some(version) = discovery::aggregated_version(req.header(header::ACCEPT)) else {
                return get_only(Some(if core {
                    discovery::core_versions(&state.address)
                } else {
                    discovery::group_list(&state.registry)
                }))
                .map(vary_accept);
            };
            let mut response =
                get_only(Some(discovery::aggregated(&state.registry, core, version)))?;
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                discovery::aggregated_content_type(version)
                    .parse()
                    .expect("a valid header value"),
            );
            Ok(vary_accept(response))
        }
        ["openapi", "v2"] => {
            if req.header(header::ACCEPT).contains("protobuf") {
                let bytes = openapi::v2_protobuf(&state.registry);
                return Ok(Response::builder()
                    .status(StatusCode::OK)
                    .header(header::CONTENT_TYPE, "application/octet-stream")
                    .body(Body::from(bytes))
                    .expect("static header is valid"));
            }
            get_only(Some(openapi::v2(&state.registry)))
        }
        ["openapi", "v3"] => get_only(Some(openapi::v3_index(&state.registry))),
        ["openapi", "v3", rest @ ..] => {
            get_only(openapi::v3_group_version(&state.registry, &rest.join("/")))
        }
        ["api", v] => get_only(discovery::resource_list(&state.registry, "", v)),
        ["api", v, rest @ ..] => resource(state, "", v, rest, req),
        ["apis", g] => get_only(discovery::group(&state.registry, g)),
        ["apis", g, v] => get_only(discovery::resource_list(&state.registry, g, v)),
        ["apis", g, v, rest @ ..] => resource(state, g, v, rest, req),
        _ => Err(ApiError::path_not_found()),
    }
}

/// Whether a write asks for kube-apiserver's `dryRun=All` (in the query, or for a delete
/// also in its `DeleteOptions` body). Any other value is refused before anything else,
/// as kube-apiserver's options validation does.
fn dry_run_requested(req: &ApiRequest) -> Result<bool, ApiError> {
    let options_kind = match req.method {
        Method::POST => "CreateOptions",
        Method::PUT => "UpdateOptions",
        Method::PATCH => "PatchOptions",
        Method::DELETE => "DeleteOptions",
        _ => return Ok(false),
    };
    let mut values: Vec<String> = req
        .query
        .iter()
        .filter(|(k, _)| k == "dryRun")
        .map(|(_, v)| v.clone())
        .collect();
    if req.method == Method::DELETE
        && !req.body.is_empty()
        && !req.header(header::CONTENT_TYPE).contains("protobuf")
        && let Ok(body) = serde_json::from_slice::<Value>(&req.body)
        && let Some(given) = body.get("dryRun").and_then(Value::as_array)
    {
        values.extend(given.iter().map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }));
    }
    if values.iter().any(|v| v != "All") {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            options_kind,
            "",
            vec![FieldCause::not_supported(
                "dryRun",
                &json!(values),
                &[json!("All")],
            )],
        ));
    }
    Ok(!values.is_empty())
}

/// `[namespaces/<ns>/]<resource>[/<name>[/<subresource>]]`; a dry-run write runs the
/// same verb with nothing stored.
fn resource(
    state: &SharedState,
    group: &str,
    version: &str,
    rest: &[&str],
    req: &ApiRequest,
) -> Result<Response, ApiError> {
    if dry_run_requested(req)? {
        return super::store::dry_run(|| serve_resource(state, group, version, rest, req));
    }
    serve_resource(state, group, version, rest, req)
}

fn serve_resource(
    state: &SharedState,
    group: &str,
    version: &str,
    rest: &[&str],
    req: &ApiRequest,
) -> Result<Response, ApiError> {
    let (ns, resource, name, sub) = match rest {
        ["namespaces", ns, r, tail @ ..]
            if !(tail.is_empty() && matches!(*r, "status" | "finalize")) =>
        {
            (Some(*ns), *r, tail.first().copied(), tail.get(1).copied())
        }
        [r, tail @ ..] => (None, *r, tail.first().copied(), tail.get(1).copied()),
        [] => return Err(ApiError::path_not_found()),
    };
    if rest.len() > 5 || (ns.is_none() && rest.len() > 3) {
        return Err(ApiError::path_not_found());
    }
    let info = state
        .registry
        .lookup(group, version, resource)
        .ok_or_else(ApiError::path_not_found)?;
    if ns.is_some() && !info.namespaced {
        return Err(ApiError::path_not_found());
    }
    match sub {
        None => {}
        Some("status") if info.status => {}
        Some("scale") if info.scale.is_some() => {}
        Some("finalize") if info.plural == "namespaces" => {}
        Some(_) => return Err(ApiError::path_not_found()),
    }
    let ns_key = ns.unwrap_or_default();
    let endpoint = if sub == Some("status") {
        Endpoint::Status
    } else {
        Endpoint::Main
    };
    match (&req.method, name) {
        (&Method::GET, None) => {
            let q = ListQuery::parse(&info, &req.query)?;
            if matches!(req.param("watch"), Some("true" | "1")) {
                let params = WatchParams::parse(q, &req.query);
                let rx = watch::start(state.clone(), info.clone(), ns.map(String::from), params);
                let table = req.wants_table();
                let metadata = req.wants_metadata();
                let info2 = info.clone();
                let clock = state.clock.clone();
                // The events ready at once go out as one chunk: a burst of writes
                // costs one socket write (and one TLS record) per batch, not per event.
                let stream = tokio_stream::wrappers::ReceiverStream::new(rx)
                    .map(move |chunk| {
                        if table {
                            table::watch_line(&info2, chunk, &clock.now())
                        } else if metadata {
                            super::partial::watch_line(chunk)
                        } else {
                            chunk
                        }
                    })
                    .ready_chunks(WATCH_BATCH)
                    .map(|lines| {
                        Ok::<_, Infallible>(match <[Bytes; 1]>::try_from(lines) {
                            Ok([one]) => one,
                            Err(lines) => Bytes::from(lines.concat()),
                        })
                    });
                return Ok(Response::builder()
                    .status(StatusCode::OK)
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Body::from_stream(stream))
                    .expect("static header is valid"));
            }
            let page = state.list(&info, ns, &q)?;
            if req.wants_table() {
                return Ok(json_response(
                    StatusCode::OK,
                    &table::list_table(&info, &page, &state.now_time()),
                ));
            }
            if req.wants_metadata() {
                return Ok(json_response(StatusCode::OK, &super::partial::list(&page)));
            }
            Ok(respond(StatusCode::OK, list_body(&info, &page)))
        }
        (&Method::GET, Some(name)) => {
            if sub == Some("scale") {
                return Ok(json_response(
                    StatusCode::OK,
                    &state.get_scale(&info, ns_key, name)?,
                ));
            }
            let obj = state.get(&info, ns_key, name)?;
            if req.wants_table() {
                return Ok(json_response(
                    StatusCode::OK,
                    &table::object_table(&info, &obj, &state.now_time()),
                ));
            }
            if req.wants_metadata() {
                return Ok(json_response(StatusCode::OK, &super::partial::object(&obj)));
            }
            Ok(json_response(StatusCode::OK, &obj))
        }
        (&Method::POST, None) => {
            if info.namespaced && ns.is_none() {
                return Err(ApiError::path_not_found());
            }
            let tracking = Tracking::Update(req.field_manager());
            let mut body = req.json_body()?;
            let warnings = validate_fields(req, &info, &mut body, false)?;
            let created = state.create(&info, ns, body, tracking)?;
            Ok(with_warnings(
                json_response(StatusCode::CREATED, &created),
                &warnings,
            ))
        }
        (&Method::PUT, Some(name)) => {
            let mut body = req.json_body()?;
            let warnings = match sub {
                None | Some("status") => validate_fields(req, &info, &mut body, false)?,
                _ => Vec::new(),
            };
            let out = match sub {
                Some("scale") => state.update_scale(&info, ns_key, name, |_| Ok(body))?,
                Some("finalize") => finalize_namespace(state, &info, name, body)?,
                _ => state.update(&info, ns_key, name, body, endpoint, &req.field_manager())?,
            };
            Ok(with_warnings(
                json_response(StatusCode::OK, &out),
                &warnings,
            ))
        }
        (&Method::PATCH, Some(name)) => {
            let kind = PatchKind::from_content_type(req.header(header::CONTENT_TYPE))?;
            if kind == PatchKind::Apply && req.param("fieldManager").is_none_or(str::is_empty) {
                return Err(ApiError::bad_request(
                    "fieldManager is required for apply requests",
                ));
            }
            let force = match req.param("force") {
                None => false,
                Some("true" | "1") => true,
                Some("false" | "0") => false,
                Some(other) => {
                    return Err(ApiError::bad_request(format!(
                        "invalid value {other:?} for the force parameter"
                    )));
                }
            };
            if force && kind != PatchKind::Apply {
                return Err(ApiError::bad_request(
                    "force flag must only be set for apply patches",
                ));
            }
            let mut body = parse_body(kind, &req.body)?;
            let directive =
                super::field_validation::Directive::parse(req.param("fieldValidation"))?;
            let mut warnings = match (kind, sub) {
                (PatchKind::Merge | PatchKind::Strategic, None | Some("status")) => {
                    validate_fields(req, &info, &mut body, true)?
                }
                _ => Vec::new(),
            };
            if sub == Some("scale") {
                let out = state.update_scale(&info, ns_key, name, |cur| {
                    apply_patch(kind, &cur, &body, ("autoscaling/v1", "Scale"))
                })?;
                return Ok(json_response(StatusCode::OK, &out));
            }
            let manager = req.field_manager();
            let (out, created) = if kind == PatchKind::Apply {
                state.apply(&info, ns_key, name, body, endpoint, &manager, force)?
            } else {
                let (out, more) = state.patch(
                    &info, ns_key, name, kind, body, endpoint, &manager, directive,
                )?;
                warnings.extend(more);
                (out, false)
            };
            let code = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(with_warnings(json_response(code, &out), &warnings))
        }
        (&Method::DELETE, Some(name)) => {
            let opts = delete_options(req)?;
            Ok(json_response(
                StatusCode::OK,
                &state.delete(&info, ns_key, name, &opts)?,
            ))
        }
        (&Method::DELETE, None) => {
            let opts = delete_options(req)?;
            let q = ListQuery::parse(&info, &req.query)?;
            let q = ListQuery {
                limit: None,
                continue_token: None,
                ..q
            };
            let page = state.list(&info, ns, &q)?;
            let mut deleted = Vec::new();
            for item in &page.items {
                let Ok(obj) = serde_json::from_slice::<Value>(item) else {
                    continue;
                };
                let name = super::objects::meta_str(&obj, "name")
                    .unwrap_or_default()
                    .to_string();
                let obj_ns = super::objects::meta_str(&obj, "namespace")
                    .unwrap_or_default()
                    .to_string();
                match state.delete(&info, &obj_ns, &name, &opts) {
                    Ok(v) => deleted.push(Bytes::from(v.to_string())),
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            let page = super::list::ListPage {
                items: deleted,
                resource_version: state.store.current_rv(),
                continue_token: None,
                remaining: None,
            };
            Ok(respond(StatusCode::OK, list_body(&info, &page)))
        }
        _ => Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({})",
            super::errors::qualified(&info.group, &info.plural)
        ))),
    }
}

fn delete_options(req: &ApiRequest) -> Result<DeleteOptions, ApiError> {
    // kubectl sends DeleteOptions of built-in kinds as protobuf, which this server does
    // not decode: such a body counts as default options (the query still applies).
    let body = if req.body.is_empty() || req.header(header::CONTENT_TYPE).contains("protobuf") {
        None
    } else {
        Some(req.json_body()?)
    };
    DeleteOptions::parse(body.as_ref(), req.param("propagationPolicy"))
}

/// `PUT /api/v1/namespaces/<name>/finalize`: only `spec.finalizers` changes.
fn finalize_namespace(
    state: &SharedState,
    info: &Arc<ResourceInfo>,
    name: &str,
    body: Value,
) -> Result<Value, ApiError> {
    let finalizers = body
        .pointer("/spec/finalizers")
        .cloned()
        .unwrap_or(json!([]));
    state.get(info, "", name)?;
    state.internal_update(&info.gr(), "", name, |obj| {
        if obj.pointer("/spec/finalizers") == Some(&finalizers) {
            return false;
        }
        obj["spec"]["finalizers"] = finalizers.clone();
        true
    });
    state.get(info, "", name).or(Ok(body))
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    #[tokio::test]
    async fn bodies_over_the_limit_are_413() {
        use super::{Body, read_body};
        let ok = read_body(Body::from(vec![b'x'; 10]), 10).await.unwrap();
        assert_eq!(ok.len(), 10);
        let e = read_body(Body::from(vec![b'x'; 11]), 10).await.unwrap_err();
        assert_eq!((e.code, e.reason), (413, "RequestEntityTooLarge"));
        assert_eq!(e.message, "Request entity too large: limit is 10");
    }

    #[test]
    fn bearer_tokens_are_read_from_the_header() {
        assert_eq!(bearer_token(b"bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"Basic abc"), None);
        assert_eq!(bearer_token(b"Bearer"), None);
    }
}
