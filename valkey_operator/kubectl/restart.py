"""`kubectl valkey restart <cluster>`: a rolling restart through the operator.

Sets the annotation `valkey.gomomento.com/restartedAt` to now (RFC 3339); the operator replaces
every pod through its normal rolling update (surge pod, sync, switchover, one shard at a time).
With --wait (the default) the command returns once every pod that ran before the request is gone
and the cluster is Active and Ready again with no rollout under way.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from valkey_operator.api.resources import RESTARTED_AT_ANNOTATION
from valkey_operator.core.resource import PODS
from valkey_operator.kubectl import common, view
from valkey_operator.kubectl.kube import Session
from valkey_operator.kubectl.requests import CLUSTER_LABEL, restart_patch

HELP = "replace every pod of a cluster, one shard at a time, through the operator"
EXAMPLES = f"""The plugin writes the annotation {RESTARTED_AT_ANNOTATION}=<now, RFC 3339>; the operator
rolls the cluster as for a new pod template. Same as:
  kubectl annotate --overwrite vkc <cluster> {RESTARTED_AT_ANNOTATION}=$(date -u +%Y-%m-%dT%H:%M:%SZ)

exit status: 0 restarted (or requested, with --no-wait), 3 timed out.

examples:
  kubectl valkey restart cache -n shop
  kubectl valkey restart cache --no-wait
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cluster", help="name of the ValkeyCluster")
    parser.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="wait until every pod was replaced and the cluster is Active (default)",
    )
    parser.add_argument(
        "--timeout", type=common.duration, default=1800.0, help="how long to wait: 90s, 5m (default 30m)"
    )


def settled(cluster: common.Obj, old_pods: set[str], pods: list[common.Obj]) -> str | None:
    """Why the restart is not done yet, or None once it is: none of old_pods (uids) left, no rollout,
    Active, the latest generation observed and Ready True (what kstatus calls Current)."""
    left = sorted(pod["metadata"]["name"] for pod in pods if pod["metadata"].get("uid") in old_pods)
    if left:
        return f"{len(left)} pod(s) from before the restart left: {', '.join(left)}"
    status = cluster.get("status") or {}
    if status.get("rollout"):
        return "rollout under way"
    if status.get("state") != "Active":
        return f"state {status.get('state')}"
    if status.get("observedGeneration") != cluster["metadata"].get("generation"):
        return "latest generation not yet observed"
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    if not ready or ready[0].get("status") != "True":
        return "not Ready"
    return None


async def run(args: argparse.Namespace, session: Session, out: TextIO) -> int:
    await common.get_cluster(session, args.cluster)
    selector = f"{CLUSTER_LABEL}={args.cluster}"
    before = await session.kube.list(PODS, session.namespace, label_selector=selector)
    old = {pod["metadata"]["uid"] for pod in before}
    patch = restart_patch(common.now())
    await common.annotate(session, args.cluster, patch)
    value = patch["metadata"]["annotations"][RESTARTED_AT_ANNOTATION]  # type: ignore[index]
    where = f"valkeycluster {session.namespace}/{args.cluster}"
    out.write(f"{where}: restart requested ({RESTARTED_AT_ANNOTATION}={value})\n")
    if not args.wait:
        return 0
    last: list[str] = []

    async def done() -> str | None:
        cluster = await common.get_cluster(session, args.cluster)
        pods = await session.kube.list(PODS, session.namespace, label_selector=selector)
        waiting = settled(cluster, old, pods)
        rollout = (cluster.get("status") or {}).get("rollout")
        line = view.rollout_line(rollout, None) if waiting == "rollout under way" else str(waiting)
        if waiting and (not last or last[-1] != line):
            last.append(line)
            out.write(f"  {line}\n")
            out.flush()
        return None if waiting else "done"

    await common.poll(done, args.timeout, f"the rolling restart of {where}", out)
    out.write(f"{where}: every pod replaced, cluster Active\n")
    return 0
