"""Operator metrics of the cluster reconciler (SPEC 3), from what reconcile already observes.

- `valkey_operator_clusters{state}`: clusters by state (each cluster counted once, in its last state);
  `valkey_operator_cluster_state{namespace,cluster,state}`: 1 for the state a cluster is in, so an
  alert can name the cluster;
- `valkey_operator_cluster_stalled{namespace,cluster,reason}`: 1 while the cluster's Stalled
  condition is True (only a human can move it on, decision/stalled.py; a new cluster Failed), with
  its reason; one series per stalled cluster, none for the others, so the alert can name the reason;
- `valkey_operator_version_floor_rejections_total{namespace,cluster}`: a cluster stopping (a new
  one Failed, a roll stopped) because a node runs a Valkey below the floor;
- per node, labelled namespace/cluster/pod: `valkey_node_role{role}` (1 for the node's role),
  `valkey_node_replication_lag_bytes` (replicas: primary offset minus replica offset),
  `valkey_node_cluster_state_ok` (1 ok, 0 not), `valkey_node_used_memory_bytes`, `valkey_node_slots`,
  `valkey_node_tls_certificate_expiry_seconds` (TLS clusters: from the probe's own handshake);
- `valkey_operator_rollouts_{started,finished,failed}_total{namespace,cluster}`, the histogram
  `valkey_operator_rollout_duration_seconds`, and `valkey_operator_failovers_total{mode}`
  (coordinated: a planned roll; takeover: a departed primary's replica promoted),
  `valkey_operator_failover_timeouts_total{namespace,cluster}` (each attempt that timed out);
- `valkey_operator_slot_migration_failures_total{namespace,cluster}`: atomic slot migration jobs
  that ended failed or cancelled, each job once; `valkey_operator_slot_migrations_active`: jobs
  under way;
- `valkey_operator_cluster_archived_until_timestamp_seconds{namespace,cluster}`: with
  spec.backup.pointInTime, the moment before which every acknowledged write of every shard is
  archived (status.pointInTime.archivedUntil); absent while there is none, so
  `time() - ...` is the archive's lag;
- `valkey_operator_tls_expiry_warning_seconds`: the configured tlsExpiryWarningDays, so the
  certificate alert compares each node's expiry with the window of the operator that reports it.
A cluster's counters (and the rollout histogram) start at 0 when the operator first sees it, so
`increase()` and `rate()` see its first event. Series of a cluster's pods that are gone, and of a
deleted cluster, are removed.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from controllers.cluster.decision.decide import MetricChanges
from controllers.shared.observation import Observation
from controllers.shared.probe import NodeExtras
from valkey_operator.api.cluster import ClusterState, NodeRole
from valkey_operator.valkey.slots import slot_count

NODE_LABELS = ["namespace", "cluster", "pod"]


class ClusterMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.clusters = Gauge(
            "valkey_operator_clusters", "ValkeyClusters by state", ["state"], registry=registry
        )
        self.cluster_state = Gauge(
            "valkey_operator_cluster_state",
            "1 for the state the ValkeyCluster is in, 0 for the others",
            ["namespace", "cluster", "state"],
            registry=registry,
        )
        self.cluster_stalled = Gauge(
            "valkey_operator_cluster_stalled",
            "1 while the ValkeyCluster is Stalled (only a human can unblock it), labelled with the reason",
            ["namespace", "cluster", "reason"],
            registry=registry,
        )
        self.version_floor_rejections = Counter(
            "valkey_operator_version_floor_rejections",
            "Times a ValkeyCluster stopped because a node runs a Valkey below the version floor",
            ["namespace", "cluster"],
            registry=registry,
        )
        self.node_role = Gauge(
            "valkey_node_role",
            "The node's role (1 for the labelled role)",
            [*NODE_LABELS, "role"],
            registry=registry,
        )
        self.replication_lag = Gauge(
            "valkey_node_replication_lag_bytes",
            "Replication offset a replica trails its primary by",
            NODE_LABELS,
            registry=registry,
        )
        self.cluster_state_ok = Gauge(
            "valkey_node_cluster_state_ok",
            "1 when the node reports cluster_state:ok",
            NODE_LABELS,
            registry=registry,
        )
        self.used_memory = Gauge(
            "valkey_node_used_memory_bytes", "used_memory from INFO memory", NODE_LABELS, registry=registry
        )
        self.slots = Gauge(
            "valkey_node_slots",
            "Hash slots the node serves (a primary's; 0 on a replica), as the last pass observed",
            NODE_LABELS,
            registry=registry,
        )
        self.tls_expiry = Gauge(
            "valkey_node_tls_certificate_expiry_seconds",
            "Seconds until the certificate the node presents in a TLS handshake expires (TLS clusters)",
            NODE_LABELS,
            registry=registry,
        )
        self.migration_failures = Counter(
            "valkey_operator_slot_migration_failures",
            "Atomic slot migration jobs that ended failed or cancelled (each job counted once)",
            ["namespace", "cluster"],
            registry=registry,
        )
        self.migrations_active = Gauge(
            "valkey_operator_slot_migrations_active",
            "Atomic slot migration jobs under way, as their source primaries report them",
            ["namespace", "cluster"],
            registry=registry,
        )
        cluster_labels = ["namespace", "cluster"]
        self.rollouts_started = Counter(
            "valkey_operator_rollouts_started",
            "Rolling updates begun (a cluster's pods found on an outdated template)",
            cluster_labels,
            registry=registry,
        )
        self.rollouts_finished = Counter(
            "valkey_operator_rollouts_finished",
            "Rolling updates finished (every pod on the current template)",
            cluster_labels,
            registry=registry,
        )
        self.rollouts_failed = Counter(
            "valkey_operator_rollouts_failed",
            "Rolling updates stopped by a failure (e.g. a binary below the floor; the old pods keep serving)",
            cluster_labels,
            registry=registry,
        )
        self.rollout_seconds = Histogram(
            "valkey_operator_rollout_duration_seconds",
            "From a rolling update's first pass to every pod on the current template",
            cluster_labels,
            buckets=(10, 30, 60, 120, 300, 600, 1200, 3600, 7200),
            registry=registry,
        )
        self.failovers = Counter(
            "valkey_operator_failovers",
            "Failovers the operator asked for: coordinated (a planned roll) or takeover (a departed primary)",
            [*cluster_labels, "mode"],
            registry=registry,
        )
        self.failover_timeouts = Counter(
            "valkey_operator_failover_timeouts",
            "Coordinated failovers that did not complete in time (each attempt once; retried with backoff)",
            cluster_labels,
            registry=registry,
        )
        self.max_primaries_per_node = Gauge(
            "valkey_operator_cluster_max_primaries_per_node",
            "The most slot-serving primaries one Kubernetes node holds (status.maxPrimariesPerNode)",
            cluster_labels,
            registry=registry,
        )
        self.archived_until = Gauge(
            "valkey_operator_cluster_archived_until_timestamp_seconds",
            "spec.backup.pointInTime: every write a primary acknowledged before this moment (Unix "
            "seconds) is archived, for every shard (status.pointInTime.archivedUntil)",
            cluster_labels,
            registry=registry,
        )
        self.tls_expiry_warning = Gauge(
            "valkey_operator_tls_expiry_warning_seconds",
            "A certificate a node presents that expires sooner is reported (tlsExpiryWarningDays)",
            registry=registry,
        )
        self._states: dict[tuple[str, str], ClusterState] = {}
        self._stalled: dict[tuple[str, str], str] = {}
        self._pods: dict[tuple[str, str], set[str]] = {}
        for state in ClusterState:
            self.clusters.labels(state=state.value).set(0)

    def record_state(self, namespace: str, cluster: str, state: ClusterState | None) -> None:
        key = (namespace, cluster)
        if state is None:
            self._states.pop(key, None)
            for each in ClusterState:
                with contextlib.suppress(KeyError):
                    self.cluster_state.remove(namespace, cluster, each.value)
        else:
            if key not in self._states:
                self._start_counters(namespace, cluster)
            self._states[key] = state
            for each in ClusterState:
                self.cluster_state.labels(namespace=namespace, cluster=cluster, state=each.value).set(
                    1 if each is state else 0
                )
        for each in ClusterState:
            self.clusters.labels(state=each.value).set(sum(1 for s in self._states.values() if s is each))

    def record_stalled(self, namespace: str, cluster: str, reason: str | None) -> None:
        """The cluster's one stalled series: set for its reason, the series of an earlier reason
        removed, and none at all once it is no longer Stalled (None). The reasons are the code's
        fixed set (decision/stalled.py, VersionBelowFloor, PodsFailing), so the label stays bounded."""
        key = (namespace, cluster)
        before = self._stalled.pop(key, None)
        if before is not None and before != reason:
            with contextlib.suppress(KeyError):
                self.cluster_stalled.remove(namespace, cluster, before)
        if reason is not None:
            self._stalled[key] = reason
            self.cluster_stalled.labels(namespace=namespace, cluster=cluster, reason=reason).set(1)

    def _start_counters(self, namespace: str, cluster: str) -> None:
        """Create a new cluster's counter and histogram series at 0: a series born at 1 hides its first
        event from Prometheus' increase(), and the rollout duration panel's rate() would stay NaN."""
        for counter in self._cluster_counters():
            counter.labels(namespace=namespace, cluster=cluster)
        self.rollout_seconds.labels(namespace=namespace, cluster=cluster)
        for mode in ("coordinated", "takeover"):
            self.failovers.labels(namespace=namespace, cluster=cluster, mode=mode)

    def _cluster_counters(self) -> tuple[Counter, ...]:
        return (
            self.version_floor_rejections,
            self.migration_failures,
            self.rollouts_started,
            self.rollouts_finished,
            self.rollouts_failed,
            self.failover_timeouts,
        )

    def apply(self, namespace: str, cluster: str, changes: MetricChanges) -> None:
        """The metric changes decide() chose for one pass."""
        labels = {"namespace": namespace, "cluster": cluster}
        if changes.state is not None:
            self.record_state(namespace, cluster, changes.state)
        self.record_stalled(namespace, cluster, changes.stalled)
        if changes.max_primaries_per_node is not None:
            self.max_primaries_per_node.labels(**labels).set(changes.max_primaries_per_node)
        if changes.version_floor_rejection:
            self.record_rejection(namespace, cluster)
        for counter, happened in (
            (self.rollouts_started, changes.rollout_started),
            (self.rollouts_finished, changes.rollout_finished),
            (self.rollouts_failed, changes.rollout_failed),
        ):
            if happened:
                counter.labels(**labels).inc()
        if changes.rollout_seconds is not None:
            self.rollout_seconds.labels(**labels).observe(changes.rollout_seconds)
        if changes.failover_timeouts:
            self.failover_timeouts.labels(**labels).inc(changes.failover_timeouts)
        for mode, count in changes.failovers.items():
            self.failovers.labels(**labels, mode=mode).inc(count)
        if changes.migration_failures:
            self.migration_failures.labels(**labels).inc(changes.migration_failures)
        if changes.migrations_active is not None:
            self.migrations_active.labels(**labels).set(changes.migrations_active)
        if changes.archived_until is not None:
            self.archived_until.labels(**labels).set(changes.archived_until)
        else:
            with contextlib.suppress(KeyError):
                self.archived_until.remove(namespace, cluster)

    def record_rejection(self, namespace: str, cluster: str) -> None:
        self.version_floor_rejections.labels(namespace=namespace, cluster=cluster).inc()

    def record_nodes(
        self,
        namespace: str,
        cluster: str,
        observation: Observation,
        extras: Mapping[str, NodeExtras],
        now: float,
    ) -> None:
        """The per-node gauges: a mirror of what the pass observed (certificate lifetimes counted
        from the pass's time, `now`); a pod no longer observed loses its series."""
        key = (namespace, cluster)
        by_id = {obs.node_id: obs for obs in observation.nodes.values() if obs.node_id}
        seen: set[str] = set()
        for pod, obs in observation.nodes.items():
            if not obs.reachable or obs.node_id is None:
                continue
            seen.add(pod)
            labels = {"namespace": namespace, "cluster": cluster, "pod": pod}
            for role in NodeRole:
                self.node_role.labels(**labels, role=role.value).set(1 if obs.role is role else 0)
            self.cluster_state_ok.labels(**labels).set(1 if obs.cluster_ok else 0)
            self.slots.labels(**labels).set(slot_count(obs.slots))
            primary = by_id.get(obs.primary_id or "")
            if obs.role is NodeRole.REPLICA and primary is not None:
                self.replication_lag.labels(**labels).set(max(primary.repl_offset - obs.repl_offset, 0))
            else:
                self.replication_lag.labels(**labels).set(0)
            memory = extras.get(pod, NodeExtras()).used_memory
            if memory is not None:
                self.used_memory.labels(**labels).set(memory)
            if obs.served is not None:
                self.tls_expiry.labels(**labels).set(obs.served.not_after - now)
        for pod in self._pods.get(key, set()) - seen:
            self._remove_pod(namespace, cluster, pod)
        self._pods[key] = seen

    def forget_cluster(self, namespace: str, cluster: str) -> None:
        for pod in self._pods.pop((namespace, cluster), set()):
            self._remove_pod(namespace, cluster, pod)
        self.record_state(namespace, cluster, None)
        self.record_stalled(namespace, cluster, None)
        for family in (
            *self._cluster_counters(),
            self.migrations_active,
            self.rollout_seconds,
            self.max_primaries_per_node,
            self.archived_until,
        ):
            with contextlib.suppress(KeyError):
                family.remove(namespace, cluster)
        for mode in ("coordinated", "takeover"):
            with contextlib.suppress(KeyError):
                self.failovers.remove(namespace, cluster, mode)

    def _remove_pod(self, namespace: str, cluster: str, pod: str) -> None:
        for gauge in (
            self.replication_lag,
            self.cluster_state_ok,
            self.used_memory,
            self.slots,
            self.tls_expiry,
        ):
            with contextlib.suppress(KeyError):
                gauge.remove(namespace, cluster, pod)
        for role in NodeRole:
            with contextlib.suppress(KeyError):
                self.node_role.remove(namespace, cluster, pod, role.value)


_by_registry: weakref.WeakKeyDictionary[CollectorRegistry, ClusterMetrics] = weakref.WeakKeyDictionary()


def cluster_metrics(registry: CollectorRegistry) -> ClusterMetrics:
    """The cluster metric families of registry, created on first use (a family registers once)."""
    metrics = _by_registry.get(registry)
    if metrics is None:
        metrics = _by_registry[registry] = ClusterMetrics(registry)
    return metrics
