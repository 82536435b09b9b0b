//! The server's identity across restarts. With a data directory, the CA (key and
//! certificate), the bearer token and the port are kept under `<data-dir>/identity/`
//! (files of mode 0600), so a kubeconfig written by an earlier start (e.g. `granary
//! dev`'s, used by kubectl in another terminal) keeps working after a restart. Files that
//! are missing, unreadable or do not belong together are replaced by a new identity,
//! with a warning that names the file and the reason but never a secret.

use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::tls::{self, CaPem, ServerTls};

const DIR: &str = "identity";
const CA_KEY: &str = "ca.key";
const CA_CERT: &str = "ca.crt";
const TOKEN: &str = "token";
const PORT: &str = "port";

/// What clients need to trust and be let in by one server.
pub(crate) struct Identity {
    pub tls: ServerTls,
    /// The bearer token every request must carry (a secret: never logged).
    pub token: String,
}

fn random_token() -> String {
    use rand::Rng;
    let bytes: [u8; 24] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A new identity, not kept anywhere.
pub(crate) fn fresh(now: DateTime<Utc>) -> Result<Identity, String> {
    Ok(Identity {
        tls: tls::serving(&tls::new_ca()?, now)?,
        token: random_token(),
    })
}

/// The identity kept in `data_dir`, or a new one (then kept there).
pub(crate) fn load_or_create(data_dir: &Path, now: DateTime<Utc>) -> std::io::Result<Identity> {
    let dir = data_dir.join(DIR);
    match load(&dir, now) {
        Ok(Some(identity)) => return Ok(identity),
        Ok(None) => {}
        Err(reason) => tracing::warn!(
            dir = %dir.display(),
            %reason,
            "the kept API server identity is unusable; making a new CA and token \
             (kubeconfigs written before stop working)"
        ),
    }
    let ca = tls::new_ca().map_err(std::io::Error::other)?;
    let token = random_token();
    let tls = tls::serving(&ca, now).map_err(std::io::Error::other)?;
    save(&dir, &ca, &token)?;
    Ok(Identity { tls, token })
}

/// `Ok(None)` when nothing is kept yet; `Err` (a reason without secrets) when what is
/// kept cannot be used.
fn load(dir: &Path, now: DateTime<Utc>) -> Result<Option<Identity>, String> {
    let files = [CA_KEY, CA_CERT, TOKEN].map(|f| dir.join(f));
    if files.iter().all(|f| !f.exists()) {
        return Ok(None);
    }
    let read = |f: &PathBuf| {
        std::fs::read_to_string(f).map_err(|e| format!("reading {}: {e}", f.display()))
    };
    let [key, cert, token] = &files;
    let ca = CaPem {
        key: read(key)?,
        cert: read(cert)?,
    };
    let token = read(token)?.trim().to_string();
    if token.len() < 32 || !token.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(format!("{} does not hold a token", files[2].display()));
    }
    let tls = tls::serving(&ca, now)?;
    Ok(Some(Identity { tls, token }))
}

/// Writes `contents` to `path` with mode 0600 through a temporary file and a rename, so a
/// crash leaves the old file or the new one.
fn write_secret(path: &Path, contents: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(&tmp)?;
    f.write_all(contents.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

fn save(dir: &Path, ca: &CaPem, token: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    write_secret(&dir.join(CA_KEY), &ca.key)?;
    write_secret(&dir.join(CA_CERT), &ca.cert)?;
    write_secret(&dir.join(TOKEN), &format!("{token}\n"))?;
    std::fs::File::open(dir)?.sync_all()
}

/// The port the server in `data_dir` listened on last time.
pub(crate) fn recorded_port(data_dir: &Path) -> Option<u16> {
    std::fs::read_to_string(data_dir.join(DIR).join(PORT))
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|p| *p != 0)
}

/// Records the port the server in `data_dir` listens on.
pub(crate) fn record_port(data_dir: &Path, port: u16) -> std::io::Result<()> {
    if recorded_port(data_dir) == Some(port) {
        return Ok(());
    }
    std::fs::create_dir_all(data_dir.join(DIR))?;
    write_secret(&data_dir.join(DIR).join(PORT), &format!("{port}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_is_kept_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let first = load_or_create(dir.path(), Utc::now()).unwrap();
        let again = load_or_create(dir.path(), Utc::now()).unwrap();
        assert_eq!(first.token, again.token);
        assert_eq!(first.tls.ca_pem, again.tls.ca_pem);
        #[cfg(unix)]
        for f in [CA_KEY, CA_CERT, TOKEN] {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(DIR).join(f))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{f}");
        }
        let other = fresh(Utc::now()).unwrap();
        assert_ne!(other.token, first.token);
        assert_ne!(other.tls.ca_pem, first.tls.ca_pem);
    }

    #[test]
    fn an_unusable_identity_is_replaced() {
        for (file, junk) in [
            (CA_KEY, "-----BEGIN PRIVATE KEY-----\ntorn"),
            (CA_CERT, ""),
            (TOKEN, "short"),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let first = load_or_create(dir.path(), Utc::now()).unwrap();
            std::fs::write(dir.path().join(DIR).join(file), junk).unwrap();
            let next = load_or_create(dir.path(), Utc::now()).unwrap();
            assert_ne!(next.tls.ca_pem, first.tls.ca_pem, "{file}");
            assert_ne!(next.token, first.token, "{file}");
            let kept = load_or_create(dir.path(), Utc::now()).unwrap();
            assert_eq!(kept.token, next.token, "the new identity is kept ({file})");
        }
        // A missing file too.
        let dir = tempfile::tempdir().unwrap();
        let first = load_or_create(dir.path(), Utc::now()).unwrap();
        std::fs::remove_file(dir.path().join(DIR).join(CA_CERT)).unwrap();
        let next = load_or_create(dir.path(), Utc::now()).unwrap();
        assert_ne!(next.token, first.token);
    }

    #[test]
    fn the_port_is_recorded() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(recorded_port(dir.path()), None);
        record_port(dir.path(), 41234).unwrap();
        assert_eq!(recorded_port(dir.path()), Some(41234));
        std::fs::write(dir.path().join(DIR).join(PORT), "junk").unwrap();
        assert_eq!(recorded_port(dir.path()), None);
    }
}
