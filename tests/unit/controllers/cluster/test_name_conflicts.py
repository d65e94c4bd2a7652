"""An object of one of the cluster's names that someone else controls is never taken over (pure).

decide() blocks the cluster with NameConflict (Stalled) and plans no action while such an object
is there; once it is gone, or handed over (this ValkeyCluster its controller), the next pass goes
on. The reconciler gathers `Facts.named` from its informer caches (test_name_conflicts_server.py
proves it on the API server)."""

from __future__ import annotations

from decide_harness import NAME, NAMESPACE, gather, run, world

from controllers.cluster.decision import stalled
from controllers.cluster.decision.conflicts import Conflict, conflict_message, conflicts, controller_of
from controllers.cluster.decision.decide import NAME_CONFLICT, decide
from controllers.cluster.decision.owned import owned_names, written_names
from controllers.shared import names
from valkey_operator.api.cluster import ValkeyCluster
from valkey_operator.api.meta import find_condition
from valkey_operator.core.rest import Obj

NOW = 1_800_000_000.0
UID = "0b7e1c55-0000-4000-8000-000000000001"


def obj(name: str, *owners: Obj) -> Obj:
    return {"metadata": {"name": name, "namespace": NAMESPACE, "ownerReferences": list(owners)}}


def ref(uid: str, name: str = NAME, controller: bool = True, kind: str = "ValkeyCluster") -> Obj:
    return {"apiVersion": "v1", "kind": kind, "name": name, "uid": uid, "controller": controller}


def test_only_objects_controlled_by_this_uid_are_ours() -> None:
    named = {
        "Service/vk": obj("vk", ref(UID)),
        "Service/vk-client": obj("vk-client"),
        "ConfigMap/vk-config": obj("vk-config", ref("other", "vk-config-owner", kind="Deployment")),
        "PodDisruptionBudget/vk-0": obj("vk-0", ref(UID, controller=False)),
        "Secret/vk-internal": None,
    }
    found = conflicts(UID, named)
    assert found == (
        Conflict("ConfigMap/vk-config", "Deployment/vk-config-owner (uid other)"),
        Conflict("PodDisruptionBudget/vk-0", None),
        Conflict("Service/vk-client", None),
    )
    message = conflict_message(found)
    assert "ConfigMap/vk-config exists and is controlled by Deployment/vk-config-owner (uid other)" in message
    assert "Service/vk-client exists with no controller" in message
    assert conflicts("", {"Service/vk": obj("vk", ref(""))}) == (
        Conflict("Service/vk", "ValkeyCluster/vk (uid )"),
    )
    assert controller_of(obj("x", ref("a", controller=False), ref("b"))) == ref("b")


def test_an_earlier_incarnation_of_the_same_name_is_a_conflict_too() -> None:
    found = conflicts(UID, {"Service/vk": obj("vk", ref("earlier"))})
    assert found == (Conflict("Service/vk", "ValkeyCluster/vk (uid earlier)"),)


def test_the_names_checked_are_every_name_the_cluster_writes() -> None:
    spec = {
        "acl": [
            {"username": "gen"},
            {"username": "hashed", "passwordHashes": ["a" * 64]},
            {"username": "own", "passwordSecretName": "theirs"},
        ]
    }
    cluster = ValkeyCluster.from_dict(world(2, 0, **spec).cluster)
    written = {f"{resource.kind}/{name}" for resource, name in written_names(cluster)}
    assert written == {f"{resource.kind}/{name}" for resource, name in owned_names(cluster)} | {
        "Secret/vk-gen"
    }
    assert written >= {"Service/vk", "Service/vk-client", "ConfigMap/vk-config", "Secret/vk-internal"}
    assert {"PodDisruptionBudget/vk-0", "PodDisruptionBudget/vk-1"} <= written


def test_a_foreign_object_blocks_the_cluster_stalled_and_nothing_is_written() -> None:
    found = world(1, 0)
    foreign = obj(names.client_service_name(NAME))
    found.sim.objects["Service/vk-client"] = foreign
    decision = decide(gather(found), NOW)
    assert decision.actions == ()
    stalled_condition = find_condition(decision.status.conditions, "Stalled")
    assert stalled_condition is not None and stalled_condition.status == "True"
    assert stalled_condition.reason == NAME_CONFLICT
    assert stalled_condition.message.startswith("Service/vk-client exists with no controller")
    assert stalled_condition.message.endswith(stalled.BLOCKED[NAME_CONFLICT])
    assert [event.reason for event in decision.events] == [NAME_CONFLICT]
    assert found.sim.objects["Service/vk-client"] is foreign


def test_once_the_object_is_gone_or_handed_over_the_cluster_goes_on() -> None:
    for hand_over in (False, True):
        found = world(1, 0)
        found.sim.objects["ConfigMap/vk-config"] = obj("vk-config", ref("someone", "x", kind="Thing"))
        assert decide(gather(found), NOW).actions == ()
        if hand_over:
            found.sim.objects["ConfigMap/vk-config"] = obj("vk-config", ref(UID))
        else:
            del found.sim.objects["ConfigMap/vk-config"]
        assert decide(gather(found), NOW).actions != ()
        run(found)
        assert found.state == "Active"


def test_a_running_cluster_is_not_in_conflict_with_its_own_objects() -> None:
    found = run(world(3, 1))
    assert found.state == "Active"
    facts = gather(found)
    assert facts.named and all(value is not None for value in facts.named.values())
    assert conflicts(UID, facts.named) == ()


def test_the_clusters_an_object_name_may_belong_to() -> None:
    assert names.cluster_candidates("a-b-client") == ["a-b-client", "a", "a-b"]
    assert names.cluster_candidates("vk") == ["vk"]
    assert names.cluster_candidates("-x") == ["-x"]
