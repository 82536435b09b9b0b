//! The peer programs the benchmarks run side by side with Granary: rclone, aws-cli and
//! kubectl, found on this machine (scripts/bench.sh installs them from the package
//! registries). A peer that is not installed gives no figure, never a made-up one.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use super::table::Peer;

/// The first candidate that answers `<bin> <version_arg>` successfully.
fn first_working(candidates: Vec<String>, version_arg: &[&str]) -> Option<String> {
    candidates.into_iter().find(|bin| {
        Command::new(bin)
            .args(version_arg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

fn env_first(var: &str, rest: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = std::env::var(var)
        .ok()
        .filter(|v| !v.is_empty())
        .into_iter()
        .collect();
    out.extend(rest);
    out
}

/// Where scripts/emulators.sh keeps its tools (`GRANARY_TOOLS_DIR`).
pub fn tools_dir() -> PathBuf {
    std::env::var_os("GRANARY_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/granary-tools")
        })
}

/// `$GRANARY_RCLONE`, else `rclone` on PATH.
pub fn rclone() -> Option<String> {
    first_working(
        env_first("GRANARY_RCLONE", vec!["rclone".into()]),
        &["version"],
    )
}

/// `$GRANARY_AWS`, else the tools venv's `aws` (scripts/bench.sh installs awscli there),
/// else `aws` on PATH.
pub fn aws() -> Option<String> {
    let venv = tools_dir().join("venv/bin/aws").display().to_string();
    first_working(
        env_first("GRANARY_AWS", vec![venv, "aws".into()]),
        &["--version"],
    )
}

/// `$GRANARY_KUBECTL`, else `kubectl` on PATH.
pub fn kubectl() -> Option<String> {
    first_working(
        env_first("GRANARY_KUBECTL", vec!["kubectl".into()]),
        &["version", "--client"],
    )
}

/// A peer command's outcome: its wall time, or why there is none.
pub fn timed(mut cmd: Command) -> Peer {
    let start = Instant::now();
    match cmd.stdout(Stdio::null()).stderr(Stdio::piped()).output() {
        Ok(o) if o.status.success() => Peer::Measured(start.elapsed().as_secs_f64()),
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            let tail: String = err.lines().rev().take(3).collect::<Vec<_>>().join(" | ");
            Peer::Failed(format!("{} ({tail})", o.status))
        }
        Err(e) => Peer::Failed(format!("does not run: {e}")),
    }
}

/// Environment for rclone: a remote `bench:` of type S3 at `endpoint`, no config file.
pub fn rclone_command(bin: &str, endpoint: &str, args: &[&str]) -> Command {
    let mut c = Command::new(bin);
    c.args(args)
        .env("RCLONE_CONFIG", "/dev/null")
        .env("RCLONE_CONFIG_BENCH_TYPE", "s3")
        .env("RCLONE_CONFIG_BENCH_PROVIDER", "Other")
        .env("RCLONE_CONFIG_BENCH_ENDPOINT", endpoint)
        .env("RCLONE_CONFIG_BENCH_REGION", "us-east-1")
        .env("RCLONE_CONFIG_BENCH_ACCESS_KEY_ID", "test")
        .env("RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY", "test")
        .env("RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE", "true")
        // Plain HTTP on loopback: a CA bundle from the environment only gets in the way.
        .env_remove("AWS_CA_BUNDLE")
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("http_proxy")
        .env_remove("https_proxy");
    c
}

/// `rclone copy src dst` (server-side within one remote) with `transfers` transfers and
/// as many checkers: the migration's copy, done by rclone.
pub fn rclone_copy(bin: &str, endpoint: &str, src: &str, dst: &str, transfers: usize) -> Command {
    let transfers = transfers.to_string();
    rclone_command(
        bin,
        endpoint,
        &[
            "copy",
            src,
            dst,
            "--transfers",
            &transfers,
            "--checkers",
            &transfers,
        ],
    )
}

/// aws-cli against `endpoint`, path-style, static test credentials, no metadata lookups.
pub fn aws_command(bin: &str, endpoint: &str, config_dir: &Path, args: &[&str]) -> Command {
    let config = config_dir.join("aws-config");
    // Path-style addressing, as the emulator and Granary use it.
    let _ = std::fs::write(
        &config,
        "[default]\nregion = us-east-1\ns3 =\n    addressing_style = path\n",
    );
    let mut c = Command::new(bin);
    c.args(args)
        .args(["--endpoint-url", endpoint, "--only-show-errors"])
        .env("AWS_CONFIG_FILE", &config)
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            config_dir.join("no-credentials"),
        )
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_CA_BUNDLE")
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("http_proxy")
        .env_remove("https_proxy");
    c
}
