//! The kubeconfig that points `kube::Client` and kubectl at an embedded server.

use kube::config::Kubeconfig;

/// The kubeconfig YAML for `url` with bearer `token`, trusting `ca_pem`; context, cluster and user are all
/// named `name`, namespace `default`.
pub(crate) fn yaml(name: &str, url: &str, token: &str, ca_pem: &str) -> String {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\nusers:\n- name: {name}\n  user:\n    token: {token}\ncontexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n    namespace: default\ncurrent-context: {name}\npreferences: {{}}\n"
    )
}

pub(crate) fn kubeconfig(
    name: &str,
    url: &str,
    token: &str,
    ca_pem: &str,
) -> Result<Kubeconfig, kube::config::KubeconfigError> {
    Kubeconfig::from_yaml(&yaml(name, url, token, ca_pem))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_parses_with_token() {
        let kc = kubeconfig("granary", "https://127.0.0.1:1234", "abc", "PEM").unwrap();
        assert_eq!(kc.current_context.as_deref(), Some("granary"));
        assert_eq!(
            kc.clusters[0].cluster.as_ref().unwrap().server.as_deref(),
            Some("https://127.0.0.1:1234")
        );
        assert!(kc.auth_infos[0].auth_info.as_ref().unwrap().token.is_some());
    }
}
