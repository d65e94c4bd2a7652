"""Which pods the client Service hands out (membership.py): members that serve, and no other.

Pure: simulated worlds through the planner harness, whose `check_members`
also checks every pass of every other planner test (only serving nodes get
the label, a pod loses it before it is deleted, an Active cluster has it on
every live pod).
"""

from __future__ import annotations

import attrs
from planner_harness import Run, run
from simulate import SimSettings
from test_plan_rollout import desired, roll

from controllers.cluster.decision import membership
from controllers.cluster.decision.actions import DeletePod, MarkMember
from controllers.cluster.decision.plan import plan
from controllers.cluster.decision.view import View
from controllers.shared.observation import Observation
from valkey_operator.api.cluster import ClusterState

ACTIVE = ClusterState.ACTIVE


def quiet_world(shards: int, replicas: int, world: SimSettings | None = None) -> Run:
    result = run(
        desired(shards, replicas),
        settings=world,
        until=lambda planned: planned.status.state is ACTIVE and not planned.actions,
    )
    assert result.last.status.state is ACTIVE and result.last.actions == ()
    return result


def marks(observation: Observation, result: Run) -> dict[str, bool]:
    planned = plan(observation, result.desired, result.sim.context())
    return {action.pod: action.member for action in planned.actions if isinstance(action, MarkMember)}


def test_a_formed_cluster_hands_out_every_pod_and_then_plans_nothing() -> None:
    result = quiet_world(2, 1)
    assert all(pod.member for pod in result.sim.pods.values())


def test_a_replica_is_handed_out_only_once_in_sync_with_a_serving_primary() -> None:
    result = run(
        desired(1, 1),
        settings=SimSettings(sync_delay=3),
        until=lambda planned: planned.status.state is ACTIVE,
    )
    labelled_at = {}
    for index, planned in enumerate(result.plans):
        for action in planned.actions:
            if isinstance(action, MarkMember) and action.member:
                labelled_at[action.pod] = index
    primary, replica = sorted(result.sim.pods, key=lambda pod: result.sim.pods[pod].seq)
    assert labelled_at[primary] < labelled_at[replica] == len(result.plans) - 2  # then Active


def test_cluster_state_fail_takes_a_node_from_clients() -> None:
    result = quiet_world(1, 1)
    observation = result.sim.observe()
    pod = sorted(observation.nodes)[0]
    failing = attrs.evolve(
        observation, nodes={**observation.nodes, pod: attrs.evolve(observation.nodes[pod], cluster_ok=False)}
    )
    assert marks(failing, result) == {pod: False}


def test_a_node_the_pass_could_not_ask_keeps_what_it_has() -> None:
    result = quiet_world(1, 1)
    observation = result.sim.observe()
    pod = sorted(observation.nodes)[0]
    silent = attrs.evolve(
        observation, nodes={name: node for name, node in observation.nodes.items() if name != pod}
    )
    assert pod not in marks(silent, result)
    unknown = attrs.evolve(
        observation, nodes={**observation.nodes, pod: attrs.evolve(observation.nodes[pod], cluster_ok=None)}
    )
    assert pod not in marks(unknown, result)


def test_a_pod_leaves_the_client_service_before_the_pass_deletes_it() -> None:
    result = roll(quiet_world(1, 1))
    assert result.last.status.state is ACTIVE
    deleting = [planned for planned in result.plans if any(isinstance(a, DeletePod) for a in planned.actions)]
    assert deleting
    for planned in deleting:
        for index, action in enumerate(planned.actions):
            if isinstance(action, DeletePod):
                assert MarkMember(action.pod, action.uid, member=False) in planned.actions[:index], (
                    planned.actions
                )


def test_an_empty_primary_is_not_a_serving_member() -> None:
    result = quiet_world(1, 1)
    observation = result.sim.observe()
    view = View(observation, result.desired, result.sim.context())
    primary = next(node for node in view.members.values() if node.is_primary)
    emptied = attrs.evolve(
        observation, nodes={**observation.nodes, primary.pod.name: attrs.evolve(primary.obs, slots=())}
    )
    emptied_view = View(emptied, result.desired, result.sim.context())
    assert membership.serving(emptied_view, emptied_view.members[primary.pod.name]) is False
