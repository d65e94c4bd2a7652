"""The faults of a chaos run, each injected and (where it lasts) undone within one step.

Targets come from the world as it is when the step starts: live pods (or
Kubernetes nodes) sorted by name, candidate number `step.pick % count`. Data
faults are injected only into a cluster where every shard has an online
replica, and a node is failed only if no shard has every copy on it: one
fault at a time never takes the last copy of acknowledged data, so any loss
the checker finds is the operator's (or Valkey's), not the schedule's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs

from valkey_operator.core.client import Client
from valkey_operator.core.resource import PODS
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.admin import AdminClient
from valkey_testbed.chaos import schedule
from valkey_testbed.chaos.nodes import hosts_holding_a_whole_shard, probe, shards_without_replica
from valkey_testbed.chaos.objects import CLUSTER_LABEL, Objects
from valkey_testbed.chaos.operatorctl import OperatorUnderChaos
from valkey_testbed.chaos.schedule import Step
from valkey_testbed.kubelet import KubeletControl
from valkey_testbed.wait import NotYet, WaitTimeout, eventually

REDUNDANCY_WAIT = 120.0
"""Seconds a data fault waits for every shard to have an online replica before it is skipped."""


class Skipped(Exception):
    """The fault could not be injected safely (or had no target); the step's outcome says why."""


@attrs.define
class World:
    kube: Client
    kubelet: KubeletControl
    objects: Objects
    admin: AdminClient
    operator: OperatorUnderChaos

    @property
    def namespace(self) -> str:
        return self.objects.names.namespace

    async def live_pods(self) -> list[Obj]:
        pods = await self.kube.list(
            PODS, self.namespace, label_selector=f"{CLUSTER_LABEL}={self.objects.names.cluster}"
        )
        running = [
            pod
            for pod in pods
            if not pod["metadata"].get("deletionTimestamp")
            and (pod.get("status") or {}).get("phase") == "Running"
            and (pod.get("status") or {}).get("podIP")
        ]
        return sorted(running, key=lambda pod: str(pod["metadata"]["name"]))

    async def pod_ips(self) -> list[str]:
        return [pod["status"]["podIP"] for pod in await self.live_pods()]


async def redundant(world: World) -> None:
    """Wait until every shard has an online replica (the nodes say so); Skipped if it does not come."""

    async def ready() -> bool | NotYet:
        facts = await probe(world.admin, await world.pod_ips())
        lonely = shards_without_replica(facts)
        unreachable = [ip for ip, node in facts.items() if not node.reachable]
        return not (lonely or unreachable) or NotYet(
            f"no online replica: {lonely}; unreachable {unreachable}"
        )

    try:
        await eventually(ready, "every shard with an online replica", REDUNDANCY_WAIT, interval=1.0)
    except WaitTimeout as exc:
        raise Skipped(f"no redundancy within {REDUNDANCY_WAIT:.0f}s ({str(exc)[:160]})") from None


async def _target(world: World, step: Step) -> Obj:
    pods = await world.live_pods()
    if not pods:
        raise Skipped("no running pod")
    return pods[step.pick % len(pods)]


async def _server_pid(world: World, pod: Obj) -> int:
    name = pod["metadata"]["name"]
    seen = await world.kubelet.pod(world.namespace, name)
    containers = [c for c in (seen or {}).get("containers", []) if not c.get("init") and c.get("pid")]
    if not containers:
        raise Skipped(f"the kubelet runs no server process for {name}")
    pid = int(containers[0]["pid"])
    title = _read(Path(f"/proc/{pid}/cmdline"))
    if b"valkey-server" not in title or f"{pod['status']['podIP']}:6379".encode() not in title:
        raise Skipped(f"pid {pid} of {name} is not its valkey-server ({title[:60]!r})")
    return pid


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _start_ticks(pid: int) -> str:
    stat = _read(Path(f"/proc/{pid}/stat")).decode(errors="replace")
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else ""


async def delete_pod(world: World, step: Step) -> str:
    await redundant(world)
    pod = await _target(world, step)
    await world.kube.delete(PODS, pod["metadata"]["name"], world.namespace, uid=pod["metadata"]["uid"])
    return f"deleted {pod['metadata']['name']}"


async def kill_valkey(world: World, step: Step) -> str:
    await redundant(world)
    pod = await _target(world, step)
    pid = await _server_pid(world, pod)
    os.kill(pid, signal.SIGKILL)
    return f"SIGKILL valkey-server of {pod['metadata']['name']} (pid {pid})"


async def pause_valkey(world: World, step: Step) -> str:
    await redundant(world)
    pod = await _target(world, step)
    pid = await _server_pid(world, pod)
    ticks = _start_ticks(pid)
    os.kill(pid, signal.SIGSTOP)
    try:
        await asyncio.sleep(step.hold)
    finally:
        if _start_ticks(pid) == ticks:  # the same process, not a reused pid
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    return f"SIGSTOP {pod['metadata']['name']} (pid {pid}) for {step.hold:.1f}s, then SIGCONT"


async def fail_node(world: World, step: Step) -> str:
    await redundant(world)
    pods = await world.live_pods()
    facts = await probe(world.admin, [pod["status"]["podIP"] for pod in pods])
    host_of = {pod["status"]["podIP"]: pod["spec"].get("nodeName", "") for pod in pods}
    unsafe = hosts_holding_a_whole_shard(facts, host_of)
    nodes = sorted(node["name"] for node in (await world.kubelet.status())["nodes"] if not node["failed"])
    hosting = {pod["spec"].get("nodeName") for pod in pods}
    safe = [node for node in nodes if node not in unsafe and node in hosting]
    if not safe:
        raise Skipped(f"no node hosts a pod without holding a whole shard (whole shards on {sorted(unsafe)})")
    host = safe[step.pick % len(safe)]
    on_host = sorted(pod["metadata"]["name"] for pod in pods if pod["spec"].get("nodeName") == host)
    await world.kubelet.fail_node(host)
    try:
        await asyncio.sleep(step.hold)
    finally:
        await world.kubelet.recover_node(host)
    return f"failed {host} (pods {', '.join(on_host) or 'none'}) for {step.hold:.1f}s, recovered"


async def kill_operator(world: World, step: Step) -> str:
    pid = world.operator.kill()
    try:
        await asyncio.sleep(step.hold)
    finally:
        world.operator.spawn()
    return f"SIGKILL operator pid {pid}, restarted after {step.hold:.1f}s"


async def cut_operator(world: World, step: Step) -> str:
    dropped = await world.operator.cut(step.hold)
    return f"cut {dropped} API connections, refused new ones for {step.hold:.1f}s"


async def rotate_tls(world: World, step: Step) -> str:
    if not world.objects.names.tls:
        raise Skipped("plain cluster: no TLS Secret")
    serial = await world.objects.put_secret()
    return f"TLS Secret rotated to leaf {serial}"


FAULTS: dict[str, Callable[[World, Step], Awaitable[str]]] = {
    schedule.DELETE_POD: delete_pod,
    schedule.KILL_VALKEY: kill_valkey,
    schedule.PAUSE_VALKEY: pause_valkey,
    schedule.FAIL_NODE: fail_node,
    schedule.KILL_OPERATOR: kill_operator,
    schedule.CUT_OPERATOR: cut_operator,
    schedule.ROTATE_TLS: rotate_tls,
}
