"""`kubectl valkey switchover <cluster> <shard> [--to <pod>]`: ask the operator to hand a shard's
primary role to one of its replicas (a coordinated failover with the operator's safety checks).

The request is the annotation `valkey.gomomento.com/switchover: <shard>[/<pod>]@<token>`; the
operator records its answer in `status.switchover` (request, phase, from, to, message,
finishedAt). With --wait (the default) the command returns once that answer names this request
and is final: exit 0 when Succeeded, 1 when Refused or Failed, 3 on timeout.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from valkey_operator.api.resources import SWITCHOVER_ANNOTATION
from valkey_operator.kubectl import common
from valkey_operator.kubectl.kube import CommandFailed, Session, TimedOut, UsageError
from valkey_operator.kubectl.requests import TERMINAL_SWITCHOVER_PHASES, switchover_value

HELP = "move a shard's primary role to a replica, through the operator"
EXAMPLES = f"""The plugin writes the annotation {SWITCHOVER_ANNOTATION}=<shard>[/<pod>]@<token>
(the token, a UTC time, makes each request distinct); the operator carries it out and records the
outcome in status.switchover.

exit status: 0 Succeeded (or requested, with --no-wait), 1 Refused or Failed, 3 timed out.

examples:
  kubectl valkey switchover cache 0 -n shop
  kubectl valkey switchover cache 1 --to cache-1-b --timeout 5m
  kubectl valkey switchover cache 2 --no-wait
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cluster", help="name of the ValkeyCluster")
    parser.add_argument("shard", type=int, help="the shard whose primary steps down (0, 1, ...)")
    parser.add_argument(
        "--to", metavar="POD", help="the replica pod to promote (default: the operator picks)"
    )
    parser.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="wait for the operator's outcome (default; --no-wait returns once requested)",
    )
    parser.add_argument(
        "--timeout", type=common.duration, default=300.0, help="how long to wait: 90s, 5m (default 5m)"
    )


def check_target(cluster: common.Obj, shard: int, pod: str | None) -> None:
    """Refuse, before asking the operator, a shard the cluster lacks or a pod not in that shard."""
    shards = (cluster.get("spec") or {}).get("shards")
    if isinstance(shards, int) and not 0 <= shard < shards:
        raise UsageError(f"shard {shard}: the cluster has shards 0 to {shards - 1}")
    if pod is None:
        return
    nodes = (cluster.get("status") or {}).get("nodes") or []
    members = sorted(str(node.get("pod")) for node in nodes if node.get("shard") == shard)
    if pod not in members:
        raise UsageError(
            f"--to {pod}: not a node of shard {shard} (its nodes: {', '.join(members) or 'none'})"
        )


async def run(args: argparse.Namespace, session: Session, out: TextIO) -> int:
    cluster = await common.get_cluster(session, args.cluster)
    check_target(cluster, args.shard, args.to)
    try:
        value = switchover_value(args.shard, args.to, common.now())
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    await common.annotate(
        session, args.cluster, {"metadata": {"annotations": {SWITCHOVER_ANNOTATION: value}}}
    )
    where = f"valkeycluster {session.namespace}/{args.cluster}"
    out.write(f"{where}: switchover {value} requested\n")
    if not args.wait:
        return 0
    answer = await wait_for_outcome(session, args.cluster, value, args.timeout, out)
    phase = answer.get("phase")
    line = f"switchover {value}: {phase}, {answer.get('from') or '-'} -> {answer.get('to') or '-'}"
    if answer.get("message"):
        line += f": {answer['message']}"
    if phase != "Succeeded":
        raise CommandFailed(line)
    out.write(line + "\n")
    return 0


async def wait_for_outcome(
    session: Session, name: str, value: str, timeout: float, out: TextIO
) -> common.Obj:
    """status.switchover once it answers this request with a final phase; progress printed on the way."""
    seen: list[str] = []
    answer: common.Obj = {}
    waiting_for = f"the operator to carry out switchover {value}"

    async def final() -> str | None:
        nonlocal answer
        cluster = await common.get_cluster(session, name)
        current = (cluster.get("status") or {}).get("switchover") or {}
        if current.get("request") != value:
            return None
        phase = str(current.get("phase"))
        if not seen or seen[-1] != phase:
            seen.append(phase)
            if phase not in TERMINAL_SWITCHOVER_PHASES:
                out.write(f"  {phase}{': ' + current['message'] if current.get('message') else ''}\n")
                out.flush()
        answer = current
        return phase if phase in TERMINAL_SWITCHOVER_PHASES else None

    try:
        await common.poll(final, timeout, waiting_for, out)
    except TimedOut as exc:
        if not seen:  # status.switchover never named this request
            raise TimedOut(
                f"{exc}; status.switchover never named it: is the operator running, watching this namespace?"
            ) from None
        raise
    return answer
