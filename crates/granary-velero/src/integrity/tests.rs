use super::*;

fn keyring(n: u8) -> Keyring {
    let data: BTreeMap<String, Vec<u8>> = (1..=n)
        .map(|i| (format!("k{i}"), vec![i; MIN_KEY_BYTES]))
        .collect();
    Keyring::from_data(&data).unwrap()
}

fn objects() -> BTreeMap<String, ObjectDigest> {
    [
        ("b.tar.gz", &b"tarball"[..]),
        ("velero-backup.json", &b"{}"[..]),
        ("b-results.gz", &b"results"[..]),
    ]
    .into_iter()
    .map(|(n, d)| (n.to_owned(), ObjectDigest::of(d)))
    .collect()
}

fn expected(name: &str) -> Expected<'_> {
    Expected {
        kind: RecordKind::Backup,
        name,
        tenant: None,
    }
}

fn signed(ring: &Keyring) -> Vec<u8> {
    IntegrityRecord::sign(RecordKind::Backup, "b", None, objects(), ring)
        .unwrap()
        .to_bytes()
}

#[test]
fn a_signed_record_verifies_and_names_its_key() {
    let ring = keyring(2);
    let record = verify_record(&signed(&ring), &ring, expected("b")).unwrap();
    assert_eq!(record.key_id, "k2", "the newest key signs");
    assert_eq!(record.objects, objects());
}

#[test]
fn digests_are_sha256() {
    // Golden value: `printf abc | sha256sum`.
    assert_eq!(
        ObjectDigest::of(b"abc").sha256,
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn the_signature_is_hmac_sha256_of_the_canonical_encoding() {
    // Golden value, computed independently:
    // python3 -c 'import hmac,hashlib; print(hmac.new(b"\x01"*32, open("c","rb").read(), hashlib.sha256).hexdigest())'
    // where c holds the canonical text below.
    let ring = keyring(1);
    let mut objects = BTreeMap::new();
    objects.insert("velero-backup.json".to_owned(), ObjectDigest::of(b"{}"));
    let r = IntegrityRecord::sign(RecordKind::Backup, "b", None, objects, &ring).unwrap();
    assert_eq!(
        String::from_utf8(r.canonical().unwrap()).unwrap(),
        "granary-integrity/1\nkind=Backup\nname=b\ntenant=\nkey=k1\nobject=velero-backup.json 2 \
         44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a\n"
    );
    assert_eq!(r.signature, GOLDEN_SIGNATURE);
}

const GOLDEN_SIGNATURE: &str = "ef1aea79c5046f7bcb9596cc4a92553c8f261df41f485cb25a56b2114f88dfd0";

#[test]
fn any_change_to_a_signed_record_is_a_mismatch() {
    let ring = keyring(1);
    let good = IntegrityRecord::sign(RecordKind::Backup, "b", None, objects(), &ring).unwrap();
    type Change = Box<dyn Fn(&mut IntegrityRecord)>;
    let changes: Vec<Change> = vec![
        Box::new(|r| r.objects.get_mut("b.tar.gz").unwrap().size += 1),
        Box::new(|r| r.objects.get_mut("b.tar.gz").unwrap().sha256 = "00".repeat(32)),
        Box::new(|r| {
            r.objects.remove("b-results.gz");
        }),
        Box::new(|r| {
            r.objects.insert("b-logs.gz".into(), ObjectDigest::of(b"x"));
        }),
        Box::new(|r| r.tenant = Some("team-a".into())),
        Box::new(|r| r.kind = RecordKind::Restore),
        Box::new(|r| r.signature = r.signature.replace('a', "b")),
    ];
    for (i, change) in changes.iter().enumerate() {
        let mut r = good.clone();
        change(&mut r);
        if r == good {
            continue;
        }
        let verdict = verify_record(&r.to_bytes(), &ring, expected("b")).unwrap_err();
        assert_eq!(verdict.as_str(), "mismatch", "change {i}: {verdict}");
    }
}

#[test]
fn a_record_moved_to_another_name_or_tenant_does_not_verify() {
    let ring = keyring(1);
    let v = verify_record(&signed(&ring), &ring, expected("other")).unwrap_err();
    assert!(v.describe().contains("copied from elsewhere"), "{v}");
    let tenant_b = Expected {
        tenant: Some("team-b"),
        ..expected("b")
    };
    let v = verify_record(&signed(&ring), &ring, tenant_b).unwrap_err();
    assert!(
        v.describe().contains("not made for namespace team-b"),
        "{v}"
    );
    let mine = IntegrityRecord::sign(RecordKind::Backup, "b", Some("team-b"), objects(), &ring)
        .unwrap()
        .to_bytes();
    verify_record(&mine, &ring, tenant_b).unwrap();
    // An administrator reads a namespace owner's backup too.
    verify_record(&mine, &ring, expected("b")).unwrap();
}

#[test]
fn a_record_signed_with_another_key_is_unknown_or_a_mismatch() {
    let ours = keyring(1);
    let theirs = Keyring::from_data(&BTreeMap::from([("k1".to_owned(), vec![9u8; 32])])).unwrap();
    let planted = IntegrityRecord::sign(RecordKind::Backup, "b", None, objects(), &theirs)
        .unwrap()
        .to_bytes();
    assert_eq!(
        verify_record(&planted, &ours, expected("b"))
            .unwrap_err()
            .as_str(),
        "mismatch"
    );
    let theirs = Keyring::from_data(&BTreeMap::from([("k7".to_owned(), vec![9u8; 32])])).unwrap();
    let planted = IntegrityRecord::sign(RecordKind::Backup, "b", None, objects(), &theirs)
        .unwrap()
        .to_bytes();
    assert_eq!(
        verify_record(&planted, &ours, expected("b")).unwrap_err(),
        Verdict::UnknownKey {
            key_id: "k7".into()
        }
    );
}

#[test]
fn rotation_signs_with_the_new_key_and_old_records_verify_until_removed() {
    let one = keyring(1);
    let old = signed(&one);
    let (two, id) = one.with_new_key(vec![7; 32]).unwrap();
    assert_eq!(id, "k2");
    assert_eq!(two.newest().unwrap().0, "k2");
    verify_record(&old, &two, expected("b")).unwrap();
    let new = signed(&two);
    let removed = two.without("k1").unwrap();
    assert_eq!(
        verify_record(&old, &removed, expected("b")).unwrap_err(),
        Verdict::UnknownKey {
            key_id: "k1".into()
        }
    );
    verify_record(&new, &removed, expected("b")).unwrap();
    assert!(removed.without("k1").is_none());
}

#[test]
fn keyrings_refuse_bad_ids_and_short_keys_and_never_show_a_key() {
    let bad = BTreeMap::from([("main".to_owned(), vec![1u8; 32])]);
    assert!(matches!(
        Keyring::from_data(&bad),
        Err(KeyringError::BadId(_))
    ));
    let bad = BTreeMap::from([("k01".to_owned(), vec![1u8; 32])]);
    assert!(matches!(
        Keyring::from_data(&bad),
        Err(KeyringError::BadId(_))
    ));
    let short = BTreeMap::from([("k1".to_owned(), vec![1u8; 16])]);
    assert!(matches!(
        Keyring::from_data(&short),
        Err(KeyringError::Short { .. })
    ));
    let ring = keyring(2);
    assert_eq!(format!("{ring:?}"), r#"Keyring { ids: ["k1", "k2"] }"#);
    assert_eq!(Keyring::from_data(&ring.to_data()).unwrap(), ring);
    assert!(matches!(
        IntegrityRecord::sign(
            RecordKind::Backup,
            "b",
            None,
            objects(),
            &Keyring::default()
        ),
        Err(SignError::NoKey)
    ));
}

#[test]
fn listings_and_objects_are_checked_against_the_record() {
    let ring = keyring(1);
    let r = verify_record(&signed(&ring), &ring, expected("b")).unwrap();
    let mut found: BTreeMap<String, u64> =
        r.objects.iter().map(|(n, d)| (n.clone(), d.size)).collect();
    r.check_listing(&found).unwrap();
    found.insert("b-volumeinfo.json.gz".into(), 3);
    let v = r.check_listing(&found).unwrap_err();
    assert!(
        v.describe().contains("b-volumeinfo.json.gz is not part"),
        "{v}"
    );
    found.remove("b-volumeinfo.json.gz");
    found.remove("b-results.gz");
    let v = r.check_listing(&found).unwrap_err();
    assert!(v.describe().contains("b-results.gz is missing"), "{v}");
    found.insert("b-results.gz".into(), 8);
    let v = r.check_listing(&found).unwrap_err();
    assert!(
        v.describe()
            .contains("b-results.gz has 8 bytes, 7 were written"),
        "{v}"
    );

    r.check_object("b.tar.gz", &ObjectDigest::of(b"tarball"))
        .unwrap();
    let v = r
        .check_object("b.tar.gz", &ObjectDigest::of(b"tarbalL"))
        .unwrap_err();
    assert!(v.describe().contains("b.tar.gz differs"), "{v}");
}

#[test]
fn unreadable_records_are_mismatches_not_panics() {
    let ring = keyring(1);
    for data in [&b""[..], b"{}", b"[1,2]", &vec![b' '; MAX_RECORD_BYTES + 1]] {
        let v = verify_record(data, &ring, expected("b")).unwrap_err();
        assert_eq!(v.as_str(), "mismatch");
    }
    let mut r = IntegrityRecord::sign(RecordKind::Backup, "b", None, objects(), &ring).unwrap();
    r.objects
        .insert("a\nobject=x".into(), ObjectDigest::of(b""));
    assert!(r.canonical().is_err());
}

#[test]
fn digesting_writer_passes_bytes_through() {
    use std::io::Write;
    let mut w = DigestingWriter::new(Vec::new());
    w.write_all(b"ab").unwrap();
    w.write_all(b"c").unwrap();
    let (inner, digest) = w.into_parts();
    assert_eq!(inner, b"abc");
    assert_eq!(digest, ObjectDigest::of(b"abc"));
}
