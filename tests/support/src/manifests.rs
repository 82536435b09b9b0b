//! Reading the plain-YAML kustomizations under `deploy/` and the RBAC they grant: which
//! rules apply to a user through the bindings, whether a recorded API call is allowed,
//! and which rule cells no call used. Shared by the manifest checks
//! (`tests/deploy_manifests.rs`) and the recorded end-to-end run (`tests/e2e/deploy.rs`).
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use granary_apiserver::ApiCall;
use granary_runtime::config;
use serde_json::Value;

/// The repository's `deploy/` directory.
pub fn deploy_dir() -> PathBuf {
    crate::repo_root().join("deploy")
}

/// One YAML document and the file it came from.
#[derive(Clone, Debug)]
pub struct Doc {
    pub file: PathBuf,
    pub value: Value,
}

impl Doc {
    pub fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or_default()
    }
    pub fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or_default()
    }
    pub fn namespace(&self) -> Option<&str> {
        self.value["metadata"]["namespace"].as_str()
    }
}

/// Every document of one YAML file (empty documents skipped).
pub fn read_docs(file: &Path) -> Vec<Doc> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .unwrap_or_else(|e| panic!("{}: not valid YAML: {e}", file.display()));
    docs.into_iter()
        .filter(|d| !d.is_null())
        .map(|value| Doc {
            file: file.to_path_buf(),
            value,
        })
        .collect()
}

/// The `resources:` of `dir/kustomization.yaml`, as paths.
pub fn kustomization_resources(dir: &Path) -> Vec<PathBuf> {
    let k = read_docs(&dir.join("kustomization.yaml"));
    assert_eq!(k.len(), 1, "{}: one document", dir.display());
    k[0].value["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("{}: a resources list", dir.display()))
        .iter()
        .map(|r| dir.join(r.as_str().expect("a resource is a path")))
        .collect()
}

/// Every document a kustomization lists (recursing into listed directories that hold a
/// kustomization of their own).
pub fn load_kustomization(dir: &Path) -> Vec<Doc> {
    let mut out = Vec::new();
    for path in kustomization_resources(dir) {
        if path.is_dir() {
            out.extend(load_kustomization(&path));
        } else {
            out.extend(read_docs(&path));
        }
    }
    out
}

/// The configuration file inside a ConfigMap manifest, loaded as `granary` loads it.
pub fn config_from_configmap<K: config::ConfigKind>(
    configmap: &Path,
    overrides: &[config::Override],
) -> Result<K, config::ConfigError> {
    let docs = read_docs(configmap);
    let text = docs[0].value["data"]["config.yaml"]
        .as_str()
        .expect("the ConfigMap holds config.yaml");
    load_config_text(text, overrides)
}

/// A configuration file's text, loaded as `granary --config` loads it.
pub fn load_config_text<K: config::ConfigKind>(
    text: &str,
    overrides: &[config::Override],
) -> Result<K, config::ConfigError> {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, text).expect("config written");
    config::load::<K>(Some(&file), overrides)
}

/// One RBAC rule, lists as written.
#[derive(Clone, Debug, Default)]
pub struct Rule {
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub verbs: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

impl Rule {
    fn parse(v: &Value) -> Rule {
        Rule {
            api_groups: strings(&v["apiGroups"]),
            resources: strings(&v["resources"]),
            verbs: strings(&v["verbs"]),
            resource_names: strings(&v["resourceNames"]),
            non_resource_urls: strings(&v["nonResourceURLs"]),
        }
    }

    /// Whether this rule allows `call` (namespace scope is the grant's business).
    pub fn allows(&self, call: &ApiCall) -> bool {
        let resource = if call.subresource.is_empty() {
            call.resource.clone()
        } else {
            format!("{}/{}", call.resource, call.subresource)
        };
        self.verbs.contains(&call.verb)
            && self.api_groups.contains(&call.group)
            && self.resources.contains(&resource)
            && (self.resource_names.is_empty() || self.resource_names.contains(&call.name))
    }

    /// Every (group, resource, verb) cell the rule grants.
    pub fn cells(&self) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for g in &self.api_groups {
            for r in &self.resources {
                for v in &self.verbs {
                    out.push((g.clone(), r.clone(), v.clone()));
                }
            }
        }
        out
    }
}

/// A rule in force for a user: from role `role`, in `namespace` (`None`: cluster-wide).
#[derive(Clone, Debug)]
pub struct Grant {
    pub role: String,
    pub namespace: Option<String>,
    pub rule: Rule,
}

impl Grant {
    pub fn allows(&self, call: &ApiCall) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| ns == call.namespace)
            && self.rule.allows(call)
    }
}

/// The user name a subject of a binding authenticates as.
fn subject_user(subject: &Value) -> Option<String> {
    let name = subject["name"].as_str()?;
    match subject["kind"].as_str()? {
        "ServiceAccount" => Some(format!(
            "system:serviceaccount:{}:{name}",
            subject["namespace"].as_str()?
        )),
        "User" => Some(name.to_string()),
        _ => None,
    }
}

/// The rules `user` holds through the bindings among `docs` (roles looked up in `docs`).
pub fn grants_for(docs: &[Doc], user: &str) -> Vec<Grant> {
    let mut out = Vec::new();
    for binding in docs
        .iter()
        .filter(|d| matches!(d.kind(), "ClusterRoleBinding" | "RoleBinding"))
    {
        let bound = binding.value["subjects"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| subject_user(s).as_deref() == Some(user));
        if !bound {
            continue;
        }
        let role_kind = binding.value["roleRef"]["kind"]
            .as_str()
            .unwrap_or_default();
        let role_name = binding.value["roleRef"]["name"]
            .as_str()
            .unwrap_or_default();
        let scope = match binding.kind() {
            "RoleBinding" => Some(binding.namespace().unwrap_or("default").to_string()),
            _ => None,
        };
        let role = docs
            .iter()
            .find(|d| {
                d.kind() == role_kind
                    && d.name() == role_name
                    && (role_kind == "ClusterRole" || d.namespace() == scope.as_deref())
            })
            .unwrap_or_else(|| {
                panic!(
                    "{} {} binds {role_kind} {role_name}, which is not in the manifests",
                    binding.kind(),
                    binding.name()
                )
            });
        for rule in role.value["rules"].as_array().into_iter().flatten() {
            out.push(Grant {
                role: format!("{}/{}", role_kind, role_name),
                namespace: scope.clone(),
                rule: Rule::parse(rule),
            });
        }
    }
    out
}

/// Every rule of every Role and ClusterRole among `docs`, with the role's name.
pub fn all_rules(docs: &[Doc]) -> Vec<(String, Rule)> {
    docs.iter()
        .filter(|d| matches!(d.kind(), "ClusterRole" | "Role"))
        .flat_map(|d| {
            d.value["rules"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| (format!("{}/{}", d.kind(), d.name()), Rule::parse(r)))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Calls of `user` that no grant allows (non-resource URLs aside: discovery is open to
/// every authenticated user through the default `system:discovery` role).
pub fn denied<'a>(grants: &[Grant], calls: &'a [ApiCall], user: &str) -> Vec<&'a ApiCall> {
    calls
        .iter()
        .filter(|c| c.user == user && c.non_resource_path.is_empty())
        .filter(|c| !grants.iter().any(|g| g.allows(c)))
        .collect()
}

/// Granted (role, namespace, group, resource, verb) cells that no call of `user` used,
/// minus `allowed_unused` ((role, resource, verb) with a reason each).
pub fn unused(
    grants: &[Grant],
    calls: &[ApiCall],
    user: &str,
    allowed_unused: &[(&str, &str, &str, &str)],
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for g in grants {
        for (group, resource, verb) in g.rule.cells() {
            let (res, sub) = match resource.split_once('/') {
                Some((r, s)) => (r.to_string(), s.to_string()),
                None => (resource.clone(), String::new()),
            };
            let used = calls.iter().any(|c| {
                c.user == user
                    && c.verb == verb
                    && c.group == group
                    && c.resource == res
                    && c.subresource == sub
                    && g.allows(c)
            });
            let excused = allowed_unused
                .iter()
                .any(|(role, r, v, _why)| *role == g.role && *r == resource && *v == verb);
            if !used && !excused {
                out.insert(format!(
                    "{} (in {}): {verb} {group}/{resource}",
                    g.role,
                    g.namespace.as_deref().unwrap_or("cluster")
                ));
            }
        }
    }
    out
}
