"""valkey_operator_cluster_stalled{namespace,cluster,reason}: one series per Stalled cluster, naming
its reason, gone once it is no longer Stalled or is deleted (pure: decide() and the metric families,
no server). The alert ValkeyClusterStalled reads it (tests/prometheus/alerts_test.yaml)."""

from __future__ import annotations

from decide_harness import NAME, NAMESPACE, World, run, step, world
from prometheus_client import CollectorRegistry
from simulate import SimSettings

from controllers.cluster.decision import stalled
from controllers.cluster.decision.actions import ApplyObject, CreateObject
from controllers.cluster.decision.decide import Decision, MetricChanges, stalled_reason
from controllers.cluster.decision.report import Reason
from controllers.cluster.metrics import ClusterMetrics, cluster_metrics
from controllers.shared.versions import VERSION_FLOOR
from valkey_operator.api.cluster import ClusterState
from valkey_operator.core.conditions import find_condition

FAMILY = "valkey_operator_cluster_stalled"


def stalled_series(registry: CollectorRegistry) -> dict[tuple[str, str], list[tuple[str, float]]]:
    """(namespace, cluster) -> [(reason, value)] of every exported stalled series."""
    found: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for family in registry.collect():
        for sample in family.samples:
            if sample.name == FAMILY:
                labels = sample.labels
                found.setdefault((labels["namespace"], labels["cluster"]), []).append(
                    (labels["reason"], sample.value)
                )
    return found


def test_one_series_per_stalled_cluster_follows_its_reason_and_goes_when_it_is_not_stalled() -> None:
    registry = CollectorRegistry()
    metrics = cluster_metrics(registry)
    assert stalled_series(registry) == {}, "no series before any cluster is Stalled"
    metrics.record_stalled("shop", "cache", stalled.RESTORE_IMAGE_UNKNOWN)
    metrics.record_stalled("shop", "cache", stalled.RESTORE_IMAGE_UNKNOWN)  # the next pass: unchanged
    metrics.record_stalled("shop", "sessions", stalled.FORBIDDEN)
    metrics.record_stalled("shop", "other", None)  # never Stalled: no series at all
    assert stalled_series(registry) == {
        ("shop", "cache"): [(stalled.RESTORE_IMAGE_UNKNOWN, 1.0)],
        ("shop", "sessions"): [(stalled.FORBIDDEN, 1.0)],
    }
    # Another reason replaces the first: still one series for the cluster.
    metrics.record_stalled("shop", "cache", stalled.IMAGE_PULL_FAILED)
    assert stalled_series(registry)[("shop", "cache")] == [(stalled.IMAGE_PULL_FAILED, 1.0)]
    # No longer Stalled: its series is gone, the other cluster's stays.
    metrics.record_stalled("shop", "cache", None)
    assert stalled_series(registry) == {("shop", "sessions"): [(stalled.FORBIDDEN, 1.0)]}
    # Stalled again later: a new series.
    metrics.record_stalled("shop", "cache", stalled.NAME_CONFLICT)
    assert stalled_series(registry)[("shop", "cache")] == [(stalled.NAME_CONFLICT, 1.0)]


def test_a_deleted_cluster_leaves_no_stalled_series_and_the_same_name_starts_clean() -> None:
    registry = CollectorRegistry()
    metrics = cluster_metrics(registry)
    metrics.record_state("shop", "cache", ClusterState.CREATING)
    metrics.record_stalled("shop", "cache", stalled.BACKUP_FAILED)
    metrics.record_stalled("shop", "kept", stalled.FORBIDDEN)
    metrics.forget_cluster("shop", "cache")
    metrics.forget_cluster("shop", "never-stalled")  # nothing to remove: no error
    assert stalled_series(registry) == {("shop", "kept"): [(stalled.FORBIDDEN, 1.0)]}
    # A new cluster of the same name that is not Stalled: nothing of the old one comes back.
    metrics.record_stalled("shop", "cache", None)
    assert ("shop", "cache") not in stalled_series(registry)


def test_each_pass_s_metric_changes_set_or_clear_the_series() -> None:
    """apply() runs every pass: a pass that stores Stalled=False clears what an earlier one set."""
    registry = CollectorRegistry()
    metrics = ClusterMetrics(registry)
    metrics.apply("shop", "cache", MetricChanges(state=ClusterState.ACTIVE, stalled=stalled.FORBIDDEN))
    assert stalled_series(registry) == {("shop", "cache"): [(stalled.FORBIDDEN, 1.0)]}
    metrics.apply("shop", "cache", MetricChanges(state=ClusterState.ACTIVE))
    assert stalled_series(registry) == {}


def stored_stalled(decision: Decision) -> str | None:
    """The Stalled reason of the status document the reconciler writes."""
    condition = find_condition(decision.status.to_dict().get("conditions"), "Stalled") or {}
    return condition.get("reason") if condition.get("status") == "True" else None


def exported(found: World) -> dict[tuple[str, str], list[tuple[str, float]]]:
    """The stalled series after the world's passes are applied in order, as the reconciler does."""
    registry = CollectorRegistry()
    metrics = ClusterMetrics(registry)
    for decision in found.decisions:
        metrics.apply(NAMESPACE, NAME, decision.metrics)
    return stalled_series(registry)


def test_every_pass_reports_the_stalled_reason_its_status_stores() -> None:
    """The metric is the Stalled condition each pass stores: an RBAC refusal found by acting (the
    decision after the failures), then lifted; a name conflict that blocks; a new cluster Failed."""
    found = run(world(1, 0))
    assert found.state == ClusterState.ACTIVE.value
    found.sim.objects = {k: v for k, v in found.sim.objects.items() if not k.startswith("Service")}
    refused = step(found, forbidden=lambda action: isinstance(action, CreateObject | ApplyObject))
    assert refused.metrics.stalled == stalled.FORBIDDEN
    assert exported(found) == {(NAMESPACE, NAME): [(stalled.FORBIDDEN, 1.0)]}
    run(found, passes=20)  # RBAC granted: the next passes re-create the Services
    assert found.last.metrics.stalled is None
    assert exported(found) == {}

    conflicted = world(1, 0)
    conflicted.sim.objects[f"Service/{NAME}-client"] = {
        "metadata": {"name": f"{NAME}-client", "namespace": NAMESPACE, "ownerReferences": []}
    }
    assert step(conflicted).metrics.stalled == stalled.NAME_CONFLICT

    old = (VERSION_FLOOR[0] - 1, 0, 0)
    failed = world(1, 0, SimSettings(cluster=NAME, version_overrides={0: old}))
    run(failed, passes=15, until=lambda w: w.state == ClusterState.FAILED.value)
    assert failed.state == ClusterState.FAILED.value, failed.status.get("message")
    assert failed.last.metrics.stalled == Reason.VERSION_BELOW_FLOOR

    for each in (found, conflicted, failed):
        for decision in each.decisions:
            assert decision.metrics.stalled == stalled_reason(decision.status) == stored_stalled(decision)
