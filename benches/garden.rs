//! Garden placement, cold start and restart, against a bare client: `cargo bench --bench garden [-- --size N --json]`, the same code as `granary bench
//! garden` (`granary_bench`). Results in `<target dir>/bench/garden.json`.

mod support;

fn main() -> std::process::ExitCode {
    support::main("garden", None)
}
