"""Pure: one Valkey node's INFO and CLUSTER INFO as redis_exporter's series (names, types, labels).

Users' dashboards and alerts for Redis and Valkey read redis_exporter's names, so the operator
exports the same ones for every node it runs: `redis_memory_used_bytes`, `redis_commands_processed_
total`, `redis_db_keys{db}`, `redis_master_link_up{master_host,master_port}`,
`redis_instance_info{role,...}`, `redis_cluster_state` and so on, each with redis_exporter's type
(a few of its "_total" names are gauges there, and stay gauges here). The field -> name table is
the subset of redis_exporter's that Valkey 9 reports and that its common dashboards chart; the
per-command (`INFO commandstats`) and latency families are left out (they multiply the series by
the commands in use). The node's own labels (namespace, cluster, shard, pod) are added by the
collector, not here.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

GAUGE = "gauge"
COUNTER = "counter"

INFO_SECTIONS = (
    "server", "clients", "memory", "persistence", "stats", "replication", "cpu", "cluster", "keyspace",
)  # fmt: skip
"""What `INFO` is asked for: INFO's default sections without errorstats and module_list."""

# INFO field -> (metric name without the redis_ prefix, type), as redis_exporter names them.
FIELDS: dict[str, tuple[str, str]] = {
    # Server
    "uptime_in_seconds": ("uptime_in_seconds", GAUGE),
    "process_id": ("process_id", GAUGE),
    "io_threads_active": ("io_threads_active", GAUGE),
    # Clients
    "connected_clients": ("connected_clients", GAUGE),
    "blocked_clients": ("blocked_clients", GAUGE),
    "maxclients": ("max_clients", GAUGE),
    "tracking_clients": ("tracking_clients", GAUGE),
    "pubsub_clients": ("pubsub_clients", GAUGE),
    "watching_clients": ("watching_clients", GAUGE),
    "clients_in_timeout_table": ("clients_in_timeout_table", GAUGE),
    "client_recent_max_input_buffer": ("client_recent_max_input_buffer_bytes", GAUGE),
    "client_recent_max_output_buffer": ("client_recent_max_output_buffer_bytes", GAUGE),
    # Memory
    "used_memory": ("memory_used_bytes", GAUGE),
    "used_memory_rss": ("memory_used_rss_bytes", GAUGE),
    "used_memory_peak": ("memory_used_peak_bytes", GAUGE),
    "used_memory_lua": ("memory_used_lua_bytes", GAUGE),
    "used_memory_overhead": ("memory_used_overhead_bytes", GAUGE),
    "used_memory_startup": ("memory_used_startup_bytes", GAUGE),
    "used_memory_dataset": ("memory_used_dataset_bytes", GAUGE),
    "maxmemory": ("memory_max_bytes", GAUGE),
    "mem_fragmentation_ratio": ("mem_fragmentation_ratio", GAUGE),
    "mem_fragmentation_bytes": ("mem_fragmentation_bytes", GAUGE),
    "mem_clients_slaves": ("mem_clients_slaves", GAUGE),
    "mem_clients_normal": ("mem_clients_normal", GAUGE),
    "mem_cluster_links": ("mem_cluster_links_bytes", GAUGE),
    "mem_replication_backlog": ("mem_replication_backlog_bytes", GAUGE),
    "mem_not_counted_for_evict": ("mem_not_counted_for_eviction_bytes", GAUGE),
    "lazyfree_pending_objects": ("lazyfree_pending_objects", GAUGE),
    "active_defrag_running": ("active_defrag_running", GAUGE),
    # Persistence
    "loading": ("loading_dump_file", GAUGE),
    "rdb_changes_since_last_save": ("rdb_changes_since_last_save", GAUGE),
    "rdb_bgsave_in_progress": ("rdb_bgsave_in_progress", GAUGE),
    "rdb_last_save_time": ("rdb_last_save_timestamp_seconds", GAUGE),
    "rdb_last_bgsave_status": ("rdb_last_bgsave_status", GAUGE),
    "rdb_last_bgsave_time_sec": ("rdb_last_bgsave_duration_sec", GAUGE),
    "rdb_saves": ("rdb_saves_total", GAUGE),
    "aof_enabled": ("aof_enabled", GAUGE),
    "aof_rewrite_in_progress": ("aof_rewrite_in_progress", GAUGE),
    "aof_last_bgrewrite_status": ("aof_last_bgrewrite_status", GAUGE),
    "aof_last_write_status": ("aof_last_write_status", GAUGE),
    # Stats
    "total_connections_received": ("connections_received_total", COUNTER),
    "total_commands_processed": ("commands_processed_total", COUNTER),
    "rejected_connections": ("rejected_connections_total", COUNTER),
    "total_net_input_bytes": ("net_input_bytes_total", COUNTER),
    "total_net_output_bytes": ("net_output_bytes_total", COUNTER),
    "total_net_repl_input_bytes": ("net_repl_input_bytes_total", COUNTER),
    "total_net_repl_output_bytes": ("net_repl_output_bytes_total", COUNTER),
    "expired_keys": ("expired_keys_total", COUNTER),
    "evicted_keys": ("evicted_keys_total", COUNTER),
    "evicted_clients": ("evicted_clients_total", COUNTER),
    "keyspace_hits": ("keyspace_hits_total", COUNTER),
    "keyspace_misses": ("keyspace_misses_total", COUNTER),
    "acl_access_denied_auth": ("acl_access_denied_auth_total", COUNTER),
    "client_query_buffer_limit_disconnections": ("client_query_buffer_limit_disconnections_total", COUNTER),
    "client_output_buffer_limit_disconnections": ("client_output_buffer_limit_disconnections_total", COUNTER),
    "pubsub_channels": ("pubsub_channels", GAUGE),
    "pubsub_patterns": ("pubsub_patterns", GAUGE),
    "expired_stale_perc": ("expired_stale_percentage", GAUGE),
    # Replication
    "connected_slaves": ("connected_slaves", GAUGE),
    "master_repl_offset": ("master_repl_offset", GAUGE),
    "second_repl_offset": ("second_repl_offset", GAUGE),
    "repl_backlog_size": ("replication_backlog_bytes", GAUGE),
    "repl_backlog_active": ("repl_backlog_is_active", GAUGE),
    "repl_backlog_histlen": ("repl_backlog_history_bytes", GAUGE),
    "sync_full": ("replica_resyncs_full", GAUGE),
    "sync_partial_ok": ("replica_partial_resync_accepted", GAUGE),
    "sync_partial_err": ("replica_partial_resync_denied", GAUGE),
    # CPU
    "used_cpu_sys": ("cpu_sys_seconds_total", COUNTER),
    "used_cpu_user": ("cpu_user_seconds_total", COUNTER),
    "used_cpu_sys_children": ("cpu_sys_children_seconds_total", COUNTER),
    "used_cpu_user_children": ("cpu_user_children_seconds_total", COUNTER),
    "used_cpu_sys_main_thread": ("cpu_sys_main_thread_seconds_total", COUNTER),
    "used_cpu_user_main_thread": ("cpu_user_main_thread_seconds_total", COUNTER),
    # Cluster (INFO)
    "cluster_enabled": ("cluster_enabled", GAUGE),
}

CLUSTER_FIELDS: dict[str, str] = {
    "cluster_state": "cluster_state",
    "cluster_slots_assigned": "cluster_slots_assigned",
    "cluster_slots_ok": "cluster_slots_ok",
    "cluster_slots_pfail": "cluster_slots_pfail",
    "cluster_slots_fail": "cluster_slots_fail",
    "cluster_known_nodes": "cluster_known_nodes",
    "cluster_size": "cluster_size",
    "cluster_current_epoch": "cluster_current_epoch",
    "cluster_my_epoch": "cluster_my_epoch",
    "cluster_stats_messages_sent": "cluster_messages_sent_total",
    "cluster_stats_messages_received": "cluster_messages_received_total",
}
"""CLUSTER INFO field -> name: redis_exporter passes every cluster_* field through as a gauge (ok 1,
fail 0); these are the ones that are not per message type."""

MASTER_LABELS = ("master_host", "master_port")
SLAVE_LABELS = ("slave_ip", "slave_port", "slave_state")
INSTANCE_LABELS = (
    "role", "redis_version", "redis_build_id", "redis_mode", "os", "maxmemory_policy", "tcp_port",
    "run_id", "process_id", "master_replid", "valkey_version", "valkey_release_stage",
)  # fmt: skip

HELP: dict[str, str] = {
    "up": "Information about the Redis instance (1 when the operator read it)",
    "start_time_seconds": "Start time of the Redis instance since unix epoch in seconds.",
    "instance_info": "Information about the Redis instance",
    "slave_info": "Information about the Redis slave",
    "master_link_up": "Master link status on Redis slave",
    "master_last_io_seconds_ago": "Master last io seconds ago",
    "master_sync_in_progress": "Master sync in progress",
    "slave_repl_offset": "Slave replication offset",
    "connected_slave_offset_bytes": "Offset of connected slave",
    "connected_slave_lag_seconds": "Lag of connected slave",
    "db_keys": "Total number of keys by DB",
    "db_keys_expiring": "Total number of expiring keys by DB",
    "db_avg_ttl_seconds": "Avg TTL in seconds",
    "latest_fork_seconds": "latest_fork_usec from INFO stats, in seconds",
}


@attrs.frozen
class Sample:
    """One series of a node: full metric name (redis_...), its type, its own labels, its value."""

    name: str
    kind: str
    labels: tuple[tuple[str, str], ...]
    value: float


def help_of(name: str) -> str:
    short = name.removeprefix("redis_")
    return HELP.get(short, f"{short} from Valkey's INFO or CLUSTER INFO (redis_exporter's name)")


def _number(text: str) -> float | None:
    if text in ("ok", "true"):
        return 1.0
    if text in ("err", "fail", "false"):
        return 0.0
    try:
        return float(text)
    except ValueError:
        return None


def _pairs(text: str) -> dict[str, str]:
    """`ip=..,port=..,state=..` -> dict."""
    found = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if sep:
            found[key] = value
    return found


def _gauge(name: str, value: float, **labels: str) -> Sample:
    return Sample(f"redis_{name}", GAUGE, tuple(labels.items()), value)


def up(reachable: bool) -> Sample:
    return _gauge("up", 1.0 if reachable else 0.0)


def node_samples(info: Mapping[str, str], cluster_info: Mapping[str, str], now: float) -> list[Sample]:
    """Every series of one node that answered, from its parsed INFO and CLUSTER INFO (`now`, unix
    seconds, dates its start time)."""
    samples = [up(True)]
    for field, (name, kind) in FIELDS.items():
        value = _number(info[field]) if field in info else None
        if value is not None:
            samples.append(Sample(f"redis_{name}", kind, (), value))
    if (fork := _number(info.get("latest_fork_usec", ""))) is not None:
        samples.append(_gauge("latest_fork_seconds", fork / 1e6))
    if (uptime := _number(info.get("uptime_in_seconds", ""))) is not None:
        samples.append(_gauge("start_time_seconds", float(int(now)) - uptime))
    samples += _replication(info)
    samples += _keyspace(info)
    for field, name in CLUSTER_FIELDS.items():
        value = _number(cluster_info[field]) if field in cluster_info else None
        if value is not None:
            samples.append(_gauge(name, value))
    samples.append(_gauge("instance_info", 1.0, **_instance_labels(info)))
    return samples


def _instance_labels(info: Mapping[str, str]) -> dict[str, str]:
    labels = {name: info.get(name, "") for name in INSTANCE_LABELS}
    # Valkey 9 says server_mode where Redis said redis_mode.
    labels["redis_mode"] = info.get("redis_mode") or info.get("server_mode", "")
    return labels


def _replication(info: Mapping[str, str]) -> list[Sample]:
    found: list[Sample] = []
    master = {"master_host": info.get("master_host", ""), "master_port": info.get("master_port", "")}
    if info.get("role") == "slave":
        found.append(_gauge("slave_info", 1.0, **master, read_only=info.get("slave_read_only", "")))
        found.append(
            _gauge("master_link_up", 1.0 if info.get("master_link_status") == "up" else 0.0, **master)
        )
        for field in ("master_last_io_seconds_ago", "master_sync_in_progress", "slave_repl_offset"):
            if (value := _number(info.get(field, ""))) is not None:
                found.append(_gauge(field, value, **master))
    for index in range(int(_number(info.get("connected_slaves", "0")) or 0)):
        replica = _pairs(info.get(f"slave{index}", ""))
        labels = {
            "slave_ip": replica.get("ip", ""),
            "slave_port": replica.get("port", ""),
            "slave_state": replica.get("state", ""),
        }
        if (offset := _number(replica.get("offset", ""))) is not None:
            found.append(_gauge("connected_slave_offset_bytes", offset, **labels))
        if (lag := _number(replica.get("lag", ""))) is not None:
            found.append(_gauge("connected_slave_lag_seconds", lag, **labels))
    return found


def _keyspace(info: Mapping[str, str]) -> list[Sample]:
    found: list[Sample] = []
    for field, text in info.items():
        if not (field.startswith("db") and field[2:].isdigit()):
            continue
        stats = _pairs(text)
        keys, expires = _number(stats.get("keys", "")), _number(stats.get("expires", ""))
        if keys is None or expires is None:
            continue
        found.append(_gauge("db_keys", keys, db=field))
        found.append(_gauge("db_keys_expiring", expires, db=field))
        if (ttl := _number(stats.get("avg_ttl", ""))) is not None:
            found.append(_gauge("db_avg_ttl_seconds", ttl / 1000, db=field))
    return found
