//! Secrets stay secret on a running `granary dev` (the debug binary, logging at debug
//! level): the garden credentials are rotated to values only this test knows and
//! reconciled by the seed, a label that is not a string makes reading that Secret fail
//! to decode, and a broken credentials file is refused. No log line of any
//! of it carries a test credential (raw or base64), and the state that does hold them is
//! private: a 0700 data directory, 0600 object logs and kubeconfigs, tightened from what
//! an older run left wider.

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine;
use granary_api::core::GARDEN_NAMESPACE;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

use granary_test_support::dev::{Dev, all_succeeded, log_path};
use granary_test_support::poll_until;

/// Values that appear nowhere but in this test's Secrets and files.
const ACCESS_KEY: &str = "AKIAHYGIENESCAN7QX4Z";
const SECRET_KEY: &str = "hYg1eneS3cretAcc3ssK3yN0tInAnyL0g0000001";
const FILE_SECRET: &str = "hYg1eneCr3dent1alsF1leN0tInAnyL0g0000003";

fn forms(secret: &str) -> [String; 2] {
    [
        secret.to_string(),
        base64::engine::general_purpose::STANDARD.encode(secret),
    ]
}

/// Panics naming the place when `text` holds any test credential, raw or base64.
fn assert_no_secret(what: &str, text: &str) {
    for secret in [ACCESS_KEY, SECRET_KEY, FILE_SECRET] {
        for form in forms(secret) {
            if let Some(line) = text.lines().find(|l| l.contains(&form)) {
                panic!("{what} shows a test credential ({form}):\n{line}");
            }
        }
    }
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

fn kubeconfigs(data: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(data)
        .expect("data directory")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "kubeconfig"))
        .collect()
}

async fn client_of(kubeconfig: &Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("usable kubeconfig");
    Client::try_from(config).expect("client")
}

/// Sends a raw JSON request (typed clients cannot write wrongly typed metadata);
/// returns whether the server accepted it.
async fn raw(client: &Client, method: &str, uri: &str, body: Option<serde_json::Value>) -> bool {
    let content_type = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let request = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .body(body.map(|b| b.to_string().into_bytes()).unwrap_or_default())
        .expect("request");
    client.request_text(request).await.is_ok()
}

/// Runs `granary dev` with a credentials file that is broken YAML holding a secret.
fn broken_credentials_file(dir: &Path) -> String {
    let file = dir.join("credentials.yaml");
    std::fs::write(
        &file,
        format!("accessKeyID: {ACCESS_KEY}\nsecretAccessKey: {FILE_SECRET}\n  region: [\n"),
    )
    .expect("write credentials");
    let out = Command::new(env!("CARGO_BIN_EXE_granary"))
        .args(["--log-level", "debug", "dev", "--data-dir"])
        .arg(dir.join("refused"))
        .args(["--provider", "aws", "--region", "eu-west-1"])
        .arg("--credentials-file")
        .arg(&file)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("granary dev runs");
    assert!(
        !out.status.success(),
        "a broken credentials file is refused"
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("line 3"), "the error says where: {text}");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_credential_reaches_a_log_line_and_the_state_is_private() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("state");
    // What an older run left: a 0755 directory and a world-readable kubeconfig.
    std::fs::create_dir_all(&data).expect("data dir");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(data.join("garden.kubeconfig"), "old").unwrap();
        std::fs::set_permissions(
            data.join("garden.kubeconfig"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
    }
    let mut dev = Dev::start(
        &data,
        &["--seeds", "1", "--shoots", "1", "--log-level", "debug"],
        &[],
    );
    let (garden, _) = dev.ready().await;
    all_succeeded(&garden, 1).await;

    // The seed reconciles with credentials only this test knows: rotated in the
    // garden, copied to the seed (which is what it logs about at debug level).
    let secrets: Api<Secret> = Api::namespaced(garden.clone(), GARDEN_NAMESPACE);
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    secrets
        .patch(
            "backup-credentials",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {
                "accessKeyID": b64(ACCESS_KEY),
                "secretAccessKey": b64(SECRET_KEY),
            }})),
        )
        .await
        .expect("rotate the credentials");
    let seed_kubeconfig = kubeconfigs(&data)
        .into_iter()
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("seed-"))
        })
        .expect("a seed kubeconfig");
    let seed_secrets: Api<Secret> =
        Api::namespaced(client_of(&seed_kubeconfig).await, GARDEN_NAMESPACE);
    poll_until("the seed copies the rotated credentials", || async {
        seed_secrets
            .list(&ListParams::default())
            .await
            .is_ok_and(|l| {
                l.items.iter().any(|s| {
                    s.data.as_ref().is_some_and(|d| {
                        d.get("secretAccessKey")
                            .is_some_and(|v| v.0 == SECRET_KEY.as_bytes())
                    })
                })
            })
    })
    .await;

    // The credentials Secret gets a label that is not a string: reading it no longer
    // decodes, and kube's client would log the response body, the credentials' data.
    // (A server that validates metadata refuses the label; then nothing fails.)
    let path = format!("/api/v1/namespaces/{GARDEN_NAMESPACE}/secrets/backup-credentials");
    let label =
        |value: serde_json::Value| Some(json!({"metadata": {"labels": {"hygiene": value}}}));
    if raw(&garden, "PATCH", &path, label(json!(1))).await {
        poll_until("reading the credentials fails to decode", || async {
            std::fs::read_to_string(log_path(&data))
                .is_ok_and(|log| log.contains("Error deserializing response"))
        })
        .await;
        assert!(
            raw(&garden, "PATCH", &path, label(serde_json::Value::Null)).await,
            "the label is removed again"
        );
    } else {
        eprintln!("the server refuses a label that is not a string: no decode failure to provoke");
    }

    let refused = broken_credentials_file(dir.path());
    assert_no_secret("granary dev with a broken credentials file", &refused);

    assert!(dev.interrupt(), "exit code 0 after SIGINT");
    let log = std::fs::read_to_string(log_path(&data)).expect("log");
    assert!(
        log.contains("DEBUG"),
        "debug level reaches the log: {} bytes",
        log.len()
    );
    assert_no_secret("the logs of granary dev", &log);
    assert_no_secret("the output of granary dev", &dev.output());

    #[cfg(unix)]
    {
        assert_eq!(mode(&data), 0o700, "data directory");
        let mut logs = vec![data.join("garden").join("objects.log")];
        for seed in std::fs::read_dir(data.join("seeds"))
            .expect("seeds")
            .flatten()
        {
            logs.push(seed.path().join("objects.log"));
        }
        for file in logs.iter().chain(&kubeconfigs(&data)) {
            assert_eq!(mode(file), 0o600, "{}", file.display());
        }
        assert_eq!(mode(&data.join("garden")), 0o700, "garden state");
    }
}

/// A kubeconfig whose token line is broken YAML, named by flag or found through
/// `KUBECONFIG`: every command says where the fault is and shows nothing of the file.
#[test]
fn a_broken_kubeconfig_is_reported_without_its_contents() {
    const TOKEN: &str = "hYg1eneK8sT0kenN0tInAnyErr0r000004";
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!("apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    token: [{TOKEN}\n"),
    )
    .expect("write kubeconfig");
    let path = kubeconfig.to_str().expect("utf-8 path");
    let commands: [&[&str]; 4] = [
        &["garden"],
        &["migrate", "status"],
        &["seed", "--seed-name", "s", "--garden-kubeconfig", path],
        &["garden", "--kubeconfig", path],
    ];
    for args in commands {
        let out = Command::new(env!("CARGO_BIN_EXE_granary"))
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("RUST_LOG")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("granary runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{args:?}: {text}");
        assert!(
            text.contains("line 6 column 12"),
            "{args:?} says where: {text}"
        );
        assert!(
            !text.contains(&TOKEN[..16]),
            "{args:?} shows the token: {text}"
        );
    }
}
