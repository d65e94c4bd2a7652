"""INFO and CLUSTER INFO text captured from a real valkey-server 9.1.2 (a 1x1 cluster with 250 keys,
50 of them with a TTL, maxmemory 64mb allkeys-lru; tests/unit/data/valkey_info) becomes
redis_exporter's series: its names, its types and its labels."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from controllers.cluster.valkey_exposition import NODE_LABELS, render
from controllers.cluster.valkey_series import COUNTER, GAUGE, Sample, node_samples, up
from valkey_operator.valkey.admin import parse_info

DATA = Path(__file__).parents[2] / "data" / "valkey_info"
NOW = 1796303665.0


def captured(role: str) -> tuple[dict[str, str], dict[str, str]]:
    return (
        parse_info((DATA / f"valkey_9.1.2_{role}_info.txt").read_text()),
        parse_info((DATA / f"valkey_9.1.2_{role}_cluster_info.txt").read_text()),
    )


def by_name(samples: list[Sample]) -> dict[str, list[Sample]]:
    found: dict[str, list[Sample]] = {}
    for sample in samples:
        found.setdefault(sample.name, []).append(sample)
    return found


def value(samples: list[Sample], name: str, **labels: str) -> float:
    (match,) = [s for s in samples if s.name == name and dict(s.labels) == labels]
    return match.value


def test_a_primarys_info_gives_redis_exporters_memory_traffic_keyspace_and_cluster_series() -> None:
    samples = node_samples(*captured("primary"), NOW)
    assert value(samples, "redis_up") == 1
    assert value(samples, "redis_memory_used_bytes") == 3213440
    assert value(samples, "redis_memory_max_bytes") == 64 * 1024 * 1024
    assert value(samples, "redis_connected_clients") == 1
    assert value(samples, "redis_blocked_clients") == 0
    assert value(samples, "redis_rejected_connections_total") == 0
    assert value(samples, "redis_commands_processed_total") == 668
    assert value(samples, "redis_keyspace_hits_total") == 20
    assert value(samples, "redis_keyspace_misses_total") == 20
    assert value(samples, "redis_evicted_keys_total") == 0
    assert value(samples, "redis_expired_keys_total") == 0
    assert value(samples, "redis_db_keys", db="db0") == 250
    assert value(samples, "redis_db_keys_expiring", db="db0") == 50
    assert value(samples, "redis_db_avg_ttl_seconds", db="db0") == pytest.approx(3599.763)
    assert value(samples, "redis_connected_slaves") == 1
    assert value(samples, "redis_master_repl_offset") == 29817
    replica = {"slave_ip": "127.0.0.1", "slave_port": "10500", "slave_state": "online"}
    assert value(samples, "redis_connected_slave_offset_bytes", **replica) == 29817
    assert value(samples, "redis_connected_slave_lag_seconds", **replica) == 0
    assert value(samples, "redis_cluster_state") == 1
    assert value(samples, "redis_cluster_enabled") == 1
    assert value(samples, "redis_cluster_slots_assigned") == 16384
    assert value(samples, "redis_cluster_known_nodes") == 2
    assert value(samples, "redis_rdb_last_bgsave_status") == 1  # "ok"
    assert value(samples, "redis_latest_fork_seconds") == pytest.approx(594e-6)
    assert value(samples, "redis_start_time_seconds") == NOW - 7
    (info,) = by_name(samples)["redis_instance_info"]
    labels = dict(info.labels)
    assert labels["role"] == "master"
    assert labels["maxmemory_policy"] == "allkeys-lru"
    assert labels["valkey_version"] == "9.1.2"
    assert labels["redis_version"] == "7.2.4"
    assert labels["redis_mode"] == "cluster"  # Valkey's server_mode
    names = by_name(samples)
    assert "redis_master_link_up" not in names and "redis_slave_info" not in names


def test_a_replicas_info_gives_its_link_and_offset_labelled_with_its_primary() -> None:
    samples = node_samples(*captured("replica"), NOW)
    primary = {"master_host": "127.77.0.1", "master_port": "18725"}
    assert value(samples, "redis_master_link_up", **primary) == 1
    assert value(samples, "redis_slave_repl_offset", **primary) == 29817
    assert value(samples, "redis_master_last_io_seconds_ago", **primary) == 1
    assert value(samples, "redis_master_sync_in_progress", **primary) == 0
    assert value(samples, "redis_slave_info", **primary, read_only="1") == 1
    assert dict(by_name(samples)["redis_instance_info"][0].labels)["role"] == "slave"
    assert "redis_connected_slave_offset_bytes" not in by_name(samples)


def test_a_down_link_and_a_failed_cluster_state_are_zero() -> None:
    info, cluster_info = captured("replica")
    samples = node_samples(
        {**info, "master_link_status": "down"}, {**cluster_info, "cluster_state": "fail"}, NOW
    )
    assert value(samples, "redis_master_link_up", master_host="127.77.0.1", master_port="18725") == 0
    assert value(samples, "redis_cluster_state") == 0


def test_counters_and_gauges_have_redis_exporters_types() -> None:
    kinds = {s.name: s.kind for s in node_samples(*captured("primary"), NOW)}
    for counter in (
        "redis_commands_processed_total",
        "redis_keyspace_hits_total",
        "redis_evicted_keys_total",
        "redis_rejected_connections_total",
        "redis_cpu_sys_seconds_total",
    ):
        assert kinds[counter] == COUNTER, counter
    # redis_exporter exports these "_total" names as gauges; dashboards rate() them either way.
    assert kinds["redis_rdb_saves_total"] == GAUGE
    assert kinds["redis_cluster_messages_sent_total"] == GAUGE


def test_the_exposition_carries_the_nodes_labels_and_parses_back() -> None:
    text = render(
        [
            (("shop", "cache", "0", "cache-0-a"), node_samples(*captured("primary"), NOW)),
            (("shop", "cache", "0", "cache-0-b"), node_samples(*captured("replica"), NOW)),
            (("shop", "cache", "1", "cache-1-a"), [up(False)]),
        ]
    ).decode()
    assert "# TYPE redis_commands_processed_total counter" in text
    parsed = {f.name: f for f in text_string_to_metric_families(text)}
    ups = {s.labels["pod"]: s.value for s in parsed["redis_up"].samples}
    assert ups == {"cache-0-a": 1, "cache-0-b": 1, "cache-1-a": 0}
    (used,) = [s for s in parsed["redis_memory_used_bytes"].samples if s.labels["pod"] == "cache-0-a"]
    assert used.value == 3213440
    assert {key: used.labels[key] for key in NODE_LABELS} == {
        "namespace": "shop",
        "cluster": "cache",
        "shard": "0",
        "pod": "cache-0-a",
    }
    commands = parsed["redis_commands_processed"]
    assert commands.type == "counter" and {s.name for s in commands.samples} == {
        "redis_commands_processed_total"
    }
    (info,) = [s for s in parsed["redis_instance_info"].samples if s.labels["pod"] == "cache-0-b"]
    assert info.labels["role"] == "slave" and info.labels["maxmemory_policy"] == "allkeys-lru"


def test_label_values_are_escaped() -> None:
    sample = Sample("redis_instance_info", GAUGE, (("os", 'Linux "x"\\n'),), 1.0)
    text = render([(("a\nb", "c", "0", "p"), [sample])]).decode()
    (parsed,) = text_string_to_metric_families(text)
    assert parsed.samples[0].labels["namespace"] == "a\nb"
    assert parsed.samples[0].labels["os"] == 'Linux "x"\\n'
