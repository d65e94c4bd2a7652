"""`kubectl valkey backup <cluster> [--name]`: one backup now, to the destination of the cluster's
scheduled backups (spec.backup.destination), as a ValkeyBackup the operator takes.

The backup is not labelled scheduled, so the schedule's retention never deletes it. With --wait
(the default) the command returns once it is Completed (exit 0) or Failed (exit 1).
"""

from __future__ import annotations

import argparse
from typing import TextIO

from valkey_operator.api.resources import VALKEY_BACKUPS
from valkey_operator.core.rest import ApiError
from valkey_operator.kubectl import common
from valkey_operator.kubectl.kube import CommandFailed, Session, UsageError
from valkey_operator.kubectl.requests import CLUSTER_LABEL, backup_body, backup_name

HELP = "back a cluster up now, to the destination of its scheduled backups"
EXAMPLES = """The cluster's spec.backup.destination is used; a cluster without spec.backup needs a
ValkeyBackup written by hand (docs/reference/valkeybackup.md).

exit status: 0 Completed (or created, with --no-wait), 1 Failed, 3 timed out.

examples:
  kubectl valkey backup cache -n shop
  kubectl valkey backup cache --name cache-before-upgrade --timeout 30m
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cluster", help="name of the ValkeyCluster")
    parser.add_argument("--name", help="the ValkeyBackup's name (default <cluster>-manual-<UTC time>)")
    parser.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="wait until the backup is Completed or Failed (default)",
    )
    parser.add_argument(
        "--timeout", type=common.duration, default=1800.0, help="how long to wait: 90s, 30m (default 30m)"
    )


async def run(args: argparse.Namespace, session: Session, out: TextIO) -> int:
    cluster = await common.get_cluster(session, args.cluster)
    destination = ((cluster.get("spec") or {}).get("backup") or {}).get("destination")
    if not destination:
        raise UsageError(
            f"valkeycluster {session.namespace}/{args.cluster} has no spec.backup.destination: "
            "create a ValkeyBackup with a destination instead (docs/reference/valkeybackup.md)"
        )
    name = args.name or backup_name(args.cluster, common.now())
    body = backup_body(session.namespace, name, args.cluster, destination)
    try:
        await session.kube.create(VALKEY_BACKUPS, body)
    except ApiError as exc:
        hint = "; pick another --name" if exc.already_exists else ""
        raise CommandFailed(
            common.explain(exc, f"creating valkeybackup {session.namespace}/{name}") + hint
        ) from None
    out.write(f"valkeybackup {session.namespace}/{name} created ({CLUSTER_LABEL}={args.cluster})\n")
    if not args.wait:
        return 0
    answer: common.Obj = {}
    seen: list[str] = []

    async def final() -> str | None:
        nonlocal answer
        try:
            backup = await session.kube.get(VALKEY_BACKUPS, name, session.namespace)
        except ApiError as exc:
            raise CommandFailed(
                common.explain(exc, f"reading valkeybackup {session.namespace}/{name}")
            ) from None
        answer = backup.get("status") or {}
        phase = str(answer.get("phase") or "Pending")
        if not seen or seen[-1] != phase:
            seen.append(phase)
            if phase not in ("Completed", "Failed"):
                out.write(f"  {phase}\n")
                out.flush()
        return phase if phase in ("Completed", "Failed") else None

    phase = await common.poll(final, args.timeout, f"valkeybackup {session.namespace}/{name}", out)
    if phase == "Failed":
        raise CommandFailed(
            f"valkeybackup {session.namespace}/{name} Failed: {answer.get('reason')}: {answer.get('message')}"
        )
    size = f", {answer['size']}" if answer.get("size") else ""
    out.write(f"valkeybackup {session.namespace}/{name} Completed{size}\n")
    return 0
