"""A OneInstant backup's decisions: what is paused, when a replica caught up, whether the instant held."""

from __future__ import annotations

import attrs
import pytest
from test_sources import cluster, primary, replica

from controllers.backup.instant import (
    PAUSE_TIMEOUT_MS,
    STREAM_MEMORY,
    caught_up,
    instant_reached,
    parse_memory_max,
    pause_seconds,
    primaries,
    replica_sources,
    streams_over_budget,
)
from controllers.backup.sources import NotSettled, sources
from valkey_operator.api.cluster import NodeRole
from valkey_operator.objectstore.transfer import MIB


def test_every_shards_primary_is_paused_and_only_replica_sources_wait_to_catch_up() -> None:
    nodes = {f"p{s}": primary(s) for s in range(3)} | {"r0": replica(0, 990), "r2": replica(2, 1000)}
    found = sources(cluster(nodes))
    assert not isinstance(found, NotSettled)
    by_pod = {pod.name: pod.ip for pod in cluster(nodes).pods}
    assert primaries(found) == (by_pod["p0"], by_pod["p1"], by_pod["p2"])
    assert [(s.pod, s.primary_pod, s.role) for s in found] == [
        ("r0", "p0", NodeRole.REPLICA),
        ("p1", "p1", NodeRole.PRIMARY),
        ("r2", "p2", NodeRole.REPLICA),
    ]
    assert [s.pod for s in replica_sources(found)] == ["r0", "r2"]


def test_a_primary_is_paused_once_even_if_two_sources_named_it() -> None:
    found = sources(cluster({"p0": primary(0), "p1": primary(1), "p2": primary(2)}))
    assert not isinstance(found, NotSettled)
    twice = (found[0], attrs.evolve(found[1], primary_ip=found[0].primary_ip))
    assert primaries(twice) == (found[0].primary_ip,)


@pytest.mark.parametrize(
    ("replica_offset", "primary_offset", "expected"),
    [(1000, 1000, True), (1001, 1000, True), (999, 1000, False), (None, 1000, False), (1000, None, False)],
)
def test_a_replica_caught_up_once_it_reached_its_paused_primarys_offset(
    replica_offset: int | None, primary_offset: int | None, expected: bool
) -> None:
    assert caught_up(replica_offset, primary_offset) is expected


def test_the_instant_held_only_if_every_fork_came_before_the_first_pause_could_end() -> None:
    limit = PAUSE_TIMEOUT_MS / 1000
    assert instant_reached(100.0, 100.05, PAUSE_TIMEOUT_MS)
    assert instant_reached(100.0, 100.0 + limit - 0.001, PAUSE_TIMEOUT_MS)
    assert not instant_reached(100.0, 100.0 + limit, PAUSE_TIMEOUT_MS), "at the bound, a pause may be over"
    assert not instant_reached(100.0, 100.0 + 5, PAUSE_TIMEOUT_MS)
    assert not instant_reached(100.0, None, PAUSE_TIMEOUT_MS), "a fork never seen is no instant"


def test_the_pause_reported_is_the_longest_a_primary_held_writes() -> None:
    sent = {"a": 10.000, "b": 10.001, "c": 10.002}
    assert pause_seconds(sent, {"a": 10.030, "b": 10.040, "c": 10.035}) == pytest.approx(0.039)
    assert pause_seconds({**sent, "c": 9.990}, {"a": 10.030, "b": 10.040}) == pytest.approx(0.050), (
        "a primary that never answered UNPAUSE counts up to the last answer"
    )
    assert pause_seconds({}, {}) == 0.0


def test_the_pause_bound_holds_writes_less_than_client_timeouts() -> None:
    assert 500 <= PAUSE_TIMEOUT_MS <= 2000


def test_a_cgroup_memory_max_is_bytes_or_no_limit() -> None:
    assert parse_memory_max("536870912\n") == 512 * MIB
    assert parse_memory_max("max\n") is None
    assert parse_memory_max("9223372036854771712\n") is None, "cgroup v1's no limit"


def test_every_shards_stream_must_fit_in_half_the_operators_memory_limit() -> None:
    assert STREAM_MEMORY == 9 * MIB
    assert streams_over_budget(28, 512 * MIB) is None  # the chart's limit: 28 x 9 MiB = 252 MiB
    assert streams_over_budget(1000, None) is None  # no limit known: nothing to refuse on
    refused = streams_over_budget(29, 512 * MIB)
    assert refused == (
        "a OneInstant backup reads all 29 shards at once, 9 MiB each in the operator (261 MiB), over 50% "
        "of its memory limit (512 MiB): raise the operator's memory limit (the chart's "
        "resources.limits.memory) to 523Mi or more, or take PerShard backups"
    )
