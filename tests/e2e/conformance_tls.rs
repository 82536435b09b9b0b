//! The API server's certificates satisfy a strict X.509 verifier: OpenSSL's
//! `X509_V_FLAG_X509_STRICT`, which Python ≥ 3.13 turns on by default (and with it the
//! official `kubernetes` client and httpx). A serving certificate without an Authority
//! Key Identifier, or a CA without a Subject Key Identifier, is refused there ("Missing
//! Authority Key Identifier") while Go and rustls accept it. Runs against the embedded
//! server, or the cluster of `GRANARY_TEST_KUBECONFIG`, whose kubeconfig names the CA.

use std::process::Command;

use base64::Engine;
use granary_test_support::TestCluster;

/// The server URL and CA (PEM) of a kubeconfig's current cluster.
fn server_and_ca(path: &std::path::Path) -> (String, String) {
    let kc = kube::config::Kubeconfig::read_from(path).expect("kubeconfig");
    let current = kc.current_context.clone().unwrap_or_default();
    let context = kc
        .contexts
        .iter()
        .find(|c| c.name == current)
        .and_then(|c| c.context.clone())
        .expect("current context");
    let cluster = kc
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.clone())
        .expect("its cluster");
    let ca = match (
        &cluster.certificate_authority_data,
        &cluster.certificate_authority,
    ) {
        (Some(data), _) => String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(data)
                .expect("base64 CA"),
        )
        .expect("PEM"),
        (None, Some(file)) => std::fs::read_to_string(file).expect("CA file"),
        (None, None) => panic!("the kubeconfig names no CA"),
    };
    (cluster.server.expect("server"), ca)
}

/// A TLS handshake with `X509_V_FLAG_X509_STRICT` and only `ca` trusted; what Python said.
const STRICT_HANDSHAKE: &str = r#"
import socket, ssl, sys
host, port, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ctx = ssl.create_default_context(cafile=ca)
ctx.verify_flags |= ssl.VERIFY_X509_STRICT
with socket.create_connection((host, port), timeout=10) as raw:
    with ctx.wrap_socket(raw, server_hostname=host) as tls:
        print("verified", tls.version())
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strict_x509_verifier_accepts_the_servers_certificates() {
    let tc = TestCluster::start().await;
    let (server, ca) = server_and_ca(&tc.garden.kubeconfig_path);
    let authority = server
        .strip_prefix("https://")
        .expect("an https server")
        .split('/')
        .next()
        .expect("host and port");
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h.trim_matches(['[', ']']).to_string(), p.to_string()),
        None => (authority.to_string(), "443".to_string()),
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca).expect("CA written");
    let out = match Command::new("python3")
        .args(["-c", STRICT_HANDSHAKE, &host, &port])
        .arg(&ca_file)
        .output()
    {
        Ok(out) => out,
        Err(e) => panic!("python3 is needed for this test (the test command installs it): {e}"),
    };
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "strict verification failed: {said}");
    assert!(said.contains("verified"), "{said}");
}
