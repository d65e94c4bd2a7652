"""Backup metrics (docs/metrics.md): results, bytes, duration and the last success per cluster.

- `valkey_operator_backups_total{namespace,cluster,result}`: finished backups (completed, failed);
- `valkey_operator_backup_bytes_total{namespace,cluster}`: RDB bytes written to storage;
- `valkey_operator_backup_duration_seconds`: start to manifest, completed backups only;
- `valkey_operator_backup_last_success_timestamp_seconds{namespace,cluster}`: when the newest
  completed backup finished, for an alert on backups that stopped happening;
- `valkey_operator_backup_write_pause_seconds`: the write pause of each completed OneInstant backup
  (the longest a client saw on a primary).
"""

from __future__ import annotations

import weakref

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

COMPLETED = "completed"
FAILED = "failed"
PAUSE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0)
DURATION_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0)


class BackupMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.backups = Counter(
            "valkey_operator_backups",
            "Finished ValkeyBackups by result (completed, failed)",
            ["namespace", "cluster", "result"],
            registry=registry,
        )
        self.bytes = Counter(
            "valkey_operator_backup_bytes",
            "RDB bytes the operator wrote to object storage",
            ["namespace", "cluster"],
            registry=registry,
        )
        self.duration = Histogram(
            "valkey_operator_backup_duration_seconds",
            "Seconds from a backup's start to its manifest",
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.pause = Histogram(
            "valkey_operator_backup_write_pause_seconds",
            "Seconds writes were paused on the primaries for a OneInstant backup",
            buckets=PAUSE_BUCKETS,
            registry=registry,
        )
        self.last_success = Gauge(
            "valkey_operator_backup_last_success_timestamp_seconds",
            "Unix time the newest completed backup of the cluster finished",
            ["namespace", "cluster"],
            registry=registry,
        )

    def write_pause(self, seconds: float) -> None:
        self.pause.observe(seconds)

    def completed(self, namespace: str, cluster: str, size: int, seconds: float, at: float) -> None:
        self.backups.labels(namespace, cluster, COMPLETED).inc()
        self.backups.labels(namespace, cluster, FAILED)
        self.bytes.labels(namespace, cluster).inc(size)
        self.duration.observe(seconds)
        self.last_success.labels(namespace, cluster).set(at)

    def failed(self, namespace: str, cluster: str) -> None:
        self.backups.labels(namespace, cluster, FAILED).inc()
        self.backups.labels(namespace, cluster, COMPLETED)


_by_registry: weakref.WeakKeyDictionary[CollectorRegistry, BackupMetrics] = weakref.WeakKeyDictionary()


def backup_metrics(registry: CollectorRegistry) -> BackupMetrics:
    """The backup metric families of registry, created on first use (an operator started again in
    the same process, as tests do, finds them registered)."""
    metrics = _by_registry.get(registry)
    if metrics is None:
        metrics = _by_registry[registry] = BackupMetrics(registry)
    return metrics
