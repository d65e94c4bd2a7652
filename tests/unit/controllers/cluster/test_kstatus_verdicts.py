"""What kstatus (the real sigs.k8s.io/cli-utils library, testing/kstatus) says about the status
documents the planner writes, pass by pass (SPEC 1.8): Current while every slot is served, a roll
and a scale included; InProgress while a new cluster forms; Failed only when clients are affected.

The e2e module tests/e2e/test_cluster_kstatus.py asks the same of live objects on the test bed.
"""

from __future__ import annotations

from collections import Counter

import attrs
from planner_harness import Chaos, Run, one_pass, run
from simulate import SimSettings
from status_support import blocked_document, planned_document

from controllers.cluster.decision.desired import Desired
from controllers.cluster.decision.plan import Plan
from controllers.config.reconciler import desired_status as config_status
from controllers.role import desired_status as role_status
from controllers.shared.config_resolve import resolve
from valkey_operator.api.cluster import ClusterState
from valkey_operator.core.rest import Obj
from valkey_testbed.kstatus import compute, status_of

GENERATION = 4
NOW = "2026-12-02T00:00:00Z"


def desired(shards: int, replicas: int, template: str = "t1") -> Desired:
    return Desired(
        shards=shards,
        replicas_per_shard=replicas,
        template_hash=template,
        image="valkey/valkey:9.1.0",
        config_hash=template,
    )


def cluster(status: Obj, generation: int = GENERATION) -> Obj:
    return {
        "apiVersion": "valkey.gomomento.com/v1alpha1",
        "kind": "ValkeyCluster",
        "metadata": {"name": "c", "namespace": "ns", "generation": generation},
        "status": status,
    }


def written(plans: list[Plan]) -> list[Obj]:
    """The status documents the reconciler stores for these passes, one after the other."""
    stored: Obj = {}
    documents = []
    for planned in plans:
        stored = planned_document(stored, GENERATION, planned.status, "c.ns.svc.cluster.local:6379", NOW)
        documents.append(cluster(stored))
    return documents


def verdicts(plans: list[Plan]) -> Counter[str]:
    return Counter(verdict.status for verdict in compute(written(plans)))


def go_on(result: Run, wanted: Desired, passes: int = 200) -> list[Plan]:
    """Reconcile toward wanted until Active again; the passes since the edit."""
    start = result.passes
    for index in range(start, start + passes):
        one_pass(result, index, Chaos(edits={start: wanted}))
        if index > start and result.last.status.state is ClusterState.ACTIVE:
            break
    assert result.last.status.state is ClusterState.ACTIVE, result.last.status.message
    return result.plans[start:]


def test_a_new_cluster_is_in_progress_until_active_then_current() -> None:
    result = run(desired(3, 1))
    assert result.last.status.state is ClusterState.ACTIVE
    found = [verdict.status for verdict in compute(written(result.plans))]
    assert found[-1] == "Current"
    assert set(found[:-1]) == {"InProgress"}, found


def test_a_roll_and_a_scale_stay_current_throughout() -> None:
    result = run(desired(3, 1))
    rolled = go_on(result, desired(3, 1, template="t2"))
    assert {plan.status.state for plan in rolled[:-1]} == {ClusterState.UPDATING}
    assert verdicts(rolled) == {"Current": len(rolled)}
    scaled = go_on(result, attrs.evolve(result.desired, shards=4))
    assert {plan.status.state for plan in scaled[:-1]} == {ClusterState.UPDATING}
    assert verdicts(scaled) == {"Current": len(scaled)}


def test_an_unobserved_generation_is_in_progress() -> None:
    result = run(desired(1, 0))
    status = planned_document({}, GENERATION, result.last.status, "e", NOW)
    assert status_of(cluster(status, generation=GENERATION + 1)).status == "InProgress"
    assert all(condition["observedGeneration"] == GENERATION for condition in status["conditions"])


def test_a_binary_below_the_floor_fails_a_new_cluster_but_not_a_serving_one() -> None:
    new = run(desired(1, 1), settings=SimSettings(versions={"t1": (9, 0, 0)}), max_passes=6)
    assert new.last.status.state is ClusterState.FAILED
    assert status_of(written(new.plans)[-1]).status == "Failed"

    serving = run(desired(2, 1), settings=SimSettings(versions={"t2": (9, 0, 0)}))
    start = serving.passes
    for index in range(start, start + 20):
        one_pass(serving, index, Chaos(edits={start: desired(2, 1, template="t2")}))
    rolled = serving.plans[start:]
    assert "below the supported version floor" in rolled[-1].status.message
    assert verdicts(rolled) == {"Current": len(rolled)}


def test_a_blocked_cluster_is_current_while_it_serves_and_in_progress_before() -> None:
    result = run(desired(1, 0))
    serving = written(result.plans)[-1]["status"]
    blocked = blocked_document(serving, GENERATION + 1, "ConfigNotFound", "no ValkeyConfig x", "e", NOW)
    assert status_of(cluster(blocked, generation=GENERATION + 1)).status == "Current"
    never = blocked_document({}, 1, "ConfigNotFound", "no ValkeyConfig x", "e", NOW)
    assert status_of(cluster(never, generation=1)).status == "InProgress"


def test_configs_are_in_progress_until_their_chain_resolves_and_roles_are_current() -> None:
    config = {"kind": "ValkeyConfig", "metadata": {"name": "cfg", "generation": 2}, "spec": {"baseRef": "b"}}
    missing = config_status(config, resolve("cfg", {"cfg": config}.get, {}.get))
    assert isinstance(missing, dict) and missing["conditions"][0]["reason"] == "BaseNotFound"
    assert status_of({**config, "status": missing}).status == "InProgress"
    role = {"kind": "ValkeyRole", "metadata": {"name": "r", "generation": 2}, "spec": {"categories": []}}
    assert status_of({**role, "status": role_status(role, [])}).status == "Current"
    # A ValkeyImage has a status subresource with no fields (SPEC 1.1): nothing to wait for.
    assert status_of({"kind": "ValkeyImage", "metadata": {"name": "i", "generation": 1}}).status == "Current"
