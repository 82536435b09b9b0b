//! The migration's bucket-to-bucket copy on moto against rclone copy and aws s3 cp: `cargo bench --bench copy [-- --size N --json]`, the same code as `granary bench
//! copy` (`granary_bench`). Results in `<target dir>/bench/copy.json`.

mod support;

fn main() -> std::process::ExitCode {
    support::main("copy", None)
}
