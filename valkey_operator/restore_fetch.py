"""`valkey-operator restore-fetch`: a restoring Valkey pod's init container (SPEC 1.7).

Downloads one shard's RDB from S3-compatible storage into the pod's data
volume, checks its sha256 against the manifest's, and puts it where
valkey-server loads it at start (valkey_operator.valkey.rdb_layout). With
--archive (a restore to a moment) it fetches one node's archived history
instead and cuts it at --until (valkey_operator.archiver.fetch). The
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
import asyncio
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
    parser.add_argument("--key", help="the shard's object key (a backup)")
    parser.add_argument("--sha256", help="the checksum the manifest records (a backup)")
    parser.add_argument("--archive", help="the folder of the node whose history to restore (a moment)")
    parser.add_argument("--base-seq", type=int, help="with --archive: the sequence whose base to start from")
    parser.add_argument("--until", type=int, help="with --archive: the last second kept (Unix seconds)")
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
    if args.archive is not None:
        return _fetch_history(args, environ)
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


def _fetch_history(args: argparse.Namespace, environ: Mapping[str, str]) -> list[Path]:
    """The node's history under --archive from base --base-seq, cut at --until, as appendonlydir
    (botocore is imported here only: a backup's restore does without it)."""
    from valkey_operator.archiver import fetch as history
    from valkey_operator.objectstore import ANY_ADDRESS, Destination, S3Credentials, StorageError, open_store

    if args.layout != "aof":
        raise FetchFailed("NeedsAppendOnly", "a history loads only as an append-only file (--layout aof)")

    async def run() -> list[Path]:
        destination = Destination(endpoint=args.endpoint, bucket=args.bucket, path="", region=args.region)
        credentials = S3Credentials(
            access_key_id=environ[ACCESS_KEY_ID], secret_access_key=environ[SECRET_ACCESS_KEY]
        )
        ca_pem = args.ca_file.read_text() if args.ca_file else None
        # Any address, as for a backup: the operator refused the endpoint before it rendered this pod.
        async with open_store(destination, credentials, ca_pem, endpoints=ANY_ADDRESS) as store:
            found = await history.plan(store, args.archive, args.base_seq, args.until)
            fetched = await history.fetch(store, found, args.dir, args.until)
        for start, end in fetched.dropped:
            print(
                f"slots {start}-{end}: an import in flight at the second, dropped (the source's copy stays)"
            )
        return fetched.files

    try:
        placed = asyncio.run(run())
    except history.HistoryMissing as exc:
        raise FetchFailed("ObjectMissing", str(exc)) from None
    except StorageError as exc:
        raise FetchFailed(exc.reason, str(exc)) from None
    _hand_over(args.dir, [args.dir / history.AOF_DIR])
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
    cli = parser()
    args = cli.parse_args(argv)
    backup, archive = (args.key, args.sha256), (args.archive, args.base_seq, args.until)
    if any(value is None for value in backup) == any(value is None for value in archive):
        cli.error("give --key and --sha256 (a backup), or --archive, --base-seq and --until (a moment)")
    try:
        placed = fetch(args, os.environ)
    except FetchFailed as exc:
        print(str(exc), file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"RestoreFailed: {exc}", file=sys.stderr)
        return 1
    where = ", ".join(str(path) for path in placed) or f"nothing: {args.dir} already holds data"
    print(f"restore of {args.key or args.archive}: {where}")
    return 0
