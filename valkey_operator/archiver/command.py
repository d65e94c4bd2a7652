"""`valkey-operator archive`: a Valkey pod's archiver, beside valkey-server (spec.backup.pointInTime;
the container controllers/cluster/render/archiver.py renders).

Follows the node's multi-part AOF in its data directory and ships it to
<path>/<namespace>/<cluster>/archive/<node>/ in the bucket, every --interval seconds, with
progress.json every --progress-every seconds; SIGTERM ships once more and exits 0. The node is
named by its cluster node ID (the `myself` line of nodes.conf in the data directory: the ID
lives as long as the data does), or by --node. The credentials come from the environment
(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), never from arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from valkey_operator.api.destination_keys import CREDENTIAL_KEYS, DEFAULT_REGION
from valkey_operator.archiver import layout
from valkey_operator.archiver.follower import AofFollower
from valkey_operator.archiver.resume import resume_from
from valkey_operator.archiver.shipper import Shipper
from valkey_operator.objectstore import Destination, EndpointPolicy, S3Credentials, StorageError, open_store

COMMAND = "archive"
AOF_DIR = "appendonlydir"
NODES_CONF = "nodes.conf"
NODE_ID_WAIT = 0.2
"""Seconds between two looks for nodes.conf, which valkey-server writes as it starts."""


class ArchiveFailed(Exception):
    pass


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"valkey-operator {COMMAND}", description=__doc__.split("\n")[0])
    parser.add_argument("--dir", required=True, type=Path, help="the data directory valkey-server uses")
    parser.add_argument("--node", help="the node's name in the bucket (default: its cluster node ID)")
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--region", default=DEFAULT_REGION)
    parser.add_argument("--path", default="", help="the destination's key prefix")
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--ca-file", type=Path, help="PEM CA bundle that signs the endpoint's certificate")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between two looks at the AOF")
    parser.add_argument("--progress-every", type=float, default=5.0, help="seconds between progress writes")
    parser.add_argument(
        "--endpoint-allowed-networks",
        default="",
        help="comma-separated networks a loopback or link-local endpoint may be in (default: none)",
    )
    return parser


def node_id(nodes_conf: Path) -> str | None:
    """The ID on nodes.conf's `myself` line; None while the file or the line is not there."""
    try:
        lines = nodes_conf.read_text().splitlines()
    except FileNotFoundError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > 2 and "myself" in fields[2].split(","):
            return fields[0]
    return None


async def archive(args: argparse.Namespace, environ: Mapping[str, str], stop: asyncio.Event) -> None:
    missing = [name for name in CREDENTIAL_KEYS if not environ.get(name)]
    if missing:
        raise ArchiveFailed(f"CredentialsMissing: no {' or '.join(missing)} in the environment")
    node = args.node
    while node is None:
        node = node_id(args.dir / NODES_CONF)
        if node is None:
            if stop.is_set():
                return
            await asyncio.sleep(NODE_ID_WAIT)
    access, secret = (environ[name] for name in CREDENTIAL_KEYS)
    allowed = tuple(ipaddress.ip_network(net) for net in args.endpoint_allowed_networks.split(",") if net)
    destination = Destination(endpoint=args.endpoint, bucket=args.bucket, path=args.path, region=args.region)
    ca_pem = args.ca_file.read_text() if args.ca_file else None
    async with open_store(
        destination,
        S3Credentials(access_key_id=access, secret_access_key=secret),
        ca_pem,
        endpoints=EndpointPolicy(allowed),
    ) as store:
        prefix = layout.node_prefix(args.namespace, args.cluster, node)
        folder = store.key(*prefix)
        follower = AofFollower(
            args.dir / AOF_DIR, resume=resume_from(await store.list_objects(folder), folder)
        )
        try:
            await Shipper(follower, store, prefix).run(args.interval, stop, args.progress_every)
        finally:
            follower.close()


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(argv)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await archive(args, os.environ, stop)

    try:
        asyncio.run(run())
    except ArchiveFailed as exc:
        print(str(exc), file=sys.stderr)
        return 1
    except StorageError as exc:  # before the first look: where to go on from is unknown
        print(f"{exc.reason}: {exc}", file=sys.stderr)
        return 1
    return 0
