"""The exporter's read on scrape against real valkey-server processes.

A scrape reads every node once per max_age (a second scrape within it serves the same read), a
node that does not answer is `redis_up 0` within the deadline while the others are read, and a
node or cluster the reconciler no longer lists loses its series at once.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from controllers.cluster.valkey_exporter import NodeTarget, ValkeyExporter
from valkey_operator.valkey.admin import AdminClient, Credentials
from valkey_testbed import images
from valkey_testbed.operatorproc import LOOPBACK_NETWORKS
from valkey_testbed.valkeyproc import ValkeyServer, server_base_dir, start_server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PASSWORD = "exporter-test-password"
HOSTS = ("127.0.92.1", "127.0.92.2")
SILENT = "127.0.92.3"
"""Accepts connections and never answers: a frozen node."""


@pytest.fixture(scope="module")
def servers() -> Iterator[list[ValkeyServer]]:
    entry = images.resolve_image(images.newest_image())
    if entry is None:
        pytest.fail("no Valkey image installed (python -m valkey_testbed build)")
    port = 0
    started: list[ValkeyServer] = []
    try:
        for host in HOSTS:
            started.append(
                start_server(
                    entry, host, port or None, base_dir=server_base_dir(), cluster=True, password=PASSWORD
                )
            )
            port = started[0].port
        yield started
    finally:
        for server in started:
            server.stop()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def exporter_of(servers: list[ValkeyServer], clock: Clock, deadline: float = 5.0) -> ValkeyExporter:
    exporter = ValkeyExporter(max_age=10.0, deadline=deadline, clock=clock)
    admin = AdminClient(
        credentials=Credentials(username="default", password=PASSWORD),
        allowed_networks=LOOPBACK_NETWORKS,
        port=servers[0].port,
    )
    nodes = [NodeTarget(pod=f"c-0-{i}", ip=server.host, shard="0") for i, server in enumerate(servers)]
    exporter.update("ns", "c", admin, nodes)
    return exporter


def values(body: bytes, family: str) -> dict[str, float]:
    for parsed in text_string_to_metric_families(body.decode()):
        if parsed.name == family:
            return {sample.labels["pod"]: sample.value for sample in parsed.samples}
    return {}


async def test_a_scrape_reads_every_node_once_per_max_age(servers: list[ValkeyServer]) -> None:
    clock = Clock()
    exporter = exporter_of(servers, clock)
    body = await exporter.refresh()
    assert values(body, "redis_up") == {"c-0-0": 1.0, "c-0-1": 1.0}
    before = values(body, "redis_commands_processed")
    servers[0].command("SET", "k", "v")  # a command the next read counts
    clock.now += 5
    assert await exporter.refresh() == body  # within max_age: the same read
    clock.now += 6
    after = values(await exporter.refresh(), "redis_commands_processed")
    assert after["c-0-0"] > before["c-0-0"]


async def test_a_node_that_does_not_answer_is_down_within_the_deadline(servers: list[ValkeyServer]) -> None:
    listener = socket.socket()
    listener.bind((SILENT, servers[0].port))
    listener.listen()
    try:
        clock = Clock()
        exporter = exporter_of(servers, clock, deadline=1.0)
        admin = exporter._clusters[("ns", "c")].admin
        exporter.update("ns", "c", admin, [NodeTarget(pod="c-0-0", ip=servers[0].host, shard="0"),
                                           NodeTarget(pod="c-0-9", ip=SILENT, shard="0")])  # fmt: skip
        body = await exporter.refresh()
        assert values(body, "redis_up") == {"c-0-0": 1.0, "c-0-9": 0.0}
        assert exporter.last_read_seconds < 2.0
    finally:
        listener.close()


async def test_a_node_or_cluster_no_longer_listed_loses_its_series(servers: list[ValkeyServer]) -> None:
    clock = Clock()
    exporter = exporter_of(servers, clock)
    await exporter.refresh()
    admin = exporter._clusters[("ns", "c")].admin
    exporter.update("ns", "c", admin, [NodeTarget(pod="c-0-0", ip=servers[0].host, shard="0")])
    assert values(await exporter.refresh(), "redis_up") == {"c-0-0": 1.0}
    exporter.forget("ns", "c")
    assert await exporter.refresh() == b""
