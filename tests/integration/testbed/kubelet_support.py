"""Pods for kubelet tests: create them in a test's namespace, look at them from the API and the
kubelet, and at teardown make sure none of their processes is left."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from valkey_operator.core.client import Client
from valkey_operator.core.resource import DEPLOYMENTS, EVENTS, PODS, Resource
from valkey_testbed.kubelet import KubeletControl
from valkey_testbed.wait import WaitTimeout, eventually

Obj = dict[str, Any]
BUSYBOX = "busybox:1.36"
REPLICA_SETS = Resource("apps", "v1", "replicasets", "ReplicaSet")


def condition(pod: Obj, kind: str) -> str | None:
    for entry in pod.get("status", {}).get("conditions") or []:
        if entry["type"] == kind:
            status: str = entry["status"]
            return status
    return None


def container_status(pod: Obj, name: str = "main") -> Obj:
    for entry in pod.get("status", {}).get("containerStatuses") or []:
        if entry["name"] == name:
            return dict(entry)
    return {}


def pod_body(name: str, container: Obj, **spec: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"terminationGracePeriodSeconds": 5, "containers": [{"name": "main", **container}], **spec},
    }


def busybox(script: str, **extra: Any) -> Obj:
    return {"image": BUSYBOX, "command": ["sh", "-c", script], **extra}


POD_IP_ENV = [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]


def _stat(pid: int) -> tuple[str, int] | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[19])


def process(pid: int) -> tuple[int, int]:
    """(pid, start time): pids wrap quickly here (pid_max 32768), so a pid alone is not an identity."""
    stat = _stat(pid)
    return pid, stat[1] if stat else -1


def alive(proc_id: int | tuple[int, int]) -> bool:
    pid, ticks = proc_id if isinstance(proc_id, tuple) else (proc_id, None)
    stat = _stat(pid)
    if stat is None or stat[0] in ("Z", "X"):
        return False
    return ticks is None or stat[1] == ticks


def describe(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text()[:200]
    except OSError:
        return "gone"


def proc(pid: int, name: str) -> bytes:
    return Path(f"/proc/{pid}/{name}").read_bytes()


def read_text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


async def clear_namespace(kube: Client, kubelet: KubeletControl, namespace: str) -> None:
    """Delete the namespace's workloads and pods (no grace) until the kubelet runs none of them."""
    for resource in (DEPLOYMENTS, REPLICA_SETS):
        for obj in await kube.list(resource, namespace):
            await kube.delete(resource, obj["metadata"]["name"], namespace)

    async def forgotten() -> bool:
        for pod in await kube.list(PODS, namespace):
            await kube.delete(PODS, pod["metadata"]["name"], namespace, grace_period_seconds=0)
        return not any(p["namespace"] == namespace for p in (await kubelet.status())["pods"])

    await eventually(forgotten, f"the kubelet to forget the pods of {namespace}", 60)


class Pods:
    """Create pods in the test's namespace and look at them from the API and the kubelet."""

    def __init__(self, kube: Client, kubelet: KubeletControl, namespace: str) -> None:
        self.kube = kube
        self.kubelet = kubelet
        self.namespace = namespace
        self.pids: set[tuple[int, int]] = set()

    async def create(self, body: Obj) -> Obj:
        body["metadata"]["namespace"] = self.namespace
        return await self.kube.create(PODS, body)

    async def get(self, name: str) -> Obj:
        return await self.kube.get(PODS, name, self.namespace)

    async def wait(
        self, name: str, check: Callable[[Obj], bool], timeout: float = 60.0, what: str = ""
    ) -> Obj:
        async def matches() -> Obj | None:
            pod = await self.kube.get_or_none(PODS, name, self.namespace)
            return pod if pod is not None and check(pod) else None

        try:
            found: Obj = await eventually(matches, what or f"pod {name}", timeout)
        except WaitTimeout as timed_out:
            raise AssertionError(f"{timed_out}\n{await self.explain(name)}") from None
        return found

    async def explain(self, name: str) -> str:
        """What the API server and the kubelet say of the pod: its status, its Events and the
        kubelet's own view of it (a pod that never ran leaves nothing else behind)."""
        pod = await self.kube.get_or_none(PODS, name, self.namespace)
        events = [
            f"{event.get('reason')}: {event.get('message')}"
            for event in await self.kube.list(EVENTS, self.namespace)
            if (event.get("involvedObject") or {}).get("name") == name
        ]
        known = await self.kubelet.pod(self.namespace, name)
        status = None if pod is None else (pod["spec"].get("nodeName"), pod.get("status"))
        return f"pod (node, status): {status}\nevents: {events}\nkubelet: {known}"

    async def waiting_message(self, name: str, reason: str) -> str:
        """Wait until the pod's main container waits with reason; its message."""

        def waiting(pod: Obj) -> Obj:
            return dict(container_status(pod).get("state", {}).get("waiting", {}))

        pod = await self.wait(name, lambda p: waiting(p).get("reason") == reason, what=reason)
        return str(waiting(pod).get("message", ""))

    async def ready(self, name: str, timeout: float = 60.0) -> Obj:
        return await self.wait(name, lambda p: condition(p, "Ready") == "True", timeout, f"pod {name} Ready")

    async def view(self, name: str) -> Obj:
        """The kubelet's view: node, ip, and per container pid and log path."""
        view = await self.kubelet.pod(self.namespace, name)
        assert view is not None, f"the kubelet does not run {self.namespace}/{name}"
        for container in view["containers"]:
            if container["pid"]:
                self.pids.add(process(container["pid"]))
        return view

    async def pid(self, name: str, container: str = "main") -> int:
        view = await self.view(name)
        pid = next(c["pid"] for c in view["containers"] if c["name"] == container)
        assert pid, f"{name}/{container} has no process"
        return int(pid)

    async def log(self, name: str, container: str = "main") -> str:
        view = await self.view(name)
        path = Path(next(c["log"] for c in view["containers"] if c["name"] == container))
        return read_text(path)

    async def wait_log(self, name: str, text: str, timeout: float = 60.0) -> str:
        async def has() -> str | None:
            if await self.kubelet.pod(self.namespace, name) is None:
                return None  # not on a node yet
            log = await self.log(name)
            return log if text in log else None

        found: str = await eventually(has, f"{text!r} in the log of {name}", timeout)
        return found
