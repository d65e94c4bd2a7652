"""`valkey-operator restore-fetch`: a restoring Valkey pod's init container (SPEC 1.7).

Downloads one shard's RDB from S3-compatible storage into the pod's data
volume, checks its sha256 against the manifest's, and puts it where
valkey-server loads it at start (valkey_operator.valkey.rdb_layout). The
credentials come from the environment (AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY, from the backup's Secret), never from arguments. A
failure exits 1 with one line on stderr naming the reason (ChecksumMismatch,
ObjectMissing, CredentialsRejected, ...): the pod's termination message, which
the cluster's status quotes. A data directory that already holds data is left
alone (exit 0): a restore never overwrites a node's files, and an init
container run again after a node reboot finds its own earlier result.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from valkey_operator import s3get
from valkey_operator.api.destination_keys import CREDENTIAL_KEYS, DEFAULT_REGION
from valkey_operator.valkey.rdb_layout import place_rdb

COMMAND = "restore-fetch"
ACCESS_KEY_ID, SECRET_ACCESS_KEY = CREDENTIAL_KEYS
DOWNLOAD_NAME = ".restore.rdb"
DATA_FILES = ("dump.rdb", "appendonlydir", "nodes.conf")


class FetchFailed(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"valkey-operator {COMMAND}", description=__doc__.split("\n")[0])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--region", default=DEFAULT_REGION)
    parser.add_argument("--key", required=True, help="the shard's object key")
    parser.add_argument("--sha256", required=True, help="the checksum the manifest records")
    parser.add_argument("--layout", choices=("rdb", "aof"), default="rdb")
    parser.add_argument("--dir", required=True, type=Path, help="the data directory valkey-server uses")
    parser.add_argument("--ca-file", type=Path, help="PEM CA bundle that signs the endpoint's certificate")
    return parser


def fetch(args: argparse.Namespace, environ: Mapping[str, str]) -> list[Path]:
    """The paths written (none when the directory already holds data)."""
    data_dir: Path = args.dir
    if any((data_dir / name).exists() for name in DATA_FILES):
        return []
    missing = [name for name in (ACCESS_KEY_ID, SECRET_ACCESS_KEY) if not environ.get(name)]
    if missing:
        raise FetchFailed("CredentialsMissing", f"no {' or '.join(missing)} in the environment")
    target = data_dir / DOWNLOAD_NAME
    partial = target.with_name(target.name + ".partial")
    try:
        # Any address: this runs in the tenant's own pod, with no reach its containers lack; the
        # operator refused a loopback or link-local endpoint before it rendered this pod.
        _, digest = s3get.download(
            endpoint=args.endpoint,
            bucket=args.bucket,
            key=args.key,
            region=args.region,
            access_key_id=environ[ACCESS_KEY_ID],
            secret_access_key=environ[SECRET_ACCESS_KEY],
            target=partial,
            ca_file=args.ca_file,
        )
        if digest != args.sha256.lower():
            raise FetchFailed(
                "ChecksumMismatch", f"{args.key}: sha256 {digest}, the manifest says {args.sha256}"
            )
        partial.replace(target)
    except s3get.GetFailed as exc:
        raise FetchFailed(exc.reason, f"{args.key}: {exc}") from None
    finally:
        partial.unlink(missing_ok=True)
    placed = place_rdb(target, data_dir, args.layout)
    _hand_over(data_dir, placed)
    return placed


def _hand_over(data_dir: Path, placed: Sequence[Path]) -> None:
    """Files written as root (a runtime that cannot run as the pod's user) go to the directory's owner."""
    if os.geteuid() != 0:
        return
    owner = data_dir.stat()
    for path in placed:
        for item in [path, *(path.rglob("*") if path.is_dir() else ())]:
            os.chown(item, owner.st_uid, owner.st_gid)


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(argv)
    try:
        placed = fetch(args, os.environ)
    except FetchFailed as exc:
        print(str(exc), file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"RestoreFailed: {exc}", file=sys.stderr)
        return 1
    where = ", ".join(str(path) for path in placed) or f"nothing: {args.dir} already holds data"
    print(f"restore of {args.key}: {where}")
    return 0
