//! What Granary's integration tests share: the [`TestCluster`] every test runs against,
//! the landscapes and worlds the scenarios start from, object builders, and runners for
//! the `granary` and `kubectl` binaries.
//!
//! # Where tests live
//!
//! - **Unit tests** sit beside the code they test, in the same crate: a `#[cfg(test)]
//!   mod tests { … }` at the end of the module when they are short, or
//!   `<module>/tests.rs` (declared as `#[cfg(test)] mod tests;`) when they are long.
//!   They test one module through its own API and start no API server.
//! - **Integration tests** of the `granary` package are `tests/e2e/` (one test binary,
//!   `tests/e2e/main.rs`, one file per scenario family) and `tests/deploy_manifests/`
//!   (static checks of `deploy/`). A scenario file holds scenarios (`#[tokio::test]`
//!   functions and helpers only it uses); it never imports from another scenario file.
//! - **Shared set-ups** (worlds, landscapes), **builders** of API objects and the
//!   **runners** of external binaries live here, in `granary-test-support`
//!   (`tests/support/`, `publish = false`, a dev-dependency of the root package):
//!   - [`cluster`] (re-exported at the root): [`TestCluster`], [`poll_until`], HTTP GETs;
//!   - [`worlds`]: one module per family of scenarios that start from the same world;
//!   - [`garden`], [`seed`]: a garden and a seed landscape, and what their tests share;
//!   - [`builders`]: `backup("b").namespaces(["app"]).build()` and friends;
//!   - [`kubectl`], [`granary_bin`], [`cli`], [`dev`], [`signals`]: the binaries the
//!     tests run, and their processes;
//!   - [`api`]: small helpers over the Kubernetes API;
//!   - [`manifests`]: `deploy/` read as documents;
//!   - [`etcd_sim`], [`proxy`]: a StatefulSet status simulator and a TCP fault proxy;
//!   - [`emulators`]: the storage emulators (the `granary-emulators` crate the provider
//!     tests share, providers/tests/support/emulators).
//! - Provider tests (`providers/tests/`) keep their own `support` module: they need no
//!   API server, only the emulators.

pub mod api;
pub mod builders;
pub mod cli;
pub mod cluster;
pub mod dev;
pub mod etcd_sim;
pub mod garden;
pub mod kubectl;
pub mod manifests;
pub mod proxy;
pub mod seed;
pub mod signals;
pub mod worlds;

pub use cluster::*;
pub use granary_emulators as emulators;

use std::path::PathBuf;

/// The repository's root (where `deploy/` and `tests/fixtures/` are).
pub fn repo_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// `<repository>/<rel>`.
pub fn repo_path(rel: &str) -> PathBuf {
    repo_root().join(rel)
}

/// The `granary` binary under test. Cargo names it to the root package's integration
/// tests at compile time only (`CARGO_BIN_EXE_granary`), not to this library, so it is
/// found the way cargo lays it out: `NEXTEST_BIN_EXE_granary` under nextest, else beside
/// the test binary's `deps/` directory (cargo builds it before the integration tests).
pub fn granary_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("NEXTEST_BIN_EXE_granary") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test binary is in <target>/<profile>/deps");
    let bin = dir.join(format!("granary{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "the granary binary is not at {}",
        bin.display()
    );
    bin
}
