//! The Velero archive writer/reader and the manifest: `cargo bench --bench velero_archive [-- --size N --json]`, the same code as `granary bench
//! velero_archive` (`granary_bench`). Results in `<target dir>/bench/velero_archive.json`.

mod support;

fn main() -> std::process::ExitCode {
    support::main("velero_archive", None)
}
