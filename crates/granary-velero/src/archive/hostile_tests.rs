//! Hostile archives: each is refused with its own error, and extraction never writes
//! outside its target directory.

use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;

use super::*;

enum Raw<'a> {
    File {
        path: &'a [u8],
        data: &'a [u8],
    },
    Typed {
        path: &'a [u8],
        kind: tar::EntryType,
        link: &'a [u8],
        declared: u64,
    },
    Pax {
        records: Vec<(&'a str, &'a [u8])>,
    },
    LongName(&'a [u8]),
}

/// Writes tar headers byte by byte, bypassing the `tar` crate's own path checks.
fn hostile(entries: &[Raw<'_>]) -> Vec<u8> {
    let mut b = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    let header = |path: &[u8], kind, size: u64, link: &[u8]| {
        let mut h = tar::Header::new_gnu();
        let name = &mut h.as_old_mut().name;
        name[..path.len()].copy_from_slice(path);
        let l = &mut h.as_old_mut().linkname;
        l[..link.len()].copy_from_slice(link);
        h.set_entry_type(kind);
        h.set_mode(0o755);
        h.set_size(size);
        h.set_cksum();
        h
    };
    for e in entries {
        match e {
            Raw::File { path, data } => b
                .append(
                    &header(path, tar::EntryType::Regular, data.len() as u64, b""),
                    *data,
                )
                .expect("append"),
            Raw::Typed {
                path,
                kind,
                link,
                declared,
            } => b
                .append(&header(path, *kind, *declared, link), &[][..])
                .expect("append"),
            Raw::Pax { records } => b
                .append_pax_extensions(records.iter().map(|(k, v)| (*k, *v)))
                .expect("pax"),
            Raw::LongName(name) => {
                let mut data = name.to_vec();
                data.push(0);
                b.append(
                    &header(
                        b"././@LongLink",
                        tar::EntryType::GNULongName,
                        data.len() as u64,
                        b"",
                    ),
                    &data[..],
                )
                .expect("append")
            }
        }
    }
    b.into_inner().expect("tar").finish().expect("gzip")
}

fn read_err(gz: &[u8], limits: &ArchiveLimits) -> ArchiveError {
    read_archive(gz, limits, |_| Ok(())).expect_err("hostile archive must be refused")
}

const OK: Raw<'static> = Raw::File {
    path: b"metadata/version",
    data: b"1.1.0\n",
};

#[test]
fn path_traversal_is_refused() {
    let gz = hostile(&[
        OK,
        Raw::File {
            path: b"resources/../../evil.json",
            data: b"{}",
        },
    ]);
    assert!(matches!(
        read_err(&gz, &ArchiveLimits::default()),
        ArchiveError::PathTraversal { .. }
    ));
    let gz = hostile(&[
        Raw::Pax {
            records: vec![("path", b"../evil")],
        },
        Raw::File {
            path: b"innocent",
            data: b"x",
        },
    ]);
    assert!(matches!(
        read_err(&gz, &ArchiveLimits::default()),
        ArchiveError::PathTraversal { .. }
    ));
    let long = format!("{}/../../../evil", "a".repeat(150));
    let gz = hostile(&[
        Raw::LongName(long.as_bytes()),
        Raw::File {
            path: b"innocent",
            data: b"x",
        },
    ]);
    assert!(matches!(
        read_err(&gz, &ArchiveLimits::default()),
        ArchiveError::PathTraversal { .. }
    ));
}

#[test]
fn absolute_paths_are_refused() {
    let gz = hostile(&[Raw::File {
        path: b"/etc/evil",
        data: b"x",
    }]);
    assert!(matches!(
        read_err(&gz, &ArchiveLimits::default()),
        ArchiveError::AbsolutePath { .. }
    ));
}

#[test]
fn links_and_devices_are_refused() {
    for (kind, name) in [
        (tar::EntryType::Symlink, "symlink"),
        (tar::EntryType::Link, "hard link"),
        (tar::EntryType::Char, "character device"),
        (tar::EntryType::Block, "block device"),
        (tar::EntryType::Fifo, "FIFO"),
    ] {
        let gz = hostile(&[
            OK,
            Raw::Typed {
                path: b"resources/pods/cluster/x.json",
                kind,
                link: b"/etc/passwd",
                declared: 0,
            },
        ]);
        match read_err(&gz, &ArchiveLimits::default()) {
            ArchiveError::UnsupportedEntryType { kind, .. } => assert_eq!(kind, name),
            other => panic!("{name}: {other}"),
        }
    }
}

#[test]
fn an_entry_claiming_10_gib_is_refused_without_reading() {
    let gz = hostile(&[
        OK,
        Raw::Typed {
            path: b"resources/pods/cluster/x.json",
            kind: tar::EntryType::Regular,
            link: b"",
            declared: 10 << 30,
        },
    ]);
    assert!(gz.len() < 4096);
    match read_err(&gz, &ArchiveLimits::default()) {
        ArchiveError::EntryTooLarge { size, limit, .. } => {
            assert_eq!(size, 10 << 30);
            assert_eq!(limit, ArchiveLimits::default().max_entry_bytes);
        }
        other => panic!("{other}"),
    }
}

#[test]
fn a_gzip_bomb_stops_at_the_total_limit() {
    // 8 MiB of zeros in 2 MiB entries compresses to a few KiB.
    let zeros = vec![0u8; 2 << 20];
    let files: Vec<Raw<'_>> = (0..4)
        .map(|i| Raw::File {
            path: [b"bomb-".as_slice(), &[b'0' + i]].concat().leak(),
            data: &zeros,
        })
        .collect();
    let gz = hostile(&files);
    assert!(gz.len() < 64 << 10, "bomb is {} bytes on disk", gz.len());
    let limits = ArchiveLimits {
        max_total_bytes: 4 << 20,
        ..ArchiveLimits::default()
    };
    assert!(
        matches!(read_err(&gz, &limits), ArchiveError::TotalSizeExceeded { limit } if limit == 4 << 20)
    );
    // Within the limit the same archive reads fine.
    let roomy = ArchiveLimits {
        max_total_bytes: 16 << 20,
        ..ArchiveLimits::default()
    };
    assert!(read_archive(&gz[..], &roomy, |_| Ok(())).is_ok());
}

#[test]
fn too_many_entries_and_duplicates_are_refused() {
    let files: Vec<Raw<'_>> = (0..5)
        .map(|i| Raw::File {
            path: format!("f{i}").leak().as_bytes(),
            data: b"x",
        })
        .collect();
    let limits = ArchiveLimits {
        max_entries: 3,
        ..ArchiveLimits::default()
    };
    assert!(matches!(
        read_err(&hostile(&files), &limits),
        ArchiveError::TooManyEntries { limit: 3 }
    ));
    let gz = hostile(&[
        OK,
        Raw::File {
            path: b"./metadata/version",
            data: b"1.1.0\n",
        },
    ]);
    assert!(matches!(
        read_err(&gz, &ArchiveLimits::default()),
        ArchiveError::DuplicateEntry { .. }
    ));
}

#[test]
fn garbage_and_bad_items_are_refused() {
    assert!(matches!(
        read_err(b"not gzip at all", &ArchiveLimits::default()),
        ArchiveError::Corrupt(_)
    ));
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&[0x55; 1024]).expect("write");
    assert!(matches!(
        read_err(&gz.finish().expect("gz"), &ArchiveLimits::default()),
        ArchiveError::Corrupt(_)
    ));
    let gz = hostile(&[
        OK,
        Raw::File {
            path: b"resources/pods/cluster/x.json",
            data: b"[1]",
        },
    ]);
    assert!(matches!(
        read_err(&gz, &ArchiveLimits::default()),
        ArchiveError::InvalidItem { .. }
    ));
    let gz = hostile(&[
        OK,
        Raw::File {
            path: b"resources/pods/cluster/x.json",
            data: b"{",
        },
    ]);
    assert!(matches!(
        read_err(&gz, &ArchiveLimits::default()),
        ArchiveError::InvalidItem { .. }
    ));
    let gz = hostile(&[
        Raw::Pax {
            records: vec![("size", b"99")],
        },
        Raw::File {
            path: b"a",
            data: b"x",
        },
    ]);
    assert!(matches!(
        read_err(&gz, &ArchiveLimits::default()),
        ArchiveError::Corrupt(_)
    ));
}

#[test]
fn extraction_never_writes_outside_the_target() {
    let cases: Vec<Vec<u8>> = vec![
        hostile(&[
            OK,
            Raw::File {
                path: b"../evil",
                data: b"x",
            },
        ]),
        hostile(&[
            OK,
            Raw::File {
                path: b"a/../../evil",
                data: b"x",
            },
        ]),
        hostile(&[
            OK,
            Raw::File {
                path: b"/tmp/evil",
                data: b"x",
            },
        ]),
        hostile(&[
            OK,
            Raw::Typed {
                path: b"link",
                kind: tar::EntryType::Symlink,
                link: b"..",
                declared: 0,
            },
            Raw::File {
                path: b"link/evil",
                data: b"x",
            },
        ]),
        hostile(&[
            OK,
            Raw::Typed {
                path: b"hard",
                kind: tar::EntryType::Link,
                link: b"../evil",
                declared: 0,
            },
        ]),
    ];
    for gz in cases {
        let root = tempfile::tempdir().expect("tempdir");
        let dest = root.path().join("dest");
        std::fs::create_dir(&dest).expect("mkdir");
        assert!(extract_archive(&gz[..], &dest, &ArchiveLimits::default()).is_err());
        let outside: Vec<_> = std::fs::read_dir(root.path())
            .expect("ls")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(
            outside,
            ["dest"],
            "nothing besides the target in its parent"
        );
        let inside: Vec<_> = std::fs::read_dir(&dest)
            .expect("ls")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(
            inside,
            ["metadata"],
            "only the safe entry before the hostile one"
        );
    }
}
