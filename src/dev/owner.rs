//! The sample namespace owner of `granary dev`: a user who is no cluster admin, owns the
//! namespace `team-a` on one seed and backs it up and restores it with OADP's non-admin
//! API (walkthrough: docs/tour.md#self-service-backups-for-a-namespace-owner). That
//! seed's API server knows the owner from a static token file (kube-apiserver's
//! `--token-auth-file` format) kept in the data directory; the owner is bound in `team-a`
//! to the `admin` ClusterRole and to the namespace-owner ClusterRole of
//! `deploy/seed/nonadmin-rbac.yaml`, and gets a kubeconfig of their own beside the admin
//! ones. The admin kubeconfigs keep the servers' own tokens, which are `system:masters`.
//!
//! The token is random, made once per data directory (`--reset` makes a new one), and
//! never logged: it is only in the token file and the owner's kubeconfig, both 0600.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding, RoleRef, Subject};
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};

use crate::dev::DevError;
use crate::dev::compose::private_file;
use granary_apiserver::EmbeddedServer;

/// The sample owner's namespace.
pub const OWNER_NAMESPACE: &str = "team-a";
/// The sample owner's user name.
pub const OWNER_USER: &str = "team-a-owner";
/// The token file, in the data directory.
pub const TOKEN_FILE: &str = "owner-tokens.csv";
/// With the `local` store: the bucket (a directory under the buckets) the namespace
/// owner may use for locations of their own.
pub const OWNER_BUCKET: &str = "team-a-backups";
/// The ClusterRole every namespace owner is bound to, as deploy/seed ships it.
const NONADMIN_RBAC: &str = include_str!("../../deploy/seed/nonadmin-rbac.yaml");
/// The ClusterRoles the owner holds in their namespace.
const OWNER_ROLES: [&str; 2] = ["admin", "nonadmin-editor-role"];

/// The owner's bearer token (a secret: not `Debug`-printed).
#[derive(Clone, PartialEq, Eq)]
pub struct OwnerToken(String);

impl std::fmt::Debug for OwnerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OwnerToken(<redacted>)")
    }
}

impl OwnerToken {
    fn random() -> OwnerToken {
        use rand::Rng;
        let bytes: [u8; 24] = rand::rng().random();
        OwnerToken(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The owner's line of a token file that holds it (`token,user,uid`), if any line
    /// names the owner with a usable token.
    fn from_token_file(text: &str) -> Option<OwnerToken> {
        text.lines().find_map(|line| {
            let mut fields = line.split(',').map(str::trim);
            let (token, user) = (fields.next()?, fields.next()?);
            let usable = token.len() >= 32 && token.bytes().all(|b| b.is_ascii_alphanumeric());
            (user == OWNER_USER && usable).then(|| OwnerToken(token.to_string()))
        })
    }

    /// The token file text: the owner only.
    fn token_file(&self) -> String {
        format!("{},{OWNER_USER},uid-{OWNER_USER}\n", self.0)
    }
}

/// The token file of `data_dir`, written (0600) with a new random token unless it
/// already holds a usable one for the owner.
pub fn ensure_token_file(data_dir: &Path) -> Result<(PathBuf, OwnerToken), DevError> {
    let path = data_dir.join(TOKEN_FILE);
    if let Ok(text) = std::fs::read_to_string(&path)
        && let Some(token) = OwnerToken::from_token_file(&text)
    {
        // Tightened if an older run or a user left it wider.
        drop(private_file(&path, true)?);
        return Ok((path, token));
    }
    let token = OwnerToken::random();
    let mut file = private_file(&path, false)?;
    use std::io::Write;
    file.set_len(0)
        .and_then(|()| file.write_all(token.token_file().as_bytes()))
        .map_err(|source| DevError::Io {
            what: format!("writing {}", path.display()),
            source,
        })?;
    Ok((path, token))
}

/// The owner's kubeconfig for `server`: the admin's with the owner's token, and
/// `team-a` as the context's namespace (so kubectl needs no `-n`).
pub fn kubeconfig_yaml(server: &EmbeddedServer, token: &OwnerToken) -> Result<String, DevError> {
    let mut kc = server.kubeconfig()?;
    for named in &mut kc.auth_infos {
        named.name = OWNER_USER.to_string();
        if let Some(info) = named.auth_info.as_mut() {
            info.token = Some(token.0.clone().into());
        }
    }
    for named in &mut kc.contexts {
        named.name = OWNER_NAMESPACE.to_string();
        if let Some(context) = named.context.as_mut() {
            context.user = Some(OWNER_USER.to_string());
            context.namespace = Some(OWNER_NAMESPACE.to_string());
        }
    }
    kc.current_context = Some(OWNER_NAMESPACE.to_string());
    serde_saphyr::to_string(&kc)
        .map_err(|e| DevError::Start(format!("writing the owner's kubeconfig: {e}")))
}

/// Writes the owner's kubeconfig (0600) to `path`.
pub fn write_kubeconfig(
    server: &EmbeddedServer,
    token: &OwnerToken,
    path: &Path,
) -> Result<(), DevError> {
    let text = kubeconfig_yaml(server, token)?;
    let mut file = private_file(path, false)?;
    use std::io::Write;
    file.set_len(0)
        .and_then(|()| file.write_all(text.as_bytes()))
        .map_err(|source| DevError::Io {
            what: format!("writing {}", path.display()),
            source,
        })
}

/// The RoleBinding of the owner to `cluster_role` in the owner's namespace.
fn binding(cluster_role: &str) -> RoleBinding {
    let mut b = RoleBinding::default();
    b.metadata.name = Some(format!("{OWNER_USER}-{cluster_role}"));
    b.metadata.namespace = Some(OWNER_NAMESPACE.to_string());
    b.role_ref = RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: "ClusterRole".into(),
        name: cluster_role.into(),
    };
    b.subjects = Some(vec![Subject {
        kind: "User".into(),
        name: OWNER_USER.into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        ..Default::default()
    }]);
    b
}

/// The namespace-owner ClusterRole of `deploy/seed/nonadmin-rbac.yaml`.
fn nonadmin_cluster_role() -> Result<ClusterRole, DevError> {
    serde_saphyr::from_str(NONADMIN_RBAC)
        .map_err(|e| DevError::Start(format!("deploy/seed/nonadmin-rbac.yaml: {e}")))
}

/// Makes the owner's namespace, the namespace-owner ClusterRole and the owner's
/// RoleBindings on the seed (server-side apply: a restart changes nothing).
pub async fn grant(seed: &Client) -> Result<(), DevError> {
    let params = PatchParams::apply("granary-dev").force();
    let failed = |what: String| move |source| DevError::Kube { what, source };
    let mut ns = Namespace::default();
    ns.metadata.name = Some(OWNER_NAMESPACE.to_string());
    Api::<Namespace>::all(seed.clone())
        .patch(OWNER_NAMESPACE, &params, &Patch::Apply(&ns))
        .await
        .map_err(failed(format!("creating namespace {OWNER_NAMESPACE}")))?;
    let role = nonadmin_cluster_role()?;
    Api::<ClusterRole>::all(seed.clone())
        .patch(&role.name_any(), &params, &Patch::Apply(&role))
        .await
        .map_err(failed(format!("applying ClusterRole {}", role.name_any())))?;
    let bindings: Api<RoleBinding> = Api::namespaced(seed.clone(), OWNER_NAMESPACE);
    for role in OWNER_ROLES {
        let b = binding(role);
        bindings
            .patch(&b.name_any(), &params, &Patch::Apply(&b))
            .await
            .map_err(failed(format!("binding {OWNER_USER} to {role}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_file_is_made_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (path, first) = ensure_token_file(dir.path()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("{},team-a-owner,uid-team-a-owner\n", first.0));
        assert_eq!(first.0.len(), 48);
        let (_, again) = ensure_token_file(dir.path()).unwrap();
        assert_eq!(again, first, "kept across starts");
        let other = tempfile::tempdir().unwrap();
        assert_ne!(ensure_token_file(other.path()).unwrap().1, first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        assert!(!format!("{first:?}").contains(&first.0), "never printed");
    }

    #[test]
    fn an_unusable_token_file_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(TOKEN_FILE);
        for text in ["", "short,team-a-owner,uid\n", "x\n"] {
            std::fs::write(&path, text).unwrap();
            let (_, token) = ensure_token_file(dir.path()).unwrap();
            assert!(token.0.len() >= 32);
            assert_eq!(
                std::fs::read_to_string(&path).unwrap(),
                token.token_file(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn the_shipped_cluster_role_is_the_one_bound() {
        let role = nonadmin_cluster_role().unwrap();
        assert_eq!(role.name_any(), OWNER_ROLES[1]);
        let resources: Vec<String> = role
            .rules
            .unwrap_or_default()
            .into_iter()
            .flat_map(|r| r.resources.unwrap_or_default())
            .collect();
        for kind in [
            "nonadminbackups",
            "nonadminrestores",
            "nonadminbackupstoragelocations",
            "nonadmindownloadrequests",
        ] {
            assert!(resources.iter().any(|r| r == kind), "{kind}");
            assert!(
                resources.iter().any(|r| *r == format!("{kind}/status")),
                "{kind}/status"
            );
        }
        let b = binding("admin");
        assert_eq!(b.metadata.namespace.as_deref(), Some(OWNER_NAMESPACE));
        assert_eq!(b.subjects.unwrap()[0].name, OWNER_USER);
    }
}
