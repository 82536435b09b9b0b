//! A whole `granary migrate entry` on moto (bulk copy against rclone copy, then the
//! cut-over's etcd downtime): `cargo bench --bench migrate [-- --size N --json]`, the same
//! code as `granary bench migrate` (`granary_bench`). Results in
//! `<target dir>/bench/migrate.json`.

mod support;

fn main() -> std::process::ExitCode {
    support::main("migrate", None)
}
