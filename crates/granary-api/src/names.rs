//! The names Kubernetes checks (Go's `k8s.io/apimachinery/pkg/util/validation`):
//! qualified names (label and annotation keys, finalizers), label values and DNS-1123
//! subdomains, with kube-apiserver's messages, so that errors read the same as a real
//! cluster's. The one place these rules live: the embedded API server, the CRD
//! validation and the CLI's flags all check names here.

const QUALIFIED_NAME_MAX: usize = 63;
const LABEL_VALUE_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;

const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";

/// Go's `RegexError`: the message, examples, and the pattern used.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let examples: String = examples
        .iter()
        .map(|e| format!("'{e}', "))
        .collect::<Vec<_>>()
        .join(" or ");
    format!("{msg} (e.g. {examples}regex used for validation is '{fmt}')")
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

fn dns1123_labels(s: &str) -> bool {
    s.split('.').all(|label| {
        let b = label.as_bytes();
        match (b.first(), b.last()) {
            (Some(f), Some(l)) => {
                (f.is_ascii_lowercase() || f.is_ascii_digit())
                    && (l.is_ascii_lowercase() || l.is_ascii_digit())
                    && b.iter()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            }
            _ => false,
        }
    })
}

pub fn dns1123_subdomain_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    if !dns1123_labels(s) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// Go's `IsQualifiedName`: `[prefix/]name`, the prefix a DNS subdomain, the name at
/// most 63 characters of `[-A-Za-z0-9_.]` starting and ending alphanumeric.
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let name_regex = || {
        regex_error(
            QUALIFIED_NAME_MSG,
            QUALIFIED_NAME_FMT,
            &["MyName", "my.name", "123-abc"],
        )
    };
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                name_regex()
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > QUALIFIED_NAME_MAX {
        errs.push(format!("name part {}", max_len_error(QUALIFIED_NAME_MAX)));
    }
    if !is_qualified_name_part(name) {
        errs.push(format!("name part {}", name_regex()));
    }
    errs
}

/// Go's `IsValidLabelValue`: empty, or at most 63 characters of a qualified name part.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX {
        errs.push(max_len_error(LABEL_VALUE_MAX));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// A label or annotation key, a finalizer: `[prefix/]name` (see [`qualified_name_errors`]).
pub fn is_qualified_name(value: &str) -> bool {
    qualified_name_errors(value).is_empty()
}

/// A label value: empty, or at most 63 characters of a qualified name part.
pub fn is_label_value(value: &str) -> bool {
    value.len() <= LABEL_VALUE_MAX && (value.is_empty() || is_qualified_name_part(value))
}

/// A DNS-1123 subdomain: the name of most objects, custom objects included.
/// A DNS-1123 label: at most 63 lower-case alphanumerics or `-`, alphanumeric at both
/// ends (a Seed's or Namespace's name).
pub fn is_dns1123_label(value: &str) -> bool {
    value.len() <= 63 && !value.contains('.') && dns1123_labels(value)
}

pub fn is_dns1123_subdomain(value: &str) -> bool {
    value.len() <= DNS1123_SUBDOMAIN_MAX && dns1123_labels(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names_follow_kube_apiserver() {
        for ok in [
            "a",
            "A.b_c-9",
            "example.com/x",
            "kubernetes.io/role",
            &"a".repeat(63),
        ] {
            assert!(qualified_name_errors(ok).is_empty(), "{ok}");
        }
        assert_eq!(
            qualified_name_errors("-a"),
            vec![
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
            ]
        );
        assert_eq!(
            qualified_name_errors(&"a".repeat(64)),
            vec!["name part must be no more than 63 characters"]
        );
        assert_eq!(
            qualified_name_errors("/a"),
            vec!["prefix part must be non-empty"]
        );
        assert!(
            qualified_name_errors("Example.com/a")[0]
                .starts_with("prefix part a lowercase RFC 1123 subdomain")
        );
        assert!(qualified_name_errors("a/b/c")[0].starts_with("a qualified name must consist"));
        assert_eq!(qualified_name_errors("").len(), 2, "empty and not matching");
    }
}
