//! The restore runner against kubectl apply --server-side: `cargo bench --bench velero_restore [-- --size N --json]`, the same code as `granary bench
//! velero_restore` (`granary_bench`). Results in `<target dir>/bench/velero_restore.json`.

mod support;

fn main() -> std::process::ExitCode {
    support::main("velero_restore", None)
}
