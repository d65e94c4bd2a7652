"""Operator metrics of the cluster reconciler: clusters by state, rejections, per-node gauges."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from controllers.cluster.decision.decide import MetricChanges
from controllers.cluster.decision.migration_counts import migration_counts
from controllers.cluster.metrics import cluster_metrics
from controllers.shared.observation import NodeObservation, Observation
from controllers.shared.probe import NodeExtras
from controllers.shared.tls import Certificate
from valkey_operator.api.cluster import ClusterState, NodeRole
from valkey_operator.valkey.replies import MigrationOperation, SlotMigration
from valkey_operator.valkey.slots import SlotRange


def test_clusters_are_counted_once_in_their_last_state() -> None:
    registry = CollectorRegistry()
    metrics = cluster_metrics(registry)
    assert cluster_metrics(registry) is metrics, "one set of families per registry"
    metrics.record_state("ns", "a", ClusterState.CREATING)
    metrics.record_state("ns", "b", ClusterState.CREATING)
    metrics.record_state("ns", "a", ClusterState.ACTIVE)
    value = registry.get_sample_value
    assert value("valkey_operator_clusters", {"state": "Active"}) == 1
    assert value("valkey_operator_clusters", {"state": "Creating"}) == 1
    metrics.forget_cluster("ns", "b")
    assert value("valkey_operator_clusters", {"state": "Creating"}) == 0
    metrics.record_rejection("ns", "a")
    assert value("valkey_operator_version_floor_rejections_total", {"namespace": "ns", "cluster": "a"}) == 1


def test_a_new_clusters_counters_start_at_zero_and_its_state_is_named() -> None:
    """A counter series born at 1 hides the first event from increase(); alerts name the cluster."""
    registry = CollectorRegistry()
    metrics = cluster_metrics(registry)
    metrics.record_state("ns", "a", ClusterState.CREATING)
    labels = {"namespace": "ns", "cluster": "a"}
    value = registry.get_sample_value
    for family in ("rollouts_failed", "slot_migration_failures", "failover_timeouts", "rollouts_started"):
        assert value(f"valkey_operator_{family}_total", labels) == 0, family
    assert value("valkey_operator_failovers_total", {**labels, "mode": "takeover"}) == 0
    metrics.record_state("ns", "a", ClusterState.FAILED)
    assert value("valkey_operator_cluster_state", {**labels, "state": "Failed"}) == 1
    assert value("valkey_operator_cluster_state", {**labels, "state": "Creating"}) == 0
    metrics.forget_cluster("ns", "a")
    assert value("valkey_operator_cluster_state", {**labels, "state": "Failed"}) is None
    assert value("valkey_operator_rollouts_failed_total", labels) is None


def test_node_gauges_follow_the_observation_and_drop_departed_pods() -> None:
    registry = CollectorRegistry()
    metrics = cluster_metrics(registry)
    primary = NodeObservation(
        reachable=True, node_id="p", role=NodeRole.PRIMARY, repl_offset=1000, cluster_ok=True,
        slots=(SlotRange(0, 16383),),
        served=Certificate(fingerprint="f", serial="S", not_after=2_000_000_000.0),
    )  # fmt: skip
    replica = NodeObservation(
        reachable=True, node_id="r", role=NodeRole.REPLICA, primary_id="p", repl_offset=900, cluster_ok=False
    )
    observation = Observation(pods=(), nodes={"c-0-a": primary, "c-0-b": replica})
    metrics.record_nodes("ns", "c", observation, {"c-0-a": NodeExtras(used_memory=123)}, 1_999_999_000.0)
    value = registry.get_sample_value
    labels = {"namespace": "ns", "cluster": "c"}
    assert value("valkey_node_role", {**labels, "pod": "c-0-a", "role": "primary"}) == 1
    assert value("valkey_node_role", {**labels, "pod": "c-0-b", "role": "replica"}) == 1
    assert value("valkey_node_replication_lag_bytes", {**labels, "pod": "c-0-b"}) == 100
    assert value("valkey_node_cluster_state_ok", {**labels, "pod": "c-0-b"}) == 0
    assert value("valkey_node_used_memory_bytes", {**labels, "pod": "c-0-a"}) == 123
    # counted from the pass's time, which the caller passes (an Observation carries no clock)
    assert value("valkey_node_tls_certificate_expiry_seconds", {**labels, "pod": "c-0-a"}) == 1000.0
    metrics.record_nodes("ns", "c", Observation(pods=(), nodes={"c-0-a": primary}), {}, 0.0)
    assert value("valkey_node_role", {**labels, "pod": "c-0-b", "role": "replica"}) is None


def _job(name: str, state: str, operation: MigrationOperation = MigrationOperation.EXPORT) -> SlotMigration:
    return SlotMigration(
        name=name, operation=operation, slots=(SlotRange(0, 9),), source_id="s", target_id="t", state=state
    )


def test_each_failed_migration_job_is_counted_once_and_active_jobs_are_a_gauge() -> None:
    registry = CollectorRegistry()
    metrics = cluster_metrics(registry)
    value = registry.get_sample_value
    labels = {"namespace": "ns", "cluster": "c"}

    seen: list[frozenset[str]] = [frozenset()]

    def observe(*jobs: SlotMigration) -> None:
        """One pass: decide's counts (the failed jobs carried in Memory), applied to the metrics."""
        node = NodeObservation(reachable=True, node_id="s", migrations=jobs)
        counted = migration_counts(Observation(pods=(), nodes={"c-0-a": node}), seen[0])
        seen[0] = counted.failed
        changes = MetricChanges(migration_failures=counted.new_failures, migrations_active=counted.active)
        metrics.apply("ns", "c", changes)

    observe(_job("a", "snapshotting"), _job("a", "receiving-snapshot", MigrationOperation.IMPORT))
    assert value("valkey_operator_slot_migrations_active", labels) == 1
    assert value("valkey_operator_slot_migration_failures_total", labels) is None
    observe(_job("a", "failed"), _job("b", "cancelled"))
    observe(_job("a", "failed"), _job("b", "cancelled"), _job("c", "success"))  # the next pass: same log
    assert value("valkey_operator_slot_migration_failures_total", labels) == 2
    assert value("valkey_operator_slot_migrations_active", labels) == 0
    metrics.forget_cluster("ns", "c")
    assert value("valkey_operator_slot_migrations_active", labels) is None
