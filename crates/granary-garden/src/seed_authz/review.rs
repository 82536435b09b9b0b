//! The wire forms of the webhook: kube-apiserver's `SubjectAccessReview`
//! (authorization.k8s.io/v1) in and out of [`Attributes`]/[`Decision`], and the
//! `AdmissionReview` (admission.k8s.io/v1) in and out of [`WriteRequest`]/[`Admission`].

use k8s_openapi::api::authorization::v1::{SubjectAccessReview, SubjectAccessReviewStatus};
use serde_json::{Value, json};

use crate::seed_authz::admission::{Admission, WriteRequest};
use crate::seed_authz::decision::{Attributes, Decision, Requirement, ResourceRequest};

/// The attributes a review asks about.
pub fn attributes(review: &SubjectAccessReview) -> Attributes {
    let spec = &review.spec;
    let resource = spec.resource_attributes.as_ref().map(|r| {
        let s = |v: &Option<String>| v.clone().unwrap_or_default();
        ResourceRequest {
            verb: s(&r.verb),
            group: s(&r.group),
            resource: s(&r.resource),
            subresource: s(&r.subresource),
            namespace: s(&r.namespace),
            name: s(&r.name),
            label_selector: r.label_selector.as_ref().map(|l| {
                match (&l.requirements, &l.raw_selector) {
                    (Some(reqs), _) => reqs
                        .iter()
                        .map(|q| Requirement {
                            key: q.key.clone(),
                            operator: q.operator.clone(),
                            values: q.values.clone().unwrap_or_default(),
                        })
                        .collect(),
                    (None, Some(raw)) => parse_selector(raw),
                    (None, None) => Vec::new(),
                }
            }),
            field_selector: r.field_selector.as_ref().map(|f| {
                match (&f.requirements, &f.raw_selector) {
                    (Some(reqs), _) => reqs
                        .iter()
                        .map(|q| Requirement {
                            key: q.key.clone(),
                            operator: q.operator.clone(),
                            values: q.values.clone().unwrap_or_default(),
                        })
                        .collect(),
                    (None, Some(raw)) => parse_selector(raw),
                    (None, None) => Vec::new(),
                }
            }),
        }
    });
    Attributes {
        user: spec.user.clone().unwrap_or_default(),
        groups: spec.groups.clone().unwrap_or_default(),
        resource,
    }
}

/// The review with `decision` as its status.
pub fn answer(mut review: SubjectAccessReview, decision: &Decision) -> SubjectAccessReview {
    review.status = Some(match decision {
        Decision::Allow => SubjectAccessReviewStatus {
            allowed: true,
            ..SubjectAccessReviewStatus::default()
        },
        Decision::Deny(reason) => SubjectAccessReviewStatus {
            allowed: false,
            denied: Some(true),
            reason: Some(reason.clone()),
            ..SubjectAccessReviewStatus::default()
        },
        Decision::NoOpinion => SubjectAccessReviewStatus::default(),
    });
    review
}

/// A review answered with no opinion and an evaluation error (the caches are not
/// filled yet): kube-apiserver goes on to the next authorizer, or applies the failure
/// policy of a structured authorization configuration.
pub fn unanswerable(mut review: SubjectAccessReview, why: &str) -> SubjectAccessReview {
    review.status = Some(SubjectAccessReviewStatus {
        evaluation_error: Some(why.to_string()),
        ..SubjectAccessReviewStatus::default()
    });
    review
}

/// Requirements of a selector written as text (`k=v`, `k==v`, `k!=v`, `k in (a,b)`,
/// `k notin (a)`, `k`, `!k`); an unreadable one yields a requirement that pins nothing.
fn parse_selector(raw: &str) -> Vec<Requirement> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in raw.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&raw[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&raw[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(parse_requirement)
        .collect()
}

/// The values of a set written `(a,b)`.
fn value_set(rest: &str) -> Option<Vec<&str>> {
    let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(inner.split(',').collect())
}

fn parse_requirement(part: &str) -> Requirement {
    let req = |key: &str, operator: &str, values: Vec<&str>| Requirement {
        key: key.trim().to_string(),
        operator: operator.to_string(),
        values: values.into_iter().map(|v| v.trim().to_string()).collect(),
    };
    if let Some((k, v)) = part.split_once("!=") {
        return req(k, "NotIn", vec![v]);
    }
    if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
        return req(k, "In", vec![v]);
    }
    if let Some((k, rest)) = part.split_once(" notin ") {
        return req(k, "NotIn", value_set(rest).unwrap_or_default());
    }
    if let Some((k, rest)) = part.split_once(" in ") {
        return match value_set(rest) {
            Some(values) => req(k, "In", values),
            None => req(k, "Unreadable", vec![]),
        };
    }
    match part.strip_prefix('!') {
        Some(k) => req(k, "DoesNotExist", vec![]),
        None => req(part, "Exists", vec![]),
    }
}

/// An AdmissionReview's request: its uid and the write it describes.
pub fn write_request(review: &Value) -> Option<(String, WriteRequest)> {
    let r = review.get("request")?;
    let s = |path: &str| {
        r.pointer(path)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let object = |key: &str| r.get(key).filter(|v| !v.is_null()).cloned();
    let uid = s("/uid");
    if uid.is_empty() {
        return None;
    }
    let groups = r
        .pointer("/userInfo/groups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|g| g.as_str().map(String::from))
        .collect();
    Some((
        uid,
        WriteRequest {
            user: s("/userInfo/username"),
            groups,
            operation: s("/operation"),
            group: s("/resource/group"),
            resource: s("/resource/resource"),
            subresource: s("/subResource"),
            namespace: s("/namespace"),
            name: s("/name"),
            object: object("object"),
            old_object: object("oldObject"),
        },
    ))
}

/// The AdmissionReview answering request `uid`.
pub fn admission_response(uid: &str, admission: &Admission) -> Value {
    let response = match admission {
        Admission::Allowed => json!({"uid": uid, "allowed": true}),
        Admission::Denied(message) => json!({
            "uid": uid,
            "allowed": false,
            "status": {"code": 403, "reason": "Forbidden", "message": message},
        }),
    };
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_review_from_kube_apiserver_becomes_attributes() {
        let review: SubjectAccessReview = serde_json::from_value(json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": "system:serviceaccount:granary-system:granary-seed-a",
                "groups": ["system:serviceaccounts", "system:authenticated"],
                "resourceAttributes": {
                    "verb": "watch",
                    "group": "core.gardener.cloud",
                    "version": "v1beta1",
                    "resource": "backupentries",
                    "labelSelector": {"requirements": [
                        {"key": "granary.gardener.cloud/seed", "operator": "In", "values": ["a"]}
                    ]},
                },
            },
        }))
        .expect("a review");
        let a = attributes(&review);
        assert_eq!(a.groups.len(), 2);
        let r = a.resource.expect("resource attributes");
        assert_eq!(
            (r.verb.as_str(), r.resource.as_str()),
            ("watch", "backupentries")
        );
        assert_eq!(
            r.label_selector,
            Some(vec![Requirement::equals(
                "granary.gardener.cloud/seed",
                "a"
            )])
        );
        assert_eq!(r.field_selector, None);

        let denied = serde_json::to_value(answer(review.clone(), &Decision::Deny("no".into())))
            .expect("serializes");
        assert_eq!(
            denied["status"],
            json!({"allowed": false, "denied": true, "reason": "no"})
        );
        let none = serde_json::to_value(answer(review, &Decision::NoOpinion)).expect("json");
        assert_eq!(none["status"], json!({"allowed": false}));
    }

    #[test]
    fn raw_selectors_are_read_like_kube_apiserver_reads_them() {
        assert_eq!(
            parse_selector("granary.gardener.cloud/seed=a, app in (x,y),!gone,tier!=db"),
            vec![
                Requirement::equals("granary.gardener.cloud/seed", "a"),
                Requirement {
                    key: "app".into(),
                    operator: "In".into(),
                    values: vec!["x".into(), "y".into()],
                },
                Requirement {
                    key: "gone".into(),
                    operator: "DoesNotExist".into(),
                    values: vec![],
                },
                Requirement {
                    key: "tier".into(),
                    operator: "NotIn".into(),
                    values: vec!["db".into()],
                },
            ]
        );
        assert_eq!(
            parse_selector("metadata.name==creds"),
            vec![Requirement::equals("metadata.name", "creds")]
        );
    }

    #[test]
    fn admission_reviews_round_trip() {
        let review = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u-1",
                "operation": "UPDATE",
                "resource": {"group": "core.gardener.cloud", "version": "v1beta1", "resource": "backupbuckets"},
                "subResource": "status",
                "name": "ba",
                "userInfo": {"username": "someone", "groups": ["g"]},
                "object": {"metadata": {"name": "ba"}},
                "oldObject": null,
            },
        });
        let (uid, w) = write_request(&review).expect("a request");
        assert_eq!(uid, "u-1");
        assert_eq!(w.subresource, "status");
        assert_eq!(w.groups, vec!["g".to_string()]);
        assert!(w.object.is_some() && w.old_object.is_none());
        let out = admission_response(&uid, &Admission::Denied("nope".into()));
        assert_eq!(out["response"]["uid"], "u-1");
        assert_eq!(out["response"]["allowed"], false);
        assert_eq!(out["response"]["status"]["code"], 403);
        assert!(write_request(&json!({"request": {}})).is_none());
    }
}
