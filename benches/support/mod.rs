//! What the thin `cargo bench` targets share: `--size N` and `--json` from the command
//! line, then the library's benchmark (`granary_bench`, the same code as `granary
//! bench <name>`).

use std::process::ExitCode;

use granary_bench::{BenchOptions, HeapProbe};

/// Runs the benchmark `name` with `--size N` / `--json` from the command line.
pub fn main(name: &str, heap: Option<HeapProbe>) -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let size = args
        .iter()
        .position(|a| a == "--size")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok());
    let json = args.iter().any(|a| a == "--json");
    let opts = BenchOptions {
        size,
        heap,
        // The garden benchmark runs `granary garden` (this binary is not `granary`).
        granary_exe: Some(env!("CARGO_BIN_EXE_granary").into()),
        ..BenchOptions::default()
    };
    match granary_bench::main_blocking(&[name.to_string()], &opts, json) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
