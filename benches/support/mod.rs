//! What the side-by-side benchmarks share: flags, /proc readings and the peer kubectl.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// `--name N` from the command line, else `default`.
pub fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A field of /proc/<pid>/status in KiB (`VmHWM:`, `VmRSS:`).
pub fn status_kib(pid: &str, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Resets this process' peak RSS to its current RSS (Linux ≥ 4.0), so the peak read
/// afterwards is the measured step's.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// `$GRANARY_KUBECTL`, else `kubectl` on PATH.
pub fn kubectl_binary() -> Option<String> {
    match std::env::var("GRANARY_KUBECTL") {
        Ok(b) if !b.is_empty() => Some(b),
        _ => Command::new("kubectl")
            .args(["version", "--client"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|_| "kubectl".to_string()),
    }
}

/// `<target dir>/bench/<name>.json`.
pub fn results_path(name: &str) -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    PathBuf::from(target)
        .join("bench")
        .join(format!("{name}.json"))
}

/// Writes the results JSON, creating the directory.
pub fn write_results(name: &str, result: &serde_json::Value) -> PathBuf {
    let path = results_path(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("bench results directory");
    }
    std::fs::write(
        &path,
        serde_json::to_string_pretty(result).expect("JSON") + "\n",
    )
    .expect("results written");
    path
}

/// Waits for `child`, sampling its peak RSS (`VmHWM`) every 10 ms: (status, peak KiB).
pub fn wait_sampling_peak(
    child: &mut std::process::Child,
) -> Result<(std::process::ExitStatus, u64), String> {
    let pid = child.id().to_string();
    let mut peak_kib = 0;
    loop {
        if let Some(hwm) = status_kib(&pid, "VmHWM:") {
            peak_kib = peak_kib.max(hwm);
        }
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(s) => return Ok((s, peak_kib)),
            None => std::thread::sleep(std::time::Duration::from_millis(10)),
        }
    }
}
