//! Optional durability: an append-only log of JSON lines in the data directory.
//!
//! Every write appends one line (`put` with the whole object, or `del`) with a single
//! `write` call before the request is answered, so a crash of the process loses nothing
//! that was acknowledged. The log is fsynced at compaction and shutdown. When it grows
//! past twice the live objects (and at least [`COMPACT_MIN`] lines), it is rewritten as a
//! snapshot into a temporary file, fsynced, and renamed over the log. At start the log is
//! replayed; the first line that is torn or unreadable ends the replay and the file is
//! truncated there, so a torn last write loses at most that write.
//!
//! The log holds every object, Secrets included: the directory is kept at mode 0700 and
//! the log and its snapshots at 0600, created so and tightened when an older run left
//! them wider.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use bytes::Bytes;
use serde_json::{Value, json};

use super::store::{GroupResource, Journal, ObjectKey, Record};

const LOG: &str = "objects.log";
const COMPACT_MIN: u64 = 10_000;

pub(crate) struct Log {
    dir: PathBuf,
    inner: Mutex<LogInner>,
}

struct LogInner {
    file: File,
    lines: u64,
}

type Restored = (Log, u64, Vec<(GroupResource, ObjectKey, Bytes)>);

/// Mode of the data directory: only the owner may list or enter it.
#[cfg(unix)]
const DIR_MODE: u32 = 0o700;
/// Mode of the log and its snapshots: they hold Secret data.
#[cfg(unix)]
const FILE_MODE: u32 = 0o600;

/// Options for a file of the log, created with [`FILE_MODE`].
fn private_file() -> OpenOptions {
    let mut opts = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(FILE_MODE);
    }
    opts
}

/// Sets `path` to `mode` unless it already is (a directory or file of an older run).
#[cfg(unix)]
fn tighten(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if std::fs::metadata(path)?.permissions().mode() & 0o777 != mode {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

/// Opens (creating) the log in `dir` and replays it.
pub(crate) fn open(dir: &Path) -> std::io::Result<Restored> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(dir)?;
        tighten(dir, DIR_MODE)?;
    }
    #[cfg(not(unix))]
    std::fs::create_dir_all(dir)?;
    let path = dir.join(LOG);
    #[cfg(unix)]
    if path.exists() {
        tighten(&path, FILE_MODE)?;
    }
    let mut objects: HashMap<(GroupResource, ObjectKey), Bytes> = HashMap::new();
    let mut rv = 0u64;
    let mut good_len = 0u64;
    let mut lines = 0u64;
    if let Ok(f) = File::open(&path) {
        let mut reader = BufReader::new(f);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            let n = reader.read_until(b'\n', &mut buf)?;
            if n == 0 || buf.last() != Some(&b'\n') {
                break;
            }
            let Ok(entry) = serde_json::from_slice::<Value>(&buf) else {
                break;
            };
            if !apply(&entry, &mut objects, &mut rv) {
                break;
            }
            good_len += n as u64;
            lines += 1;
        }
    }
    let file = private_file()
        .create(true)
        .append(true)
        .read(true)
        .open(&path)?;
    if file.metadata()?.len() != good_len {
        tracing::warn!(path = %path.display(), kept = good_len, "dropping a torn tail of the object log");
        file.set_len(good_len)?;
        file.sync_all()?;
    }
    let restored = objects
        .into_iter()
        .map(|((gr, key), data)| (gr, key, data))
        .collect();
    Ok((
        Log {
            dir: dir.to_path_buf(),
            inner: Mutex::new(LogInner { file, lines }),
        },
        rv,
        restored,
    ))
}

/// Applies one log entry; false when it is malformed.
fn apply(
    entry: &Value,
    objects: &mut HashMap<(GroupResource, ObjectKey), Bytes>,
    rv: &mut u64,
) -> bool {
    let s = |k: &str| entry.get(k).and_then(Value::as_str);
    let key = match (s("g"), s("r"), s("ns"), s("n")) {
        (Some(g), Some(r), Some(ns), Some(n)) => {
            Some((GroupResource::new(g, r), (ns.to_string(), n.to_string())))
        }
        _ => None,
    };
    match (s("op"), key) {
        (Some("rv"), _) => {
            let Some(v) = entry.get("rv").and_then(Value::as_u64) else {
                return false;
            };
            *rv = (*rv).max(v);
        }
        (Some("put"), Some(key)) => {
            let Some(obj) = entry.get("o") else {
                return false;
            };
            let obj_rv = obj
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
            *rv = (*rv).max(obj_rv);
            objects.insert(
                key,
                Bytes::from(obj.to_string().into_bytes().into_boxed_slice()),
            );
        }
        (Some("del"), Some(key)) => {
            let Some(v) = entry.get("rv").and_then(Value::as_u64) else {
                return false;
            };
            *rv = (*rv).max(v);
            objects.remove(&key);
        }
        _ => return false,
    }
    true
}

fn put_line(gr: &GroupResource, key: &ObjectKey, data: &[u8]) -> Vec<u8> {
    let head =
        json!({"op": "put", "g": gr.group, "r": gr.resource, "ns": key.0, "n": key.1}).to_string();
    let mut line = Vec::with_capacity(head.len() + data.len() + 8);
    line.extend_from_slice(&head.as_bytes()[..head.len() - 1]);
    line.extend_from_slice(b",\"o\":");
    line.extend_from_slice(data);
    line.extend_from_slice(b"}\n");
    line
}

impl LogInner {
    fn append(&mut self, line: &[u8]) {
        if let Err(e) = self.file.write_all(line) {
            tracing::error!(error = %e, "writing the object log failed; the write is not durable");
        }
        self.lines += 1;
    }
}

impl Log {
    fn lock(&self) -> std::sync::MutexGuard<'_, LogInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn write_snapshot(
        &self,
        rv: u64,
        objects: &HashMap<GroupResource, BTreeMap<ObjectKey, Record>>,
    ) -> std::io::Result<(File, u64)> {
        let tmp = self.dir.join(format!("{LOG}.tmp"));
        // A leftover from a crash may have another mode: start afresh.
        let _ = std::fs::remove_file(&tmp);
        let mut out =
            std::io::BufWriter::new(private_file().write(true).create_new(true).open(&tmp)?);
        out.write_all(json!({"op": "rv", "rv": rv}).to_string().as_bytes())?;
        out.write_all(b"\n")?;
        let mut lines = 1;
        for (gr, map) in objects {
            for (key, rec) in map {
                out.write_all(&put_line(gr, key, &rec.data))?;
                lines += 1;
            }
        }
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, self.dir.join(LOG))?;
        File::open(&self.dir)?.sync_all()?;
        let file = OpenOptions::new().append(true).open(self.dir.join(LOG))?;
        Ok((file, lines))
    }
}

impl Journal for Log {
    fn put(&self, gr: &GroupResource, key: &ObjectKey, data: &[u8]) {
        self.lock().append(&put_line(gr, key, data));
    }

    fn remove(&self, gr: &GroupResource, key: &ObjectKey, rv: u64) {
        let line =
            json!({"op": "del", "g": gr.group, "r": gr.resource, "ns": key.0, "n": key.1, "rv": rv})
                .to_string() + "\n";
        self.lock().append(line.as_bytes());
    }

    fn maybe_compact(
        &self,
        rv: u64,
        objects: &HashMap<GroupResource, BTreeMap<ObjectKey, Record>>,
    ) {
        let live: u64 = objects.values().map(|m| m.len() as u64).sum();
        if self.lock().lines < COMPACT_MIN.max(2 * live) {
            return;
        }
        match self.write_snapshot(rv, objects) {
            Ok((file, lines)) => {
                let mut inner = self.lock();
                inner.file = file;
                inner.lines = lines;
            }
            Err(e) => {
                tracing::error!(error = %e, "compacting the object log failed; keeping the old log")
            }
        }
    }

    fn flush(&self) {
        if let Err(e) = self.lock().file.sync_all() {
            tracing::error!(error = %e, "syncing the object log failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(data: &str) -> Bytes {
        Bytes::from(data.to_string())
    }

    #[test]
    fn replay_restores_objects_and_drops_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let gr = GroupResource::new("", "configmaps");
        {
            let (log, rv, objs) = open(dir.path()).unwrap();
            assert_eq!((rv, objs.len()), (0, 0));
            log.put(
                &gr,
                &("ns".into(), "a".into()),
                br#"{"metadata":{"name":"a","resourceVersion":"5"}}"#,
            );
            log.put(
                &gr,
                &("ns".into(), "b".into()),
                br#"{"metadata":{"name":"b","resourceVersion":"6"}}"#,
            );
            log.remove(&gr, &("ns".into(), "a".into()), 7);
            log.flush();
        }
        // A torn write: half a line at the end.
        let path = dir.path().join(LOG);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"op":"put","g":"","r":"configmaps","ns":"ns","n":"c","o":{"meta"#)
            .unwrap();
        drop(f);
        let (_, rv, objs) = open(dir.path()).unwrap();
        assert_eq!(rv, 7);
        assert_eq!(objs.len(), 1);
        assert_eq!(objs[0].1.1, "b");
        let len = std::fs::metadata(&path).unwrap().len();
        assert!(
            std::fs::read(&path).unwrap().ends_with(b"}\n"),
            "torn tail truncated ({len} bytes)"
        );
    }

    #[test]
    fn compaction_keeps_live_objects_and_rv() {
        let dir = tempfile::tempdir().unwrap();
        let gr = GroupResource::new("", "configmaps");
        let (log, _, _) = open(dir.path()).unwrap();
        let mut map = BTreeMap::new();
        map.insert(
            ("ns".into(), "x".into()),
            Record {
                uid: 0,
                flags: 0,
                data: rec(r#"{"metadata":{"name":"x","resourceVersion":"3"}}"#),
                gc: None,
            },
        );
        let mut objects = HashMap::new();
        objects.insert(gr.clone(), map);
        let (_, lines) = log.write_snapshot(42, &objects).unwrap();
        assert_eq!(lines, 2);
        drop(log);
        let (_, rv, objs) = open(dir.path()).unwrap();
        assert_eq!((rv, objs.len()), (42, 1));
    }

    #[cfg(unix)]
    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[cfg(unix)]
    #[test]
    fn directory_log_and_snapshot_are_private() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("garden");
        let gr = GroupResource::new("", "secrets");
        let (log, _, _) = open(&dir).unwrap();
        log.put(
            &gr,
            &("ns".into(), "s".into()),
            br#"{"data":{"k":"c2VjcmV0"}}"#,
        );
        assert_eq!(mode(&dir), 0o700, "data directory");
        assert_eq!(mode(&dir.join(LOG)), 0o600, "log");
        let (_, lines) = log.write_snapshot(1, &HashMap::new()).unwrap();
        assert_eq!(lines, 1);
        assert_eq!(mode(&dir.join(LOG)), 0o600, "log after a snapshot");
    }

    #[cfg(unix)]
    #[test]
    fn an_older_runs_wide_modes_are_tightened_on_open() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("garden");
        drop(open(&dir).unwrap());
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(dir.join(LOG), std::fs::Permissions::from_mode(0o644)).unwrap();
        drop(open(&dir).unwrap());
        assert_eq!(mode(&dir), 0o700, "data directory");
        assert_eq!(mode(&dir.join(LOG)), 0o600, "log");
    }
}
