#!/usr/bin/env python3
"""An independent reader of Velero's object-store format, written from Velero 1.18's
behaviour (pkg/persistence/object_store.go, pkg/archive), not from Granary's code: it
reads an S3 location the way Velero's server does and fails on anything Velero would
refuse. The test suite runs it against Granary's backups on moto, so a file Granary adds
(the manifest, the integrity record) can never make a backup unreadable to Velero.

Usage: velero_reader.py ENDPOINT BUCKET PREFIX
Prints one line per backup: `ok <name> phase=<phase> items=<n>`; exits 1 on a problem.
"""

import gzip
import io
import json
import sys
import tarfile

import boto3
from botocore.config import Config

# Velero's IsValid: the only top-level directories a location may hold.
VALID_TOP_LEVEL = {"backups", "restores", "restic", "metadata", "plugins", "kopia"}


def fail(message):
    print(f"velero-reader: {message}", file=sys.stderr)
    sys.exit(1)


def common_prefixes(s3, bucket, prefix):
    out = []
    for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=prefix, Delimiter="/"
    ):
        out += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
    return out


def get(s3, bucket, key):
    return s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def main():
    if len(sys.argv) != 4:
        fail("usage: velero_reader.py ENDPOINT BUCKET PREFIX")
    endpoint, bucket, prefix = sys.argv[1:]
    root = prefix.strip("/") + "/" if prefix.strip("/") else ""
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}),
    )
    for p in common_prefixes(s3, bucket, root):
        top = p[len(root):].rstrip("/")
        if top not in VALID_TOP_LEVEL:
            fail(f"invalid top-level directory {top!r}: Velero marks the location Unavailable")
    names = [p[len(root + "backups/"):].rstrip("/") for p in common_prefixes(s3, bucket, root + "backups/")]
    if not names:
        fail("no backups found")
    for name in names:
        dir_ = f"{root}backups/{name}/"
        # BackupExists / GetBackupMetadata: velero-backup.json is the backup.
        backup = json.loads(get(s3, bucket, dir_ + "velero-backup.json"))
        if backup.get("apiVersion") != "velero.io/v1" or backup.get("kind") != "Backup":
            fail(f"{name}: velero-backup.json is no velero.io/v1 Backup")
        if backup["metadata"]["name"] != name:
            fail(f"{name}: velero-backup.json names {backup['metadata']['name']!r}")
        phase = backup.get("status", {}).get("phase")
        fmt = backup.get("status", {}).get("formatVersion", "")
        if not fmt.startswith("1."):
            fail(f"{name}: formatVersion {fmt!r} is not one Velero 1.x restores")
        # GetBackupContents: <name>.tar.gz, as pkg/archive reads it.
        data = get(s3, bucket, dir_ + f"{name}.tar.gz")
        items = 0
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            seen_version = False
            for member in tar.getmembers():
                if not member.isfile():
                    continue
                path = member.name
                if path == "metadata/version":
                    # The archive's format version (Velero writes 1.1.0).
                    version = tar.extractfile(member).read().decode().strip()
                    if not version.startswith("1."):
                        fail(f"{name}: metadata/version is {version!r}")
                    seen_version = True
                    continue
                parts = path.split("/")
                if parts[0] != "resources" or not path.endswith(".json"):
                    fail(f"{name}: unexpected entry {path!r} in the tarball")
                # resources/<resource>[/v1-preferredversion]/(cluster|namespaces/<ns>)/<name>.json
                scope = parts[-2] if parts[-3] != "namespaces" else "namespaces"
                if scope not in ("cluster", "namespaces"):
                    fail(f"{name}: {path!r} is neither cluster nor namespaced")
                obj = json.loads(tar.extractfile(member).read())
                if "kind" not in obj or "metadata" not in obj:
                    fail(f"{name}: {path!r} is no Kubernetes object")
                if "-preferredversion" not in path:
                    items += 1
            if not seen_version:
                fail(f"{name}: the tarball has no metadata/version")
        # The resource list `velero backup describe --details` reads.
        listed = json.loads(gzip.decompress(get(s3, bucket, dir_ + f"{name}-resource-list.json.gz")))
        if not isinstance(listed, dict):
            fail(f"{name}: the resource list is no map")
        print(f"ok {name} phase={phase} items={items}")


if __name__ == "__main__":
    main()
