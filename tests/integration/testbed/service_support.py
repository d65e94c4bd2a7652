"""Valkey pods, Services and a raw RESP dialler for the service-proxy tests."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from kubelet_support import POD_IP_ENV, pod_body

from valkey_operator.core.client import Client
from valkey_operator.core.resource import EVENTS, SERVICES
from valkey_testbed import images
from valkey_testbed.resp import Arg, Reply, encode_command, read_reply
from valkey_testbed.wait import NotYet, eventually

Obj = dict[str, Any]
VALKEY_PORT = 6379
NODE_IPS = {"node-1": "127.0.100.1", "node-2": "127.0.100.2", "node-3": "127.0.100.3"}
DIAL_TIMEOUT = 3.0


def valkey_pod(name: str, node: str | None = None, labels: dict[str, str] | None = None, *args: str) -> Obj:
    """A valkey-server bound to its pod IP, Ready once it accepts connections; on `node` if given."""
    container = {
        "image": images.newest_image(),
        "args": [
            "--bind", "$(POD_IP)", "--port", str(VALKEY_PORT), "--protected-mode", "no",
            "--save", "", "--appendonly", "no", "--dir", "/data", *args,
        ],
        "env": POD_IP_ENV,
        "ports": [{"name": "valkey", "containerPort": VALKEY_PORT}],
        "readinessProbe": {"tcpSocket": {"port": "valkey"}, "periodSeconds": 1},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
    }  # fmt: skip
    spec: Obj = {"volumes": [{"name": "data", "emptyDir": {}}]}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    body = pod_body(name, container, **spec)
    body["metadata"]["labels"] = labels or {"app": name}
    return body


def service(
    name: str, namespace: str, kind: str, selector: dict[str, str], policy: str = "Cluster", **port: Any
) -> Obj:
    """A NodePort or LoadBalancer Service of one TCP port (6379 -> the pods' port named valkey)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "type": kind,
            "externalTrafficPolicy": policy,
            "selector": selector,
            "ports": [{"name": "valkey", "port": VALKEY_PORT, "targetPort": "valkey", **port}],
        },
    }


def node_port(svc: Obj, name: str = "valkey") -> int:
    return int(next(p["nodePort"] for p in svc["spec"]["ports"] if p["name"] == name))


async def ask(host: str, port: int, *command: Arg) -> Reply:
    """One command on a new connection; the connection's errors are raised."""
    async with asyncio.timeout(DIAL_TIMEOUT):
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(encode_command(command or ("PING",)))
            return await read_reply(reader)
        finally:
            writer.close()


async def outcome(host: str, port: int) -> str:
    """What a PING at host:port meets: "PONG", "refused" (nothing listens), "reset" (accepted,
    then closed without an answer), or another answer as text."""
    try:
        reply = await ask(host, port)
    except ConnectionRefusedError:
        return "refused"
    except (ConnectionError, asyncio.IncompleteReadError):
        return "reset"
    return reply.decode() if isinstance(reply, bytes) else repr(reply)


async def until(host: str, port: int, wanted: str, timeout: float = 30.0) -> None:
    """Wait until a PING at host:port meets `wanted` (see `outcome`)."""

    async def check() -> bool | NotYet:
        seen = await outcome(host, port)
        return True if seen == wanted else NotYet(seen)

    await eventually(check, f"{wanted} from {host}:{port}", timeout, interval=0.1)


async def served_by(host: str, port: int) -> str:
    """The pod IP of the server that answers at host:port (its `bind` setting)."""
    reply = await ask(host, port, "CONFIG", "GET", "bind")
    assert isinstance(reply, list) and isinstance(reply[1], bytes), reply
    return reply[1].decode()


class Session:
    """A connection kept open, to see when the proxy (or the server) ends it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, host: str, port: int) -> Session:
        async with asyncio.timeout(DIAL_TIMEOUT):
            return cls(*await asyncio.open_connection(host, port))

    async def ask(self, *command: Arg) -> Reply:
        async with asyncio.timeout(DIAL_TIMEOUT):
            self.writer.write(encode_command(command or ("PING",)))
            return await read_reply(self.reader)

    async def ended(self, timeout: float) -> bool:
        """True once the far end closed or reset the connection (read returns nothing)."""
        try:
            async with asyncio.timeout(timeout):
                return await self.reader.read(1) == b""
        except ConnectionError:
            return True

    def close(self) -> None:
        self.writer.close()


async def create_service(kube: Client, body: Obj) -> Obj:
    await kube.create(SERVICES, body)

    async def allocated() -> Obj | None:
        svc = await kube.get(SERVICES, body["metadata"]["name"], body["metadata"]["namespace"])
        return svc if all(p.get("nodePort") for p in svc["spec"]["ports"]) else None

    found: Obj = await eventually(allocated, "nodePorts", 10)
    return found


async def events_of(kube: Client, namespace: str, name: str, reasons: Sequence[str]) -> list[Obj]:
    """The Events about Service `name` with one of `reasons`."""
    events = await kube.list(EVENTS, namespace)
    return [e for e in events if e["regarding"].get("name") == name and e.get("reason") in reasons]
