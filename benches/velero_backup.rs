//! The backup runner against kubectl get -o json | gzip: `cargo bench --bench velero_backup [-- --size N --json]`, the same code as `granary bench
//! velero_backup` (`granary_bench`). Results in `<target dir>/bench/velero_backup.json`.

mod support;

fn main() -> std::process::ExitCode {
    support::main("velero_backup", None)
}
