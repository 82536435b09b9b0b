//! Deleting an object prefix on moto against rclone purge and aws s3 rm: `cargo bench --bench delete [-- --size N --json]`, the same code as `granary bench
//! delete` (`granary_bench`). Results in `<target dir>/bench/delete.json`.

mod support;

fn main() -> std::process::ExitCode {
    support::main("delete", None)
}
