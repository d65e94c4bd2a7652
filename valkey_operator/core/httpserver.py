"""The manager's HTTP endpoints: Prometheus /metrics, and /healthz + /readyz probes.

The manager imports this module only when it serves one of them (aiohttp's
server side is a tenth of the core's import time, and `"0"` turns both off).
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = structlog.get_logger(__name__)

Check = Callable[[], bool]


class HttpEndpoint:
    """One aiohttp site; `port` is the bound port (useful with port 0)."""

    def __init__(
        self, app: web.Application, host: str, port: int, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self._runner = web.AppRunner(app, access_log=None)
        self._host = host
        self._requested_port = port
        self._ssl_context = ssl_context
        self.port = port

    async def start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._requested_port, ssl_context=self._ssl_context)
        await site.start()
        sockets = getattr(site._server, "sockets", None)
        if sockets:
            self.port = sockets[0].getsockname()[1]

    async def stop(self) -> None:
        await self._runner.cleanup()


ScrapeHook = Callable[[], Awaitable[bytes]]
"""Awaited at each /metrics request; returns exposition text (format 0.0.4) appended to the
registry's: for families read on scrape and rendered by their owner, never also in the registry."""


def metrics_app(
    registry: CollectorRegistry, hooks: Sequence[ScrapeHook] = (), middlewares: Sequence[Any] = ()
) -> web.Application:
    async def metrics(_request: web.Request) -> web.Response:
        extra = []
        for hook in hooks:
            try:
                extra.append(await hook())
            except Exception:  # a failed hook costs its own families, never the scrape
                log.exception("scrape hook failed")
        body = generate_latest(registry) + b"".join(extra)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application(middlewares=list(middlewares))
    app.router.add_get("/metrics", metrics)
    return app


def probes_app(healthy: Check, ready: Check) -> web.Application:
    def probe(check: Check) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(_request: web.Request) -> web.Response:
            ok = check()
            return web.Response(status=200 if ok else 503, text="ok" if ok else "not ready")

        return handler

    app = web.Application()
    app.router.add_get("/healthz", probe(healthy))
    app.router.add_get("/readyz", probe(ready))
    return app
