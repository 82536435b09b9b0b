//! The backup queue's plan: `cargo bench --bench velero_queue [-- --size N --json]`, the same code as `granary bench
//! velero_queue` (`granary_bench`). Results in `<target dir>/bench/velero_queue.json`.

mod support;

fn main() -> std::process::ExitCode {
    support::main("velero_queue", None)
}
