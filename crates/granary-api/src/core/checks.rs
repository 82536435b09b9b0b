//! Small field checks shared by the validation functions of the Gardener kinds (garden
//! and seed side). Each pushes its problems, with their field paths, onto a list.

use crate::common::{FieldError, FieldErrors, ObjectReference, SecretReference};

/// `path: required` when `value` is empty.
pub(crate) fn require(errors: &mut FieldErrors, path: &str, value: &str) {
    if value.trim().is_empty() {
        errors.push(FieldError::new(path, "required"));
    }
}

/// A `corev1.SecretReference` needs a name and a namespace.
pub(crate) fn check_secret_ref(errors: &mut FieldErrors, path: &str, reference: &SecretReference) {
    require(errors, &format!("{path}.name"), &reference.name);
    require(errors, &format!("{path}.namespace"), &reference.namespace);
}

/// A `credentialsRef`: a `v1` Secret or a `security.gardener.cloud/v1alpha1`
/// WorkloadIdentity, with name and namespace (as Gardener's validation has it).
pub(crate) fn check_credentials_ref(
    errors: &mut FieldErrors,
    path: &str,
    reference: &ObjectReference,
) {
    let supported = match reference.kind.as_str() {
        "Secret" => reference.api_version.is_empty() || reference.api_version == "v1",
        "WorkloadIdentity" => reference.api_version == "security.gardener.cloud/v1alpha1",
        _ => false,
    };
    if !supported {
        errors.push(FieldError::new(
            path,
            format!(
                "must refer to a v1 Secret or a security.gardener.cloud/v1alpha1 \
                 WorkloadIdentity, not {:?} {:?}",
                reference.api_version, reference.kind
            ),
        ));
    }
    require(errors, &format!("{path}.name"), &reference.name);
    require(errors, &format!("{path}.namespace"), &reference.namespace);
}

/// A DNS-1123 label: at most 63 lowercase letters, digits and hyphens, starting and
/// ending with a letter or digit. `None` when valid, else why not.
pub(crate) fn dns_label_problem(value: &str) -> Option<String> {
    if value.len() > 63 {
        return Some(format!(
            "must be at most 63 characters, {value:?} has {}",
            value.len()
        ));
    }
    dns_part_problem(value, false)
}

/// A DNS-1123 subdomain (the rule for most Kubernetes object names): at most 253
/// characters, lowercase letters, digits, hyphens and dots.
pub(crate) fn dns_subdomain_problem(value: &str) -> Option<String> {
    if value.len() > 253 {
        return Some(format!(
            "must be at most 253 characters, {value:?} has {}",
            value.len()
        ));
    }
    dns_part_problem(value, true)
}

fn dns_part_problem(value: &str, dots: bool) -> Option<String> {
    if value.is_empty() {
        return Some("required".to_string());
    }
    let allowed =
        |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || (dots && c == '.');
    if let Some(c) = value.chars().find(|c| !allowed(*c)) {
        return Some(format!(
            "{value:?} may only contain lowercase letters, digits{}and hyphens, not {c:?}",
            if dots { ", dots " } else { " " }
        ));
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !alnum(value.chars().next()) || !alnum(value.chars().last()) {
        return Some(format!(
            "{value:?} must start and end with a lowercase letter or a digit"
        ));
    }
    None
}

/// Pushes `path: <problem>` when the check found one.
pub(crate) fn push_problem(errors: &mut FieldErrors, path: &str, problem: Option<String>) {
    if let Some(problem) = problem {
        errors.push(FieldError::new(path, problem));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names() {
        assert_eq!(dns_label_problem("abc-1"), None);
        assert!(dns_label_problem("a.b").is_some());
        assert!(dns_label_problem(&"a".repeat(64)).is_some());
        assert!(dns_label_problem("-a").is_some());
        assert_eq!(dns_label_problem(""), Some("required".into()));
        assert_eq!(dns_subdomain_problem("shoot--dev--x--1234.a"), None);
        assert!(dns_subdomain_problem("Shoot").is_some());
    }

    #[test]
    fn credentials_refs() {
        let mut errors = FieldErrors::new();
        let good = ObjectReference {
            api_version: "v1".into(),
            kind: "Secret".into(),
            name: "s".into(),
            namespace: "garden".into(),
            ..Default::default()
        };
        check_credentials_ref(&mut errors, "spec.credentialsRef", &good);
        assert!(errors.is_empty(), "{errors:?}");
        let wi = ObjectReference {
            api_version: "security.gardener.cloud/v1alpha1".into(),
            kind: "WorkloadIdentity".into(),
            ..good.clone()
        };
        check_credentials_ref(&mut errors, "spec.credentialsRef", &wi);
        assert!(errors.is_empty(), "{errors:?}");
        check_credentials_ref(
            &mut errors,
            "spec.credentialsRef",
            &ObjectReference::default(),
        );
        let paths: Vec<_> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.credentialsRef",
                "spec.credentialsRef.name",
                "spec.credentialsRef.namespace"
            ]
        );
    }
}
