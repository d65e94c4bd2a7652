"""The kubelet's container-log endpoint, so `kubectl logs` (the API server's pods/log) works on the bed.

A real kubelet serves `GET /containerLogs/{namespace}/{pod}/{container}` over HTTPS on its node's
address; the API server proxies pods/log there (to the node's InternalIP, see controlplane.py).
Here one server per node listens on the node's 127.0.100.N address, on a free port the node
publishes in `status.daemonEndpoints.kubeletEndpoint.Port`, with a throwaway certificate (the API
server does not verify kubelets it has no CA for). Query parameters honoured: `follow`,
`tailLines`, `limitBytes`. Not kept: `previous` (a restart appends to the same file) and
`sinceSeconds`/`timestamps` (the files carry no per-line times).
"""

from __future__ import annotations

import asyncio
import ssl
import tempfile
from collections.abc import Callable
from pathlib import Path

import attrs
from aiohttp import web

from valkey_testbed import certs
from valkey_testbed.kubelet.pods import PodWorker

FOLLOW_POLL = 0.2
"""Seconds between looks at a followed log file for more lines."""


def tail(data: bytes, lines: int) -> bytes:
    """The last `lines` lines of data (all of it when it has fewer)."""
    if lines <= 0:
        return b""
    parts = data.splitlines(keepends=True)
    return b"".join(parts[-lines:])


def _context(ip: str) -> ssl.SSLContext:
    ca, ca_key = certs.issue_ca("testbed-kubelet-ca")
    cert, key = certs.issue_leaf(ca, ca_key, "testbed-kubelet", ip_addresses=(ip,), server=True)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory() as directory:
        cert_file, key_file = Path(directory) / "tls.crt", Path(directory) / "tls.key"
        cert_file.write_bytes(certs.pem(cert))
        key_file.write_bytes(certs.key_pem(key))
        context.load_cert_chain(cert_file, key_file)
    return context


@attrs.define
class LogServer:
    """Serves the logs of the pods a lookup finds, on ip; `port` is known once started."""

    ip: str
    worker: Callable[[str, str], PodWorker | None]
    port: int = 0
    _runner: web.AppRunner | None = attrs.field(init=False, default=None)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", self._logs)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.ip, 0, ssl_context=_context(self.ip))
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _logs(self, request: web.Request) -> web.StreamResponse:
        namespace, pod, name = (request.match_info[key] for key in ("namespace", "pod", "container"))
        worker = self.worker(namespace, pod)
        runner = None
        if worker is not None:
            runner = next((r for r in (*worker.init_runners, *worker.runners) if r.name == name), None)
        if worker is None or runner is None:
            raise web.HTTPNotFound(text=f"container {name!r} of pod {namespace}/{pod} is not on this node")
        path = runner.log_file
        data = path.read_bytes() if path.exists() else b""
        if "tailLines" in request.query:
            data = tail(data, int(request.query["tailLines"]))
        limit = int(request.query.get("limitBytes", 0)) or None
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        await response.write(data[:limit])
        if request.query.get("follow") in ("true", "1") and limit is None:
            offset = path.stat().st_size if path.exists() else 0
            running = True
            while running:  # one more read after the container stopped: its last lines
                running = "running" in runner.state and self.worker(namespace, pod) is worker
                await asyncio.sleep(FOLLOW_POLL)
                if path.exists() and path.stat().st_size > offset:
                    with path.open("rb") as file:
                        file.seek(offset)
                        more = file.read()
                    offset += len(more)
                    await response.write(more)
        await response.write_eof()
        return response
