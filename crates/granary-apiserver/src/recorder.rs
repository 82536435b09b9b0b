//! An opt-in log of the API calls the server answered, in the terms RBAC authorizes
//! (user, verb, API group, resource, subresource, namespace, name). Tests turn it on with
//! [`EmbeddedServer::record_requests`](super::EmbeddedServer::record_requests) and check
//! the calls a controller made against the roles it is deployed with.
//!
//! The user is the `Impersonate-User` header when the client sends one (a kubeconfig's
//! `as:`), so one server can tell several controllers apart; the server does not
//! authorize it, it only records it. Requests without it are recorded as
//! [`ADMIN_USER`].

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use http::{HeaderMap, Method};

/// The user recorded for requests that impersonate nobody (the server's own token).
pub const ADMIN_USER: &str = "admin";

/// One authenticated request, as an RBAC authorizer sees it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ApiCall {
    pub user: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: String,
    /// The API group (`""` for the core group).
    pub group: String,
    /// The plural resource name; empty for a non-resource URL.
    pub resource: String,
    /// `status`, `scale`, `finalize`, or empty.
    pub subresource: String,
    /// Empty for cluster-scoped requests (and for lists across all namespaces).
    pub namespace: String,
    /// The object's name; empty for collections.
    pub name: String,
    /// For non-resource URLs (discovery, OpenAPI, `/version`): the path.
    pub non_resource_path: String,
}

/// The log; disabled (and empty) until [`Recorder::enable`].
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    enabled: AtomicBool,
    calls: Mutex<Vec<ApiCall>>,
}

impl Recorder {
    pub(crate) fn enable(&self) {
        self.enabled.store(true, Ordering::SeqCst);
    }

    /// Records a request (when enabled).
    pub(crate) fn record(&self, call: &ApiCall) {
        if !self.enabled.load(Ordering::Relaxed) {
            return;
        }
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(call.clone());
    }

    /// Everything recorded so far, in arrival order, leaving the log empty.
    pub(crate) fn take(&self) -> Vec<ApiCall> {
        std::mem::take(&mut *self.calls.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Everything recorded so far, in arrival order.
    pub(crate) fn calls(&self) -> Vec<ApiCall> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The user a request of the server's own token acts as: the `Impersonate-User` header
/// when sent, else [`ADMIN_USER`].
pub(crate) fn admin_user(headers: &HeaderMap) -> String {
    headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok())
        .unwrap_or(ADMIN_USER)
        .to_string()
}

/// A request of `user` in the terms RBAC authorizes.
pub(crate) fn attributes(
    user: String,
    method: &Method,
    path: &str,
    query: &[(String, String)],
) -> ApiCall {
    let watch = query
        .iter()
        .any(|(k, v)| k == "watch" && matches!(v.as_str(), "true" | "1"));
    let mut call = describe(user, method, path, watch);
    // As kube-apiserver's RequestInfo: a list or watch selecting one object by
    // `metadata.name` is about that object.
    if call.name.is_empty() && matches!(call.verb.as_str(), "list" | "watch") {
        let by_name = query
            .iter()
            .filter(|(k, _)| k == "fieldSelector")
            .find_map(|(_, v)| v.strip_prefix("metadata.name="))
            .filter(|n| !n.is_empty() && !n.contains(','));
        if let Some(name) = by_name {
            call.name = name.to_string();
        }
    }
    call
}

/// Maps a request to its RBAC attributes, following kube-apiserver's URL layout:
/// `/api/v1/...` and `/apis/<group>/<version>/...`, then
/// `[namespaces/<ns>/]<resource>[/<name>[/<subresource>]]`.
fn describe(user: String, method: &Method, path: &str, watch: bool) -> ApiCall {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let rest = match segs.as_slice() {
        ["api", _, rest @ ..] if !rest.is_empty() => Some(("", rest)),
        ["apis", g, _, rest @ ..] if !rest.is_empty() => Some((*g, rest)),
        _ => None,
    };
    let Some((group, rest)) = rest else {
        return ApiCall {
            user,
            verb: method.as_str().to_lowercase(),
            group: String::new(),
            resource: String::new(),
            subresource: String::new(),
            namespace: String::new(),
            name: String::new(),
            non_resource_path: path.to_string(),
        };
    };
    let (namespace, resource, name, sub) = match rest {
        ["namespaces", ns, r, tail @ ..]
            if !(tail.is_empty() && matches!(*r, "status" | "finalize")) =>
        {
            (*ns, *r, tail.first().copied(), tail.get(1).copied())
        }
        [r, tail @ ..] => ("", *r, tail.first().copied(), tail.get(1).copied()),
        [] => ("", "", None, None),
    };
    // A namespace's own requests carry its name as the namespace (as kube-apiserver
    // does), so a Role in it could grant them; cluster RBAC still applies.
    let namespace = if resource == "namespaces" {
        name.unwrap_or_default()
    } else {
        namespace
    };
    let verb = match (method, name.is_some()) {
        (&Method::GET, false) if watch => "watch",
        (&Method::GET, false) => "list",
        (&Method::GET, true) if watch => "watch",
        (&Method::GET, true) => "get",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, false) => "deletecollection",
        (&Method::DELETE, true) => "delete",
        _ => "unknown",
    };
    ApiCall {
        user,
        verb: verb.to_string(),
        group: group.to_string(),
        resource: resource.to_string(),
        subresource: sub.unwrap_or_default().to_string(),
        namespace: namespace.to_string(),
        name: name.unwrap_or_default().to_string(),
        non_resource_path: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(
        method: Method,
        path: &str,
        watch: bool,
    ) -> (String, String, String, String, String, String) {
        let c = describe("u".into(), &method, path, watch);
        (
            c.verb,
            c.group,
            c.resource,
            c.subresource,
            c.namespace,
            c.name,
        )
    }

    fn t(
        v: &str,
        g: &str,
        r: &str,
        s: &str,
        ns: &str,
        n: &str,
    ) -> (String, String, String, String, String, String) {
        (v.into(), g.into(), r.into(), s.into(), ns.into(), n.into())
    }

    #[test]
    fn requests_map_to_rbac_attributes() {
        assert_eq!(
            call(Method::GET, "/api/v1/namespaces/garden/secrets/x", false),
            t("get", "", "secrets", "", "garden", "x")
        );
        assert_eq!(
            call(
                Method::GET,
                "/apis/core.gardener.cloud/v1beta1/backupentries",
                true
            ),
            t("watch", "core.gardener.cloud", "backupentries", "", "", "")
        );
        assert_eq!(
            call(
                Method::GET,
                "/apis/core.gardener.cloud/v1beta1/namespaces/p/backupentries",
                false
            ),
            t("list", "core.gardener.cloud", "backupentries", "", "p", "")
        );
        assert_eq!(
            call(
                Method::PATCH,
                "/apis/extensions.gardener.cloud/v1alpha1/backupbuckets/b/status",
                false
            ),
            t(
                "patch",
                "extensions.gardener.cloud",
                "backupbuckets",
                "status",
                "",
                "b"
            )
        );
        assert_eq!(
            call(
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/garden/leases/l",
                false
            ),
            t("update", "coordination.k8s.io", "leases", "", "garden", "l")
        );
        assert_eq!(
            call(Method::POST, "/api/v1/namespaces", false),
            t("create", "", "namespaces", "", "", "")
        );
        assert_eq!(
            call(Method::GET, "/api/v1/namespaces/garden", false),
            t("get", "", "namespaces", "", "garden", "garden")
        );
        assert_eq!(
            call(Method::PUT, "/api/v1/namespaces/garden/finalize", false),
            t("update", "", "namespaces", "finalize", "garden", "garden")
        );
        assert_eq!(
            call(Method::DELETE, "/api/v1/namespaces/a/secrets", false),
            t("deletecollection", "", "secrets", "", "a", "")
        );
        let discovery = describe("u".into(), &Method::GET, "/apis/apps/v1", false);
        assert_eq!(discovery.non_resource_path, "/apis/apps/v1");
        assert!(discovery.resource.is_empty());
    }

    #[test]
    fn disabled_records_nothing_and_the_user_comes_from_impersonation() {
        let r = Recorder::default();
        let mut headers = HeaderMap::new();
        let secrets = |headers: &HeaderMap, query: &[(String, String)]| {
            attributes(admin_user(headers), &Method::GET, "/api/v1/secrets", query)
        };
        r.record(&secrets(&headers, &[]));
        assert!(r.calls().is_empty());
        r.enable();
        r.record(&secrets(&headers, &[]));
        headers.insert(
            "impersonate-user",
            "system:serviceaccount:a:b".parse().expect("valid header"),
        );
        r.record(&secrets(&headers, &[("watch".into(), "1".into())]));
        let calls = r.calls();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].user, ADMIN_USER);
        assert_eq!(calls[1].user, "system:serviceaccount:a:b");
        assert_eq!(calls[1].verb, "watch");
    }
}
