//! `docs/configuration.md`, generated from the configuration types themselves: their
//! JSON schemas (field names as serde writes them, doc comments as descriptions,
//! defaults from `Default`) become one table per kind. A test fails when the file is
//! stale; `GRANARY_REGENERATE=1` rewrites it.

use granary_garden::config::GardenConfiguration;
use granary_seed::config::SeedConfiguration;
use granary_velero_server::settings::ServerConfiguration;
use schemars::JsonSchema;
use serde_json::Value;

/// The kinds, the command that reads each, and a sentence on what it configures.
fn kinds() -> Vec<(&'static str, &'static str, &'static str, Value)> {
    vec![
        (
            "GardenConfiguration",
            "granary garden --config FILE",
            "The garden controllers: bucket quotas per provider, hand-over and shard \
             removal delays, seed liveness, leader election, metrics and the seed authorizer.",
            schema::<GardenConfiguration>(),
        ),
        (
            "SeedConfiguration",
            "granary seed --config FILE",
            "One seed's agent: its name and garden, its controllers, lease renewal, leader \
             election, metrics and the Velero-compatible server it runs (`velero`).",
            schema::<SeedConfiguration>(),
        ),
        (
            "ServerConfiguration",
            "granary server --config FILE",
            "The Velero-compatible server run on its own, beside a cluster that has no \
             seed agent: the same `velero` settings as a seed's.",
            schema::<ServerConfiguration>(),
        ),
    ]
}

fn schema<T: JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(T)).expect("a schema is JSON")
}

/// The whole of `docs/configuration.md`.
pub fn markdown() -> String {
    let mut out = String::from(
        "# Configuration reference\n\n\
         <!-- Generated from the configuration types by `cargo test -p granary \
         config_reference` with GRANARY_REGENERATE=1; do not edit by hand. -->\n\n\
         Each command reads one YAML document of its kind (`apiVersion: \
         granary.gardener.cloud/v1alpha1`); a file may hold several kinds separated by `---`. \
         Every field is optional unless its description says otherwise: defaults come from \
         the types, the file overrides them, and command-line flags override the file. An \
         unknown field or a wrong value is refused with the field's path. Durations are \
         written as `90s`, `5m` or `72h`. How to deploy with these files: \
         [operations.md](operations.md).\n",
    );
    for (kind, command, about, schema) in kinds() {
        out.push_str(&format!(
            "\n## {kind}\n\nRead by `{command}`. {about}\n\n\
             | Field | Type | Default | Description |\n|---|---|---|---|\n"
        ));
        let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
        rows(&schema, &defs, "", &mut out);
    }
    out
}

/// Follows `$ref` (alone or as the single member of `allOf`) to the definition.
fn resolve<'a>(schema: &'a Value, defs: &'a Value) -> &'a Value {
    let target = schema.get("$ref").or_else(|| {
        schema
            .get("allOf")
            .and_then(Value::as_array)
            .filter(|all| all.len() == 1)
            .and_then(|all| all[0].get("$ref"))
    });
    match target
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
    {
        Some(name) => defs.get(name).map(|d| resolve(d, defs)).unwrap_or(schema),
        None => schema,
    }
}

/// A nullable `T` (`anyOf: [T, null]`) documented as `T`.
fn non_null<'a>(schema: &'a Value, defs: &'a Value) -> &'a Value {
    let resolved = resolve(schema, defs);
    if let Some(any) = resolved.get("anyOf").and_then(Value::as_array) {
        let others: Vec<&Value> = any
            .iter()
            .filter(|s| s.get("type").and_then(Value::as_str) != Some("null"))
            .collect();
        if let [only] = others.as_slice() {
            return resolve(only, defs);
        }
    }
    resolved
}

fn rows(schema: &Value, defs: &Value, prefix: &str, out: &mut String) {
    let schema = non_null(schema, defs);
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, property) in properties {
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        let target = non_null(property, defs);
        let description = text(property).or_else(|| text(target)).unwrap_or_default();
        let default = property
            .get("default")
            .map(|d| format!("`{}`", serde_json::to_string(d).expect("JSON")))
            .unwrap_or_default();
        let nested = target.get("properties").is_some();
        // An object's default is the sum of its fields' defaults, listed below it.
        let default = if nested { String::new() } else { default };
        out.push_str(&format!(
            "| `{path}` | {} | {default} | {} |\n",
            type_of(target, defs),
            cell(&description)
        ));
        if nested {
            rows(target, defs, &path, out);
        } else if let Some(items) = target.get("items") {
            // A list of objects: each item's fields, as `list[].field`.
            rows(items, defs, &format!("{path}[]"), out);
        }
    }
}

fn text(schema: &Value) -> Option<String> {
    schema
        .get("description")
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn type_of(schema: &Value, defs: &Value) -> String {
    let schema = non_null(schema, defs);
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let values: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
        return values.join(", ").replace('"', "");
    }
    if schema.get("properties").is_some() {
        return "object".to_string();
    }
    if let Some(one_of) = schema.get("oneOf").and_then(Value::as_array) {
        let values: Vec<String> = one_of
            .iter()
            .filter_map(|v| {
                v.get("const")
                    .or_else(|| v.get("enum").and_then(|e| e.get(0)))
            })
            .map(|v| format!("`{}`", v.as_str().unwrap_or_default()))
            .collect();
        if !values.is_empty() {
            return values.join(", ");
        }
    }
    let ty = match schema.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "value".to_string(),
    };
    match ty.as_str() {
        "array" => {
            let items = schema.get("items").map(|i| type_of(i, defs));
            format!("list of {}", items.unwrap_or_else(|| "value".into()))
        }
        "string" if schema.get("format").and_then(Value::as_str) == Some("duration") => {
            "duration".to_string()
        }
        "object" if schema.get("properties").is_none() => "map".to_string(),
        "integer" | "number" => "number".to_string(),
        _ => ty,
    }
}

/// One table cell: one line, pipes escaped.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_configuration_md_is_generated_from_the_types() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md");
        let expected = markdown();
        if std::env::var("GRANARY_REGENERATE").is_ok_and(|v| v == "1") {
            std::fs::write(path, &expected).expect("writes docs/configuration.md");
        }
        let actual = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            actual == expected,
            "docs/configuration.md is stale: run `GRANARY_REGENERATE=1 cargo test -p granary config_reference`"
        );
    }

    #[test]
    fn every_field_of_every_kind_is_listed_with_a_description() {
        let doc = markdown();
        for field in [
            "`controllers.backupBucket.quota`",
            "`seedAuthorization.bindAddress`",
            "`controllers.backupEntry.deletionGracePeriodHours`",
            "`velero.nonAdmin.restoreRoleCeiling`",
            "`velero.defaultBackupTTL`",
            "`leaderElection.leaseDuration`",
        ] {
            assert!(doc.contains(field), "{field} missing");
        }
        let undocumented: Vec<&str> = doc
            .lines()
            .filter(|l| l.starts_with("| `") && l.ends_with("|  |"))
            .collect();
        assert!(
            undocumented.is_empty(),
            "fields without a doc comment:\n{}",
            undocumented.join("\n")
        );
    }
}
