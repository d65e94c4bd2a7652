"""The kubelet's control channel: a UNIX socket in the state dir, one JSON request per connection.

`<state dir>/kubelet/control.sock` (mode 0600) accepts one line of JSON and
answers one line of JSON:

    {"op": "status"}                                -> {"nodes": [...], "pods": [...]}
    {"op": "fail_node", "node": "node-2"}           -> {"ok": true}
    {"op": "fail_node", "node": "node-2", "loseDisk": true} -> {"ok": true}
    {"op": "recover_node", "node": "node-2"}        -> {"ok": true}
    {"op": "exec", "namespace": ..., "pod": ..., "container": ..., "argv": [...], "execTimeout": 30}
                                                    -> {"exitCode": 0, "output": "<base64>"}

Errors come back as {"error": "..."}. `KubeletControl` is the client (used by
the pytest fixture `kubelet`); from a shell:

    python -m valkey_testbed.kubelet.ctl --state-dir DIR status
    python -m valkey_testbed.kubelet.ctl --state-dir DIR fail-node node-2
    python -m valkey_testbed.kubelet.ctl --state-dir DIR fail-node --lose-disk node-2
    python -m valkey_testbed.kubelet.ctl --state-dir DIR recover-node node-2
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from valkey_testbed.kubelet.kubelet import Kubelet, kubelet_dir

Obj = dict[str, Any]
SOCKET_NAME = "control.sock"
MAX_REQUEST = 1 << 20


def socket_path(state_dir: Path) -> Path:
    return kubelet_dir(state_dir) / SOCKET_NAME


@contextlib.contextmanager
def _short_path(path: Path) -> Any:
    """UNIX socket paths are limited to 107 bytes: reach long ones through /proc/self/fd."""
    if len(os.fsencode(path)) < 100:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


class ControlServer:
    """Serves the control channel for one Kubelet."""

    def __init__(self, kubelet: Kubelet, path: Path) -> None:
        self.kubelet = kubelet
        self.path = path
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        with _short_path(self.path) as address:
            self._server = await asyncio.start_unix_server(self._handle, path=address, limit=MAX_REQUEST)
        self.path.chmod(0o600)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = json.loads(await reader.readline())
            try:
                response = await self.dispatch(request)
            except (KeyError, LookupError, ValueError) as exc:
                response = {"error": f"{type(exc).__name__}: {exc}"}
            writer.write(json.dumps(response).encode() + b"\n")
            await writer.drain()
        except (OSError, ValueError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def dispatch(self, request: Obj) -> Obj:
        op = request.get("op")
        if op == "status":
            return self.kubelet.snapshot()
        if op == "fail_node":
            await self.kubelet.fail_node(request["node"], bool(request.get("loseDisk", False)))
            return {"ok": True}
        if op == "recover_node":
            await self.kubelet.recover_node(request["node"])
            return {"ok": True}
        if op == "exec":
            worker = self.kubelet.worker(request["namespace"], request["pod"])
            if worker is None:
                raise LookupError(f"pod {request['namespace']}/{request['pod']} is not on our nodes")
            code, output = await worker.exec(
                request["container"], request["argv"], float(request.get("execTimeout", 30))
            )
            return {"exitCode": code, "output": base64.b64encode(output).decode()}
        raise ValueError(f"unknown op {op!r}")


class ControlError(RuntimeError):
    """The kubelet answered with an error, or could not be reached."""


@attrs.frozen
class ExecResult:
    exit_code: int
    output: bytes


@attrs.frozen
class KubeletControl:
    """Client of a running kubelet's control channel (the `kubelet` pytest fixture)."""

    state_dir: Path

    @property
    def path(self) -> Path:
        return socket_path(self.state_dir)

    async def request(self, op: str, timeout: float = 120.0, **fields: Any) -> Obj:
        async with asyncio.timeout(timeout), self._connection() as (reader, writer):
            writer.write(json.dumps({"op": op, **fields}).encode() + b"\n")
            await writer.drain()
            line = await reader.readline()
        if not line:
            raise ControlError(f"kubelet closed the control channel without answering {op!r}")
        response: Obj = json.loads(line)
        if "error" in response:
            raise ControlError(response["error"])
        return response

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
        try:
            with _short_path(self.path) as address:
                reader, writer = await asyncio.open_unix_connection(address, limit=MAX_REQUEST)
        except OSError as exc:
            raise ControlError(f"no kubelet answers at {self.path}: {exc}") from exc
        try:
            yield reader, writer
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def status(self) -> Obj:
        return await self.request("status")

    async def fail_node(self, node: str, lose_disk: bool = False) -> None:
        """Fail the node like a power loss (a reboot once recovered: its disk is kept); with lose_disk
        its disk is lost too: its local-path volumes and its pods' emptyDirs are wiped."""
        await self.request("fail_node", node=node, loseDisk=lose_disk)

    async def recover_node(self, node: str) -> None:
        await self.request("recover_node", node=node)

    async def pod(self, namespace: str, name: str) -> Obj | None:
        """The kubelet's view of a pod: node, IP, and per container pid, log path, restartCount."""
        for pod in (await self.status())["pods"]:
            if (pod["namespace"], pod["name"]) == (namespace, name):
                found: Obj = pod
                return found
        return None

    async def exec(
        self, namespace: str, pod: str, container: str, argv: Sequence[str], timeout: float = 30.0
    ) -> ExecResult:
        """Run argv in the container's mount namespace as its user (kubectl exec for the test bed)."""
        response = await self.request(
            "exec",
            timeout=timeout + 10,
            namespace=namespace,
            pod=pod,
            container=container,
            argv=list(argv),
            execTimeout=timeout,
        )
        return ExecResult(int(response["exitCode"]), base64.b64decode(response["output"]))
