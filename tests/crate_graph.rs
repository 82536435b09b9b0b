//! The workspace's dependency arrows point one way: each crate may depend only on the
//! crates listed before it in `LAYERS` (normal and dev-dependencies alike), so the
//! embedded API server never learns about Velero, the format never about controllers,
//! and the garden never about seeds. A new crate must be placed in `LAYERS` to pass.

use serde_json::Value;
use std::process::Command;

/// Bottom to top. `docs/architecture.md` ("Where things live") describes each.
const LAYERS: &[&str] = &[
    "granary-emulators",
    "granary-providers",
    "granary-api",
    "granary-runtime",
    "granary-apiserver",
    "granary-velero",
    "granary-velero-server",
    "granary-garden",
    "granary-seed",
    "granary-migrate",
    "granary-bench",
    "granary-test-support",
    "granary",
];

#[test]
fn dependencies_point_only_down() {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata is JSON");
    let layer = |name: &str| LAYERS.iter().position(|l| *l == name);
    let mut problems = Vec::new();
    let packages = meta["packages"].as_array().expect("packages");
    for package in packages {
        let name = package["name"].as_str().expect("name");
        let Some(own) = layer(name) else {
            problems.push(format!("{name} is not placed in LAYERS"));
            continue;
        };
        for dep in package["dependencies"].as_array().expect("dependencies") {
            let dep_name = dep["name"].as_str().expect("dependency name");
            match layer(dep_name) {
                Some(theirs) if theirs >= own => problems.push(format!(
                    "{name} depends on {dep_name}, which is not below it"
                )),
                _ => {}
            }
        }
    }
    let members: Vec<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    for l in LAYERS {
        if !members.contains(l) {
            problems.push(format!("{l} is in LAYERS but not a workspace member"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
