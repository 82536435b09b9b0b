//! Small validation helpers shared by the Velero kinds (and the OADP kinds that embed
//! them): include/exclude lists, label selectors, durations. Each pushes every problem
//! it finds, with its field path, onto the caller's list.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::{Duration, FieldError, FieldErrors};

pub(crate) fn push(errs: &mut FieldErrors, path: impl Into<String>, message: impl Into<String>) {
    errs.push(FieldError {
        path: path.into(),
        message: message.into(),
    });
}

/// Velero's include/exclude rule: `*` may not be excluded, and nothing may be both
/// included and excluded.
pub(crate) fn includes_excludes(
    errs: &mut FieldErrors,
    include_path: &str,
    includes: Option<&Vec<String>>,
    exclude_path: &str,
    excludes: Option<&Vec<String>>,
) {
    let Some(excludes) = excludes else { return };
    for (i, item) in excludes.iter().enumerate() {
        if item == "*" {
            push(errs, format!("{exclude_path}[{i}]"), "may not be \"*\"");
        } else if includes.is_some_and(|inc| inc.contains(item)) {
            push(
                errs,
                format!("{exclude_path}[{i}]"),
                format!("{item:?} is also listed in {include_path}"),
            );
        }
    }
}

/// A label selector must convert to a selector (`metav1.LabelSelectorAsSelector`):
/// qualified keys, valid label values, known operators, values only where the operator
/// takes them.
pub(crate) fn label_selector(errs: &mut FieldErrors, path: &str, selector: &LabelSelector) {
    for (key, value) in selector.match_labels.iter().flatten() {
        let at = format!("{path}.matchLabels[{key:?}]");
        label_key(errs, &at, key);
        for message in crate::names::label_value_errors(value) {
            push(
                errs,
                at.clone(),
                format!("invalid label value {value:?}: {message}"),
            );
        }
    }
    for (i, req) in selector.match_expressions.iter().flatten().enumerate() {
        let at = format!("{path}.matchExpressions[{i}]");
        if req.key.is_empty() {
            push(errs, format!("{at}.key"), "required");
        } else {
            label_key(errs, &format!("{at}.key"), &req.key);
        }
        for (j, value) in req.values.iter().flatten().enumerate() {
            for message in crate::names::label_value_errors(value) {
                push(
                    errs,
                    format!("{at}.values[{j}]"),
                    format!("invalid label value {value:?}: {message}"),
                );
            }
        }
        let has_values = req.values.as_ref().is_some_and(|v| !v.is_empty());
        match req.operator.as_str() {
            "In" | "NotIn" if !has_values => push(
                errs,
                format!("{at}.values"),
                format!("must be non-empty when operator is {}", req.operator),
            ),
            "Exists" | "DoesNotExist" if has_values => push(
                errs,
                format!("{at}.values"),
                format!("must be empty when operator is {}", req.operator),
            ),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => push(
                errs,
                format!("{at}.operator"),
                format!("unknown operator {other:?} (expected In, NotIn, Exists or DoesNotExist)"),
            ),
        }
    }
}

/// `labelSelector` and `orLabelSelectors` exclude each other; each selector must be valid.
pub(crate) fn selectors(
    errs: &mut FieldErrors,
    prefix: &str,
    label_selector_value: Option<&LabelSelector>,
    or_label_selectors: Option<&Vec<LabelSelector>>,
) {
    if let Some(sel) = label_selector_value {
        label_selector(errs, &format!("{prefix}.labelSelector"), sel);
    }
    for (i, sel) in or_label_selectors.iter().copied().flatten().enumerate() {
        label_selector(errs, &format!("{prefix}.orLabelSelectors[{i}]"), sel);
    }
    if label_selector_value.is_some() && or_label_selectors.is_some_and(|v| !v.is_empty()) {
        push(
            errs,
            format!("{prefix}.labelSelector"),
            format!("may not be set together with {prefix}.orLabelSelectors"),
        );
    }
}

/// A duration field must parse as a Go duration and must not be negative.
pub(crate) fn duration(errs: &mut FieldErrors, path: &str, value: Option<&Duration>) {
    if let Some(d) = value {
        match d.to_delta() {
            Err(e) => push(errs, path, e.to_string()),
            Ok(delta) if delta < chrono::TimeDelta::zero() => {
                push(errs, path, format!("must not be negative (got {d})"))
            }
            Ok(_) => {}
        }
    }
}

/// A local object reference to a ConfigMap (Velero compares the kind case-insensitively).
pub(crate) fn configmap_ref(
    errs: &mut FieldErrors,
    path: &str,
    reference: Option<&k8s_openapi::api::core::v1::TypedLocalObjectReference>,
) {
    if let Some(r) = reference {
        if !r.kind.eq_ignore_ascii_case("configmap") {
            push(
                errs,
                format!("{path}.kind"),
                format!("must be ConfigMap (got {:?})", r.kind),
            );
        }
        if r.name.is_empty() {
            push(errs, format!("{path}.name"), "required");
        }
    }
}

/// Which items a backup or restore hook applies to: the fields Velero's
/// `BackupResourceHookSpec` and `RestoreResourceHookSpec` share.
pub(crate) struct HookSelection<'a> {
    pub name: &'a str,
    pub included_namespaces: Option<&'a Vec<String>>,
    pub excluded_namespaces: Option<&'a Vec<String>>,
    pub included_resources: Option<&'a Vec<String>>,
    pub excluded_resources: Option<&'a Vec<String>>,
    pub label_selector: Option<&'a LabelSelector>,
}

/// The rules of a hook's selection: a name, include/exclude lists, a valid selector.
pub(crate) fn hook_selection(errs: &mut FieldErrors, at: &str, hook: HookSelection<'_>) {
    if hook.name.is_empty() {
        push(errs, format!("{at}.name"), "required");
    }
    includes_excludes(
        errs,
        &format!("{at}.includedNamespaces"),
        hook.included_namespaces,
        &format!("{at}.excludedNamespaces"),
        hook.excluded_namespaces,
    );
    includes_excludes(
        errs,
        &format!("{at}.includedResources"),
        hook.included_resources,
        &format!("{at}.excludedResources"),
        hook.excluded_resources,
    );
    if let Some(sel) = hook.label_selector {
        label_selector(errs, &format!("{at}.labelSelector"), sel);
    }
}

fn label_key(errs: &mut FieldErrors, at: &str, key: &str) {
    for message in crate::names::qualified_name_errors(key) {
        push(errs, at, format!("invalid label key {key:?}: {message}"));
    }
}
