//! `granary backup …` run as a user runs it, against the embedded API server (or a real
//! cluster) with the velero CRDs installed: create with velero's flags stores exactly
//! what velero's CLI would; get and describe show the phases, queue positions, progress
//! and validation errors the test writes into status; `--wait` follows a backup to its
//! end; delete creates a DeleteBackupRequest; bad flags change nothing.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use granary_api::velero::DeleteBackupRequest;
use kube::Api;
use kube::api::ListParams;
use serde_json::{Value, json};

use granary_test_support::{DEADLINE, poll_until};

use granary_test_support::cli::{VeleroCli, stderr};

#[tokio::test]
async fn create_stores_exactly_what_velero_would() {
    let cli = VeleroCli::start().await;
    cli.ok(&[
        "backup-location",
        "create",
        "primary",
        "--provider",
        "aws",
        "--bucket",
        "b1",
    ])
    .await;

    let out = cli.ok(&["backup", "create", "plain"]).await;
    assert!(
        out.contains("Backup request \"plain\" submitted successfully."),
        "{out}"
    );
    assert_eq!(
        cli.backup_json("plain").await["spec"],
        json!({"csiSnapshotTimeout": "0s", "hooks": {}, "includedNamespaces": ["*"],
               "itemOperationTimeout": "0s", "metadata": {}, "ttl": "0s"})
    );

    cli.ok(&[
        "backup",
        "create",
        "full",
        "--include-namespaces",
        "team-a,team-b",
        "--exclude-namespaces",
        "kube-system",
        "--include-resources",
        "configmaps,deployments.apps",
        "--exclude-resources",
        "secrets",
        "--include-cluster-resources=false",
        "-l",
        "app=web,tier notin (cache)",
        "--ttl",
        "72h",
        "--storage-location",
        "primary",
        "--ordered-resources",
        "pods=team-a/p1,team-a/p2;persistentvolumes=pv1",
        "--labels",
        "owner=team-a,purpose=nightly",
    ])
    .await;
    let stored = cli.backup_json("full").await;
    assert_eq!(
        stored["metadata"]["labels"],
        json!({"owner": "team-a", "purpose": "nightly"})
    );
    assert_eq!(
        stored["spec"],
        json!({
            "csiSnapshotTimeout": "0s", "hooks": {}, "itemOperationTimeout": "0s",
            "metadata": {}, "ttl": "72h0m0s",
            "includedNamespaces": ["team-a", "team-b"], "excludedNamespaces": ["kube-system"],
            "includedResources": ["configmaps", "deployments.apps"],
            "excludedResources": ["secrets"], "includeClusterResources": false,
            "labelSelector": {"matchLabels": {"app": "web"}, "matchExpressions": [
                {"key": "tier", "operator": "NotIn", "values": ["cache"]}]},
            "storageLocation": "primary",
            "orderedResources": {"pods": "team-a/p1,team-a/p2", "persistentvolumes": "pv1"}
        })
    );

    cli.ok(&[
        "backup",
        "create",
        "either",
        "--or-selector",
        "app=a or app=b",
    ])
    .await;
    assert_eq!(
        cli.backup_json("either").await["spec"]["orLabelSelectors"],
        json!([{"matchLabels": {"app": "a"}}, {"matchLabels": {"app": "b"}}])
    );

    // `-o yaml` prints the object velero would send and creates nothing.
    let yaml = cli
        .ok(&["backup", "create", "printed", "--ttl", "1h", "-o", "yaml"])
        .await;
    assert!(
        yaml.contains("ttl: 1h0m0s") && yaml.contains("kind: Backup"),
        "{yaml}"
    );
    assert!(cli.backups().get_opt("printed").await.unwrap().is_none());

    cli.fails(&["backup", "create", "plain"], "already exists")
        .await;
    // A ReadOnly location cannot take a backup: refused before anything is created.
    cli.ok(&[
        "backup-location",
        "create",
        "archive",
        "--provider",
        "aws",
        "--bucket",
        "b2",
        "--access-mode",
        "ReadOnly",
    ])
    .await;
    let err = cli
        .fails(
            &[
                "backup",
                "create",
                "to-archive",
                "--storage-location",
                "archive",
            ],
            "--storage-location",
        )
        .await;
    assert!(err.contains("ReadOnly"), "{err}");
    assert!(cli.backups().get_opt("to-archive").await.unwrap().is_none());
}

/// velero's volume flags are accepted as velero scripts pass them: `false` and the
/// timeouts land in the spec, a value asking for volume data is refused naming the flag;
/// `--from-schedule` takes the schedule's template now, named like the schedule's own
/// backups unless a name is given.
#[tokio::test]
async fn velero_volume_flags_and_from_schedule() {
    let cli = VeleroCli::start().await;
    cli.ok(&[
        "backup",
        "create",
        "objects-only",
        "--snapshot-volumes=false",
        "--default-volumes-to-fs-backup=false",
        "--snapshot-move-data=false",
        "--csi-snapshot-timeout",
        "5m",
        "--item-operation-timeout",
        "2h",
    ])
    .await;
    let spec = cli.backup_json("objects-only").await["spec"].clone();
    assert_eq!(spec["snapshotVolumes"], false);
    assert_eq!(spec["defaultVolumesToFsBackup"], false);
    assert_eq!(spec["snapshotMoveData"], false);
    assert_eq!(spec["csiSnapshotTimeout"], "5m0s");
    assert_eq!(spec["itemOperationTimeout"], "2h0m0s");
    for (extra, flag) in [
        (&["--snapshot-volumes"][..], "--snapshot-volumes"),
        (
            &["--default-volumes-to-fs-backup=true"][..],
            "--default-volumes-to-fs-backup",
        ),
        (
            &["--volume-snapshot-locations", "aws-default"][..],
            "--volume-snapshot-locations",
        ),
        (
            &["--resource-policies-configmap", "policies"][..],
            "--resource-policies-configmap",
        ),
    ] {
        let mut args = vec!["backup", "create", "volumes"];
        args.extend_from_slice(extra);
        let err = cli.fails(&args, flag).await;
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    }
    assert!(cli.backups().get_opt("volumes").await.unwrap().is_none());

    cli.ok(&[
        "schedule",
        "create",
        "nightly",
        "--schedule",
        "0 1 * * *",
        "--include-namespaces",
        "team-a",
        "--ttl",
        "24h",
    ])
    .await;
    let out = cli
        .ok(&[
            "backup",
            "create",
            "--from-schedule",
            "nightly",
            "--include-namespaces",
            "other",
        ])
        .await;
    assert!(
        out.contains("Creating backup from schedule, all other filters are ignored."),
        "{out}"
    );
    let all = cli
        .backups()
        .list(&ListParams::default().labels("velero.io/schedule-name=nightly"))
        .await
        .unwrap();
    assert_eq!(all.items.len(), 1, "{:?}", all.items);
    let name = all.items[0].metadata.name.clone().unwrap();
    let stamp = name
        .strip_prefix("nightly-")
        .expect("named after the schedule");
    assert!(
        stamp.len() == 14 && stamp.chars().all(|c| c.is_ascii_digit()),
        "{name}"
    );
    let taken = cli.backup_json(&name).await;
    assert_eq!(taken["spec"]["includedNamespaces"], json!(["team-a"]));
    assert_eq!(taken["spec"]["ttl"], "24h0m0s");
    cli.ok(&["backup", "create", "by-hand", "--from-schedule", "nightly"])
        .await;
    assert_eq!(
        cli.backup_json("by-hand").await["metadata"]["labels"]["velero.io/schedule-name"],
        "nightly"
    );
    cli.fails(
        &["backup", "create", "--from-schedule", "weekly"],
        "--from-schedule",
    )
    .await;
}

#[tokio::test]
async fn bad_flags_name_the_flag_and_create_nothing() {
    let cli = VeleroCli::start().await;
    let cases: &[(&[&str], &str)] = &[
        (&["--ttl", "3d"], "--ttl"),
        (&["--ttl=-5m"], "--ttl"),
        (&["--selector", "a>1"], "--selector"),
        (
            &["--selector", "app=x", "--or-selector", "a=b"],
            "--or-selector",
        ),
        (&["--or-selector", "a=b or"], "--or-selector"),
        (&["--labels", "no-value"], "--labels"),
        (&["--ordered-resources", "pods"], "--ordered-resources"),
        (
            &["--include-cluster-resources=perhaps"],
            "--include-cluster-resources",
        ),
        (
            &["--include-namespaces", "a", "--exclude-namespaces", "a"],
            "--exclude-namespaces",
        ),
        (&["--storage-location", "nowhere"], "--storage-location"),
        (&["--no-such-flag"], "--no-such-flag"),
    ];
    for (extra, flag) in cases {
        let mut args = vec!["backup", "create", "b1"];
        args.extend_from_slice(extra);
        cli.fails(&args, flag).await;
    }
    cli.fails(&["backup", "create", "Not_A_Name"], "NAME").await;
    cli.fails(&["backup", "get", "-o", "xml"], "--output").await;
    let left = cli.backups().list(&ListParams::default()).await.unwrap();
    assert!(
        left.items.is_empty(),
        "a bad command created {:?}",
        left.items
    );
}

#[tokio::test]
async fn get_and_describe_show_queue_progress_and_errors() {
    let cli = VeleroCli::start().await;
    for (name, ns) in [
        ("running", "ns1,ns2"),
        ("first", "ns3"),
        ("waiting", "ns2,ns3"),
        ("done", "ns9"),
        ("invalid", "ns8"),
    ] {
        cli.ok(&[
            "backup",
            "create",
            name,
            "--include-namespaces",
            ns,
            "-l",
            "app=x",
        ])
        .await;
    }
    cli.set_status(
        "running",
        json!({"phase": "InProgress", "startTimestamp": "2026-01-01T10:00:00Z",
               "progress": {"totalItems": 40, "itemsBackedUp": 12}}),
    )
    .await;
    cli.set_status("first", json!({"phase": "Queued", "queuePosition": 1}))
        .await;
    cli.set_status("waiting", json!({"phase": "Queued", "queuePosition": 2}))
        .await;
    cli.set_status(
        "done",
        json!({"phase": "Completed", "errors": 0, "warnings": 3, "formatVersion": "1.1.0",
               "expiration": "2099-01-01T00:00:00Z",
               "progress": {"totalItems": 7, "itemsBackedUp": 7}}),
    )
    .await;
    cli.set_status(
        "invalid",
        json!({"phase": "FailedValidation",
               "validationErrors": ["backup storage location \"x\" not found", "second problem"]}),
    )
    .await;

    let table = cli.ok(&["backup", "get"]).await;
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        [
            "NAME",
            "STATUS",
            "ERRORS",
            "WARNINGS",
            "CREATED",
            "EXPIRES",
            "STORAGE",
            "LOCATION",
            "SELECTOR",
            "INTEGRITY"
        ]
    );
    let row = |name: &str| -> Vec<String> {
        lines
            .iter()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} in {table}"))
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    assert_eq!(row("done")[1..4], ["Completed", "0", "3"]);
    assert_eq!(row("running")[1], "InProgress");
    assert_eq!(row("waiting")[1], "Queued");
    assert_eq!(row("invalid")[1], "FailedValidation");
    let done = row("done");
    assert_eq!(done[done.len() - 2], "app=x");
    // Never checked: the server annotates what it writes, checks and syncs.
    assert_eq!(done.last().map(String::as_str), Some("<unchecked>"));
    assert_eq!(lines.len(), 6, "{table}");

    let one: Value = serde_json::from_str(&cli.ok(&["backup", "get", "done", "-o", "json"]).await)
        .expect("JSON");
    assert_eq!(one["status"]["warnings"], 3);
    let yaml = cli.ok(&["backup", "get", "-o", "yaml"]).await;
    assert!(yaml.contains("kind: List"), "{yaml}");
    cli.fails(&["backup", "get", "done", "missing"], "missing")
        .await;

    let waiting = cli.ok(&["backup", "describe", "waiting"]).await;
    assert!(
        waiting.contains("Phase:  Queued (position 2 in the queue)"),
        "{waiting}"
    );
    assert!(
        waiting.contains("backup running (running, InProgress): both include namespace ns2"),
        "{waiting}"
    );
    assert!(
        waiting.contains("backup first (queued at position 1): both include namespace ns3"),
        "{waiting}"
    );
    let first = cli.ok(&["backup", "describe", "first"]).await;
    assert!(
        first.contains("Waiting for:  a free slot: 1 backup(s) running (running)"),
        "{first}"
    );

    let running = cli.ok(&["backup", "describe", "running"]).await;
    assert!(running.contains("Phase:  InProgress\n"), "{running}");
    assert!(
        running.contains("Estimated total items to be backed up:  40"),
        "{running}"
    );
    assert!(
        running.contains("Items backed up so far:                 12"),
        "{running}"
    );
    assert!(
        running.contains("Started:    2026-01-01 10:00:00 +0000 UTC"),
        "{running}"
    );

    let done = cli.ok(&["backup", "describe", "done"]).await;
    assert!(done.contains("Phase:  Completed\n"), "{done}");
    assert!(done.contains("Warnings:  3"), "{done}");
    assert!(done.contains("Items backed up:              7"), "{done}");
    assert!(
        done.contains("Expiration:  2099-01-01 00:00:00 +0000 UTC"),
        "{done}"
    );
    assert!(done.contains("Label selector:  app=x"), "{done}");
    assert!(!done.contains("Waiting for"), "{done}");

    let invalid = cli.ok(&["backup", "describe", "invalid"]).await;
    assert!(
        invalid.contains(
            "Validation errors:  backup storage location \"x\" not found\n                    second problem"
        ),
        "{invalid}"
    );
    cli.fails(&["backup", "describe", "missing"], "not found")
        .await;
}

#[tokio::test]
async fn wait_follows_the_backup_to_its_end() {
    let cli = VeleroCli::start().await;
    // `-o json`: JSON lines on stdout, one per state.
    let mut child = cli
        .command(&["backup", "create", "w1", "--wait", "-o", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("granary runs");
    let stdout = child.stdout.take().expect("piped");
    // The embedded API server runs on this test's runtime: lines are awaited, never
    // waited for with a blocking call.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let api = cli.backups();
    poll_until("the backup is created", || async {
        api.get_opt("w1").await.ok().flatten().is_some()
    })
    .await;
    let mut seen: Vec<Value> = Vec::new();
    async fn expect(
        rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
        seen: &mut Vec<Value>,
        phase: &str,
        check: &dyn Fn(&Value) -> bool,
    ) {
        loop {
            let line = tokio::time::timeout(DEADLINE, rx.recv())
                .await
                .ok()
                .flatten()
                .unwrap_or_else(|| panic!("no {phase} line; seen {seen:?}"));
            let v: Value =
                serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}"));
            seen.push(v.clone());
            if v["phase"] == phase && check(&v) {
                return;
            }
        }
    }
    expect(&mut rx, &mut seen, "New", &|v| v["backup"] == "w1").await;
    cli.set_status("w1", json!({"phase": "Queued", "queuePosition": 2}))
        .await;
    expect(&mut rx, &mut seen, "Queued", &|v| v["queuePosition"] == 2).await;
    cli.set_status(
        "w1",
        json!({"phase": "InProgress", "queuePosition": 0,
               "progress": {"totalItems": 10, "itemsBackedUp": 4}}),
    )
    .await;
    expect(&mut rx, &mut seen, "InProgress", &|v| {
        v["itemsBackedUp"] == 4 && v["totalItems"] == 10
    })
    .await;
    cli.set_status(
        "w1",
        json!({"phase": "Completed", "progress": {"totalItems": 10, "itemsBackedUp": 10}}),
    )
    .await;
    expect(&mut rx, &mut seen, "Completed", &|v| {
        v["itemsBackedUp"] == 10
    })
    .await;
    let status = tokio::task::spawn_blocking(move || child.wait().expect("granary exits"))
        .await
        .unwrap();
    assert!(status.success());

    // Text (the default, as for restores): velero's sentences on stdout, a line per
    // change on stderr (not a terminal); a backup that fails makes --wait exit non-zero
    // with the reason.
    let child = cli
        .command(&["backup", "create", "w2", "--wait"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("granary runs");
    poll_until("the second backup is created", || async {
        api.get_opt("w2").await.ok().flatten().is_some()
    })
    .await;
    cli.set_status(
        "w2",
        json!({"phase": "Failed", "failureReason": "bucket gone"}),
    )
    .await;
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().expect("granary exits"))
        .await
        .unwrap();
    assert!(!out.status.success());
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(
        stderr.contains("bucket gone") && stderr.contains("w2: Failed"),
        "{stderr}"
    );
    assert!(
        stdout.contains("Backup request \"w2\" submitted successfully.")
            && stdout.contains("Backup completed with status: Failed."),
        "{stdout}"
    );
}

#[tokio::test]
async fn delete_asks_the_server_with_a_delete_backup_request() {
    let cli = VeleroCli::start().await;
    cli.ok(&["backup", "create", "old"]).await;
    let requests: Api<DeleteBackupRequest> = Api::namespaced(cli.tc.client(), &cli.namespace);

    // Not confirmed, or one unknown name: nothing is requested.
    let out = cli
        .run_with_input(&["backup", "delete", "old"], "n\n")
        .await;
    assert!(out.status.success(), "a no is not an error, as velero");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Cancelled."),
        "{out:?}"
    );
    cli.fails(
        &["backup", "delete", "old", "missing", "--confirm"],
        "missing",
    )
    .await;
    assert!(
        requests
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    let out = cli.ok(&["backup", "delete", "old", "--confirm"]).await;
    assert!(
        out.contains("Request to delete backup \"old\" submitted successfully."),
        "{out}"
    );
    let uid = cli
        .backups()
        .get("old")
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let list = requests.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(list.len(), 1);
    let req = serde_json::to_value(&list[0]).unwrap();
    assert_eq!(req["spec"], json!({"backupName": "old"}));
    assert_eq!(req["metadata"]["generateName"], "old-");
    assert_eq!(
        req["metadata"]["labels"],
        json!({"velero.io/backup-name": "old", "velero.io/backup-uid": uid})
    );
    // Answering Y on stdin works as velero's prompt does.
    let out = cli
        .run_with_input(&["backup", "delete", "old"], "Y\n")
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        requests
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        2
    );
}
