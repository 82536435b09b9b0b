//! Response content negotiation: the server answers JSON only, so a request whose
//! `Accept` header admits no JSON (a client asking for protobuf alone, say) gets 406
//! NotAcceptable, as kube-apiserver answers a media type it cannot produce, instead of a
//! JSON body the client would try to read as something else.

use super::errors::ApiError;

/// The media types this server answers in.
const PRODUCED: &str = "application/json";

/// Whether `accept` (an `Accept` header, possibly empty) admits a JSON answer.
pub(crate) fn accepts_json(accept: &str) -> bool {
    if accept.trim().is_empty() {
        return true;
    }
    accept.split(',').any(|range| {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let refused = parts.any(|p| {
            p.split_once('=')
                .is_some_and(|(k, v)| k.trim() == "q" && v.trim().parse::<f32>() == Ok(0.0))
        });
        !refused && matches!(media.as_str(), "application/json" | "application/*" | "*/*")
    })
}

/// 406 for an `Accept` header this server cannot satisfy.
pub(crate) fn not_acceptable() -> ApiError {
    ApiError::not_acceptable(format!(
        "only the following media types are accepted: {PRODUCED}"
    ))
}

#[cfg(test)]
mod tests {
    use super::accepts_json;

    #[test]
    fn json_must_be_among_the_accepted_types() {
        for ok in [
            "",
            "application/json",
            "application/vnd.kubernetes.protobuf, application/json",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            "application/json;stream=watch",
            "*/*",
            "application/*;q=0.5",
            "Application/JSON",
        ] {
            assert!(accepts_json(ok), "{ok}");
        }
        for refused in [
            "application/vnd.kubernetes.protobuf",
            "application/vnd.kubernetes.protobuf;stream=watch",
            "application/yaml",
            "text/html",
            "application/json;q=0",
        ] {
            assert!(!accepts_json(refused), "{refused}");
        }
    }
}
