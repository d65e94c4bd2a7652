"""/metrics appends what each scrape hook renders to the registry's families; a hook that fails
costs only its own families, never the scrape."""

from __future__ import annotations

import aiohttp
from prometheus_client import CollectorRegistry, Gauge

from valkey_operator.core import httpserver


async def test_hooks_are_awaited_at_each_scrape_and_a_failing_one_is_left_out() -> None:
    registry = CollectorRegistry()
    Gauge("own_gauge", "from the registry", registry=registry).set(3)
    calls = []

    async def rendered() -> bytes:
        calls.append(1)
        return f"# TYPE hooked gauge\nhooked {len(calls)}.0\n".encode()

    async def broken() -> bytes:
        raise RuntimeError("a node read failed")

    endpoint = httpserver.HttpEndpoint(httpserver.metrics_app(registry, [broken, rendered]), "127.0.0.1", 0)
    await endpoint.start()
    try:
        async with aiohttp.ClientSession() as session:
            for expected in ("hooked 1.0", "hooked 2.0"):
                async with session.get(f"http://127.0.0.1:{endpoint.port}/metrics") as response:
                    assert response.status == 200
                    body = await response.text()
                assert "own_gauge 3.0" in body
                assert expected in body.splitlines()
    finally:
        await endpoint.stop()
