//! CRD generation: every kind Granary serves, as `CustomResourceDefinition` objects
//! derived from the Rust types, split by the side that installs them (garden:
//! `core.gardener.cloud`; seed: `extensions.gardener.cloud`, `velero.io`,
//! `oadp.openshift.io`). `granary crds` prints them and `deploy/*/crds/` holds that
//! output; a test fails when the two drift apart.
//!
//! Generated schemas carry no `default:` (defaults live in Rust, where they are tested)
//! and must be structural, as kube-apiserver demands ([`structural`]).

#[cfg(test)]
mod descriptions;
pub mod structural;
#[cfg(test)]
mod upstream;
pub mod wire;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

/// Which cluster a CRD is installed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Side {
    Garden,
    Seed,
}

impl Side {
    /// The directory under `deploy/` that holds this side's manifests.
    pub fn deploy_dir(self) -> &'static str {
        match self {
            Side::Garden => "garden",
            Side::Seed => "seed",
        }
    }
}

/// The CRDs of one side, or of both with `None`, ready to install.
pub fn crds(side: Option<Side>) -> Vec<CustomResourceDefinition> {
    let mut out = Vec::new();
    if side != Some(Side::Seed) {
        out.extend(super::core::crds());
    }
    if side != Some(Side::Garden) {
        out.extend(super::extensions::crds());
        out.extend(super::velero::crds());
        out.extend(super::oadp::crds());
    }
    out.into_iter().map(finish).collect()
}

/// Removes every `default` from the schemas (Granary applies defaults in Rust, and a
/// `default:` in a CRD would make the API server write values the Rust code never chose)
/// and gives them upstream's wire shape ([`wire`]).
fn finish(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let mut value = serde_json::to_value(&crd).expect("a CRD always serializes to JSON");
    if let Some(versions) = value
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
    {
        for version in versions {
            if let Some(schema) = version.pointer_mut("/schema/openAPIV3Schema") {
                strip_defaults(schema);
                wire::apply(schema);
            }
        }
    }
    serde_json::from_value(value).expect("removing defaults keeps a valid CRD")
}

fn strip_defaults(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            map.remove("default");
            for (key, child) in map.iter_mut() {
                // `properties` maps field names to schemas; a field may itself be called
                // `default`, so only schema-valued positions are walked for removal.
                if key == "properties" || key == "patternProperties" || key == "definitions" {
                    if let Value::Object(fields) = child {
                        fields.values_mut().for_each(strip_defaults);
                    }
                } else if key == "enum" || key == "example" {
                    continue;
                } else {
                    strip_defaults(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_defaults),
        _ => {}
    }
}

/// The file a CRD is stored in under `deploy/<side>/crds/`: `<group>_<plural>.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// The CRD as the YAML document stored in `deploy/`.
pub fn to_yaml(crd: &CustomResourceDefinition) -> String {
    serde_saphyr::to_string(crd).expect("a CRD always serializes to YAML")
}

/// Which side installs a CRD of this API group.
pub fn side_of(crd: &CustomResourceDefinition) -> Side {
    if crd.spec.group == "core.gardener.cloud" {
        Side::Garden
    } else {
        Side::Seed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    #[test]
    fn every_crd_is_structural_and_has_no_defaults() {
        let all = crds(None);
        assert!(!all.is_empty());
        for crd in &all {
            let problems = structural::problems(crd);
            assert!(
                problems.is_empty(),
                "{} is not structural:\n{}",
                crd.metadata.name.clone().unwrap_or_default(),
                problems.join("\n")
            );
            let json = serde_json::to_value(crd).expect("a CRD serializes");
            for version in json["spec"]["versions"].as_array().expect("versions") {
                let mut schema = version["schema"]["openAPIV3Schema"].clone();
                let before = schema.clone();
                strip_defaults(&mut schema);
                assert_eq!(schema, before, "{} carries a default", file_name(crd));
            }
            let yaml = to_yaml(crd);
            assert!(
                !yaml.contains("x-kubernetes-validations"),
                "{} carries CEL rules",
                file_name(crd)
            );
        }
    }

    #[test]
    fn sides_split_the_groups() {
        let garden = crds(Some(Side::Garden));
        let seed = crds(Some(Side::Seed));
        assert!(garden.iter().all(|c| c.spec.group == "core.gardener.cloud"));
        assert!(seed.iter().all(|c| c.spec.group != "core.gardener.cloud"));
        assert_eq!(garden.len() + seed.len(), crds(None).len());
    }

    #[test]
    fn strip_defaults_keeps_fields_named_default() {
        let mut schema = serde_json::json!({
            "type": "object",
            "default": {},
            "properties": {
                "default": {"type": "boolean", "default": false},
                "list": {"type": "array", "default": [], "items": {"type": "string", "default": "x"}}
            }
        });
        strip_defaults(&mut schema);
        assert_eq!(
            schema,
            serde_json::json!({
                "type": "object",
                "properties": {
                    "default": {"type": "boolean"},
                    "list": {"type": "array", "items": {"type": "string"}}
                }
            })
        );
    }

    /// `deploy/<side>/crds/` must hold exactly what `granary crds` prints.
    /// Regenerate with `cargo run -- crds --write deploy`.
    #[test]
    fn deploy_directory_matches_the_types() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
        for side in [Side::Garden, Side::Seed] {
            let dir = root.join(side.deploy_dir()).join("crds");
            let expected: BTreeMap<String, String> = crds(Some(side))
                .iter()
                .map(|c| (file_name(c), to_yaml(c)))
                .collect();
            let mut actual = BTreeMap::new();
            for entry in
                std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            {
                let path = entry.expect("readable directory entry").path();
                if path.extension().is_some_and(|e| e == "yaml") {
                    let name = path
                        .file_name()
                        .expect("file has a name")
                        .to_string_lossy()
                        .to_string();
                    actual.insert(
                        name,
                        std::fs::read_to_string(&path).expect("readable CRD file"),
                    );
                }
            }
            let expected_names: Vec<_> = expected.keys().collect();
            let actual_names: Vec<_> = actual.keys().collect();
            assert_eq!(
                actual_names,
                expected_names,
                "files in {} drifted; run `cargo run -- crds --write deploy`",
                dir.display()
            );
            for (name, yaml) in &expected {
                assert!(
                    actual[name] == *yaml,
                    "{}/{name} drifted from the types; run `cargo run -- crds --write deploy`",
                    dir.display()
                );
            }
        }
    }
}
