//! `granary restore …` run as a user runs it, against the embedded API server with the
//! velero CRDs installed: create with velero's flags stores exactly the Restore velero's
//! CLI would; bad flags name the flag and create nothing; get and describe show the
//! statuses and queue annotations the test writes (no controller needed); `--wait`
//! follows a restore to its end; delete removes Restore objects; logs goes through a
//! DownloadRequest whose URL the test answers as the server would.

use std::io::Write;

use granary_api::velero::DownloadRequest;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use granary_test_support::cli::{VeleroCli, stderr, stdout};
use granary_test_support::poll_until;

#[tokio::test]
async fn create_stores_exactly_what_velero_would() {
    let cli = VeleroCli::start().await;
    cli.backup_object("b1", None).await;
    cli.backup_object("daily-20260101000000", Some("daily"))
        .await;

    let out = cli
        .ok(&["restore", "create", "plain", "--from-backup", "b1"])
        .await;
    assert!(
        out.contains("Restore request \"plain\" submitted successfully."),
        "{out}"
    );
    let plain = cli.restore_json("plain").await;
    assert_eq!(
        plain["spec"],
        json!({"backupName": "b1", "hooks": {}, "includedNamespaces": ["*"],
               "itemOperationTimeout": "0s", "uploaderConfig": {}})
    );
    assert!(plain["metadata"].get("labels").is_none(), "{plain}");

    cli.ok(&[
        "restore",
        "create",
        "full",
        "--from-backup",
        "b1",
        "--include-namespaces",
        "shop,blog",
        "--exclude-namespaces",
        "kube-system",
        "--include-resources",
        "configmaps,deployments.apps,widgets.example.com",
        "--exclude-resources",
        "secrets",
        "--include-cluster-resources=true",
        "--namespace-mappings",
        "shop:shop-copy,blog:blog-copy",
        "--existing-resource-policy",
        "update",
        "--restore-volumes=false",
        "--preserve-nodeports",
        "--status-include-resources",
        "widgets.example.com",
        "--status-exclude-resources",
        "pods",
        "-l",
        "app=web,tier notin (cache)",
        "--labels",
        "owner=team-a,purpose=drill",
    ])
    .await;
    let full = cli.restore_json("full").await;
    assert_eq!(
        full["metadata"]["labels"],
        json!({"owner": "team-a", "purpose": "drill"})
    );
    assert_eq!(
        full["spec"],
        json!({
            "backupName": "b1", "hooks": {}, "itemOperationTimeout": "0s", "uploaderConfig": {},
            "includedNamespaces": ["shop", "blog"], "excludedNamespaces": ["kube-system"],
            "includedResources": ["configmaps", "deployments.apps", "widgets.example.com"],
            "excludedResources": ["secrets"], "includeClusterResources": true,
            "namespaceMapping": {"blog": "blog-copy", "shop": "shop-copy"},
            "existingResourcePolicy": "update", "restorePVs": false, "preserveNodePorts": true,
            "restoreStatus": {"includedResources": ["widgets.example.com"], "excludedResources": ["pods"]},
            "labelSelector": {"matchLabels": {"app": "web"}, "matchExpressions": [
                {"key": "tier", "operator": "NotIn", "values": ["cache"]}]}
        })
    );

    cli.ok(&[
        "restore",
        "create",
        "either",
        "--from-backup",
        "b1",
        "--or-selector",
        "app=a or app=b",
    ])
    .await;
    assert_eq!(
        cli.restore_json("either").await["spec"]["orLabelSelectors"],
        json!([{"matchLabels": {"app": "a"}}, {"matchLabels": {"app": "b"}}])
    );

    // Without a name: `<schedule>-<yyyyMMddHHmmss>`, as velero names it.
    let out = cli
        .ok(&["restore", "create", "--from-schedule", "daily"])
        .await;
    let named: Vec<String> = cli
        .restore_names()
        .await
        .into_iter()
        .filter(|n| n.starts_with("daily-"))
        .collect();
    assert_eq!(named.len(), 1, "{named:?}");
    let stamp = named[0].trim_start_matches("daily-");
    assert!(
        stamp.len() == 14 && stamp.chars().all(|c| c.is_ascii_digit()),
        "{named:?}"
    );
    assert!(out.contains(&named[0]), "{out}");
    assert_eq!(
        cli.restore_json(&named[0]).await["spec"]["scheduleName"],
        "daily"
    );

    // `-o json` prints the Restore and creates nothing.
    let printed = cli
        .ok(&[
            "restore",
            "create",
            "printed",
            "--from-backup",
            "b1",
            "-o",
            "json",
        ])
        .await;
    let printed: Value = serde_json::from_str(&printed).expect("JSON");
    assert_eq!(printed["kind"], "Restore");
    assert_eq!(printed["spec"]["backupName"], "b1");
    assert!(cli.restores().get_opt("printed").await.unwrap().is_none());

    cli.fails(
        &["restore", "create", "plain", "--from-backup", "b1"],
        "already exists",
    )
    .await;
}

#[tokio::test]
async fn bad_flags_name_the_flag_and_create_nothing() {
    let cli = VeleroCli::start().await;
    cli.backup_object("b1", None).await;
    let cases: &[(&[&str], &str)] = &[
        (&[], "--from-backup"),
        (
            &["--from-backup", "b1", "--from-schedule", "s"],
            "--from-schedule",
        ),
        (&["--from-backup", "missing"], "--from-backup"),
        (&["--from-schedule", "never-ran"], "--from-schedule"),
        (
            &["--from-backup", "b1", "--restore-volumes"],
            "--restore-volumes",
        ),
        (
            &["--from-backup", "b1", "--restore-volumes=true"],
            "--restore-volumes",
        ),
        (
            &[
                "--from-backup",
                "b1",
                "--existing-resource-policy",
                "replace",
            ],
            "--existing-resource-policy",
        ),
        (
            &["--from-backup", "b1", "--namespace-mappings", "shop=copy"],
            "--namespace-mappings",
        ),
        (
            &["--from-backup", "b1", "--namespace-mappings", "shop:Copy"],
            "--namespace-mappings",
        ),
        (&["--from-backup", "b1", "-l", "a>1"], "--selector"),
        (
            &["--from-backup", "b1", "-l", "a=1", "--or-selector", "b=2"],
            "--or-selector",
        ),
        (
            &["--from-backup", "b1", "--status-exclude-resources", "pods"],
            "--status-exclude-resources",
        ),
        (
            &["--from-backup", "b1", "--include-resources", "nodes"],
            "--include-resources",
        ),
        (
            &[
                "--from-backup",
                "b1",
                "--include-namespaces",
                "a",
                "--exclude-namespaces",
                "a",
            ],
            "--exclude-namespaces",
        ),
        (
            &["--from-backup", "b1", "--labels", "bad key=1"],
            "--labels",
        ),
        (&["Not_A_Name", "--from-backup", "b1"], "NAME"),
    ];
    for (flags, flag) in cases {
        let mut args = vec!["restore", "create"];
        args.extend_from_slice(flags);
        if flags.first().is_none_or(|f| f.starts_with('-')) {
            args.insert(2, "r-bad");
        }
        cli.fails(&args, flag).await;
    }
    assert!(
        cli.restore_names().await.is_empty(),
        "a refused create left a Restore behind"
    );
}

#[tokio::test]
async fn get_and_describe_show_status_and_what_a_restore_waits_for() {
    let cli = VeleroCli::start().await;
    cli.backup_object("b1", None).await;
    for name in ["done", "queued", "invalid"] {
        cli.ok(&[
            "restore",
            "create",
            name,
            "--from-backup",
            "b1",
            "-l",
            "app=web",
        ])
        .await;
    }
    cli.set_restore(
        "done",
        json!({"phase": "PartiallyFailed", "startTimestamp": "2026-01-02T03:04:05Z",
               "completionTimestamp": "2026-01-02T03:09:00Z", "errors": 2, "warnings": 7,
               "failureReason": "", "progress": {"totalItems": 12, "itemsRestored": 10}}),
        json!({}),
    )
    .await;
    cli.set_restore(
        "queued",
        json!({"phase": "New"}),
        json!({"granary.gardener.cloud/restore-waiting-for": "restore done (InProgress): both restore into namespace shop",
               "granary.gardener.cloud/restore-queue-position": "1"}),
    )
    .await;
    cli.set_restore(
        "invalid",
        json!({"phase": "FailedValidation", "validationErrors": ["backup \"b1\" is not Completed or PartiallyFailed"]}),
        json!({}),
    )
    .await;

    let table = cli.ok(&["restore", "get"]).await;
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>().join(" "),
        "NAME BACKUP STATUS STARTED COMPLETED ERRORS WARNINGS CREATED SELECTOR",
        "{table}"
    );
    assert_eq!(lines.len(), 4, "{table}");
    let done = lines
        .iter()
        .find(|l| l.starts_with("done "))
        .expect("done row");
    for cell in [
        "b1",
        "PartiallyFailed",
        "2026-01-02 03:04:05 +0000 UTC",
        "2026-01-02 03:09:00 +0000 UTC",
        "   2   ",
        "   7   ",
        "app=web",
    ] {
        assert!(done.contains(cell), "{cell:?} not in {done:?}");
    }
    let queued = lines
        .iter()
        .find(|l| l.starts_with("queued "))
        .expect("row");
    let cells: Vec<&str> = queued
        .split("   ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(cells[1..5], ["b1", "New", "<nil>", "<nil>"], "{table}");

    let json_out: Value =
        serde_json::from_str(&cli.ok(&["restore", "get", "done", "-o", "json"]).await)
            .expect("JSON");
    assert_eq!(json_out["status"]["warnings"], 7);
    // The ones found are shown; the missing one fails the command.
    let out = cli.run(&["restore", "get", "done", "nope"]).await;
    assert!(!out.status.success());
    assert!(stderr(&out).contains("nope"), "{}", stderr(&out));
    assert!(stdout(&out).contains("PartiallyFailed"), "{}", stdout(&out));

    let text = cli.ok(&["restore", "describe", "done"]).await;
    for want in [
        "Phase:  PartiallyFailed (run `granary restore logs done` for more information)",
        "Total items to be restored:  12",
        "Items restored:              10",
        "Started:    2026-01-02 03:04:05 +0000 UTC",
        "Warnings:  7",
        "Errors:    2",
        "Backup:  b1",
        "Label selector:  app=web",
    ] {
        assert!(text.contains(want), "{want:?} missing from\n{text}");
    }
    assert!(!text.contains("Waiting for"), "{text}");
    let text = cli.ok(&["restore", "describe", "queued"]).await;
    assert!(
        text.contains("Waiting for:  restore done (InProgress): both restore into namespace shop (position 1 in the restore queue)"),
        "{text}"
    );
    let text = cli.ok(&["restore", "describe", "invalid"]).await;
    assert!(
        text.contains("Validation errors:  backup \"b1\" is not Completed or PartiallyFailed"),
        "{text}"
    );
}

#[tokio::test]
async fn wait_follows_the_restore_to_its_end() {
    let cli = VeleroCli::start().await;
    cli.backup_object("b1", None).await;
    let finish = async {
        poll_until("the restore to be created", || async {
            cli.restores().get_opt("r1").await.ok().flatten().is_some()
        })
        .await;
        cli.set_restore(
            "r1",
            json!({"phase": "InProgress", "progress": {"totalItems": 3, "itemsRestored": 1}}),
            json!({}),
        )
        .await;
        cli.set_restore("r1", json!({"phase": "Completed"}), json!({}))
            .await;
    };
    let (out, ()) = tokio::join!(
        cli.run(&["restore", "create", "r1", "--from-backup", "b1", "--wait"]),
        finish
    );
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("Restore completed with status: Completed."),
        "{}",
        stdout(&out)
    );
    // Progress as for backups: a line per change on stderr when not on a terminal.
    assert!(stderr(&out).contains("r1: Completed"), "{}", stderr(&out));
}

#[tokio::test]
async fn delete_removes_restores_and_nothing_on_a_wrong_name() {
    let cli = VeleroCli::start().await;
    cli.backup_object("b1", None).await;
    for name in ["r1", "r2", "r3"] {
        cli.ok(&["restore", "create", name, "--from-backup", "b1"])
            .await;
    }
    cli.fails(&["restore", "delete", "r1", "nope", "--confirm"], "nope")
        .await;
    cli.fails(&["restore", "delete", "--confirm"], "--all")
        .await;
    let out = cli
        .run_with_input(&["restore", "delete", "r1"], "n\n")
        .await;
    assert!(out.status.success(), "a no is not an error, as velero");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Cancelled."),
        "{out:?}"
    );
    assert_eq!(cli.restore_names().await, ["r1", "r2", "r3"]);

    let out = cli.ok(&["restore", "delete", "r1", "--confirm"]).await;
    assert!(
        out.contains("Request to delete restore \"r1\" submitted successfully."),
        "{out}"
    );
    assert_eq!(cli.restore_names().await, ["r2", "r3"]);
    let out = cli
        .run_with_input(&["restore", "delete", "--all"], "Y\n")
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(cli.restore_names().await.is_empty());
}

fn gzip(text: &str) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(text.as_bytes()).expect("gzip");
    enc.finish().expect("gzip")
}

#[tokio::test]
async fn logs_come_through_a_download_request() {
    let cli = VeleroCli::start().await;
    cli.backup_object("b1", None).await;
    cli.ok(&["restore", "create", "r1", "--from-backup", "b1"])
        .await;
    let err = cli.fails(&["restore", "logs", "r1"], "not available").await;
    assert!(err.contains("New"), "{err}");
    cli.set_restore("r1", json!({"phase": "Completed"}), json!({}))
        .await;

    // The storage behind the signed URL: a loopback server with the gzipped log.
    let log =
        "time=\"2026-01-02T03:04:05Z\" level=info msg=\"restored configmaps shop/settings\"\n";
    let body = gzip(log);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let app = axum::Router::new().route(
        "/restores/r1/r1-logs.gz",
        axum::routing::get(move || {
            let body = body.clone();
            async move { body }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });

    // The server's part: answer the CLI's DownloadRequest with the URL.
    let requests: Api<DownloadRequest> = Api::namespaced(cli.tc.client(), &cli.namespace);
    let answer = async {
        let log_request = |r: &DownloadRequest| {
            r.spec.target.name == "r1"
                && serde_json::to_value(r.spec.target.kind).ok() == Some(json!("RestoreLog"))
        };
        let find = || async {
            let list = requests.list(&ListParams::default()).await.expect("list");
            list.items
                .into_iter()
                .find(|r| log_request(r))
                .and_then(|r| r.metadata.name)
        };
        poll_until("the CLI's DownloadRequest", || async {
            find().await.is_some()
        })
        .await;
        let name = find().await.expect("it is there");
        requests
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": "Processed",
                    "downloadURL": format!("http://{addr}/restores/r1/r1-logs.gz")}})),
            )
            .await
            .expect("status is written");
    };
    let (out, ()) = tokio::join!(cli.run(&["restore", "logs", "r1"]), answer);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), log);

    // Nobody answers: a clear timeout, not a hang.
    let err = cli
        .fails(
            &["restore", "logs", "r1", "--timeout", "1s"],
            "timed out after 1s",
        )
        .await;
    assert!(!err.contains("http://"), "{err}");
}
