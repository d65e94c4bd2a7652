"""In-place resize in the planner: a pod that differs from the template only in its resources is
resized through pods/resize, maxmemory following in the safe order, and anything else rolls.

A settled 2x1 cluster from the simulator, whose pods are then dressed as the API server would show
them (shape label, the Valkey container's resources asked, allocated and running, the kubelet's
resize conditions) and whose nodes report the maxmemory they run; the planner is asked what it does
next. The kubelet's side of a resize is not simulated: the e2e test covers it.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
from planner_harness import run
from simulate import SimulatedCluster

from controllers.cluster.decision.actions import (
    DeletePod,
    Failure,
    NewPod,
    PatchPodMetadata,
    ResizePod,
    SetConfig,
    skipped,
)
from controllers.cluster.decision.decide import resize_events
from controllers.cluster.decision.desired import Desired
from controllers.cluster.decision.plan import Plan, plan
from controllers.cluster.decision.report import Reason
from controllers.cluster.decision.resize import (
    REFUSED_ANNOTATION,
    STUCK_LIMIT_S,
    Stage,
    node_maxmemory,
    stage,
)
from controllers.cluster.render.config import maxmemory_of
from controllers.shared.names import SHAPE_HASH_LABEL, TEMPLATE_HASH_LABEL
from controllers.shared.observation import (
    ContainerResources,
    Observation,
    PodObservation,
    PodResources,
)
from valkey_operator.api.cluster import ClusterState, NodeRole
from valkey_operator.api.quantity import quantity_bytes

IMAGE = "valkey/valkey:9.1.0"
SHAPE = "shape-1"
MI = 1 << 20


def resources(memory: str, cpu: str = "500m") -> ContainerResources:
    return ContainerResources(requests={"cpu": cpu, "memory": memory}, limits={"memory": memory})


def maxmemory(memory: str) -> str:
    return str(maxmemory_of(quantity_bytes(memory)))


def wanted(memory: str, template: str, *, derived: bool = True) -> Desired:
    runtime = {"maxmemory": maxmemory(memory)} if derived else {"maxmemory": "100mb"}
    return Desired(
        shards=2,
        replicas_per_shard=1,
        template_hash=template,
        image=IMAGE,
        config_hash=template,
        shape_hash=SHAPE,
        resources=resources(memory),
        maxmemory_derived=derived,
        runtime=runtime,
    )


def settled(memory: str = "256Mi") -> SimulatedCluster:
    """An Active 2x1 cluster on template t1 with `memory`, with nothing left to do."""
    result = run(
        wanted(memory, "t1"),
        until=lambda planned: planned.status.state is ClusterState.ACTIVE and not planned.actions,
    )
    assert result.last.status.state is ClusterState.ACTIVE and not result.last.actions
    return result.sim


@attrs.frozen(kw_only=True)
class Dress:
    """How one pod looks to the API server."""

    running: str
    """The memory its container runs with (allocated and running)."""
    asked: str | None = None
    """The memory its spec asks for (default: what it runs with)."""
    template: str = "t1"
    shape: str | None = SHAPE
    pending: str | None = None
    pending_since: float | None = None
    in_progress: bool = False
    generation: int = 1
    observed: int | None = 1


def dressed(pod: PodObservation, dress: Dress) -> PodObservation:
    run_as = resources(dress.running)
    return attrs.evolve(
        pod,
        template_hash=dress.template,
        shape_hash=dress.shape,
        resources=PodResources(
            asked=resources(dress.asked or dress.running),
            allocated=dict(run_as.requests),
            running=run_as,
            generation=dress.generation,
            observed_generation=dress.observed,
            pending=dress.pending,
            pending_generation=dress.generation if dress.pending else None,
            pending_since=dress.pending_since,
            in_progress=dress.in_progress,
        ),
    )


def world(
    sim: SimulatedCluster,
    dresses: Mapping[str, Dress] | Dress,
    maxmemories: Mapping[str, str] | str,
) -> Observation:
    """The simulator's observation with every pod dressed (one Dress for all, or per pod name) and
    each node reporting the maxmemory given (one for all, or per pod name)."""
    observation = sim.observe()
    pods = tuple(
        dressed(pod, dresses if isinstance(dresses, Dress) else dresses.get(pod.name, Dress(running="256Mi")))
        for pod in observation.pods
    )
    nodes = {}
    for name, node in observation.nodes.items():
        value = maxmemories if isinstance(maxmemories, str) else maxmemories[name]
        nodes[name] = attrs.evolve(node, config={**(node.config or {}), "maxmemory": value})
    return attrs.evolve(observation, pods=pods, nodes=nodes)


def decided(sim: SimulatedCluster, observation: Observation, desired: Desired) -> Plan:
    return plan(observation, desired, sim.context(recorded_state=ClusterState.ACTIVE))


def of(planned: Plan, kind: type) -> list:  # type: ignore[type-arg]
    return [action for action in planned.actions if isinstance(action, kind)]


def maxmemory_sets(planned: Plan) -> dict[str, str]:
    return {
        action.node: dict(action.settings)["maxmemory"]
        for action in of(planned, SetConfig)
        if "maxmemory" in dict(action.settings)
    }


def primaries(sim: SimulatedCluster, observation: Observation) -> set[str]:
    return {name for name, node in observation.nodes.items() if node.role is NodeRole.PRIMARY}


def test_an_unchanged_cluster_with_shape_labels_does_nothing() -> None:
    sim = settled()
    observation = world(sim, Dress(running="256Mi"), maxmemory("256Mi"))
    planned = decided(sim, observation, wanted("256Mi", "t1"))
    assert planned.actions == ()
    assert planned.status.state is ClusterState.ACTIVE


def test_a_grow_resizes_one_replica_first_and_leaves_maxmemory_until_the_kubelet_reports() -> None:
    sim = settled()
    observation = world(sim, Dress(running="256Mi"), maxmemory("256Mi"))
    planned = decided(sim, observation, wanted("512Mi", "t2"))
    steps = of(planned, ResizePod)
    assert len(steps) == 1
    assert steps[0].resources == resources("512Mi")
    assert steps[0].pod not in primaries(sim, observation)  # replicas first
    assert min(pod.shard for pod in observation.pods if pod.name == steps[0].pod) == 0  # lowest shard
    assert maxmemory_sets(planned) == {}  # no node runs more memory yet: maxmemory stays
    assert not of(planned, NewPod) and not of(planned, DeletePod)  # nothing replaced, no surge
    assert planned.status.state is ClusterState.UPDATING
    assert any(finding.reason is Reason.UPDATE_PENDING for finding in planned.status.findings)


def test_a_grow_raises_maxmemory_only_after_the_new_limit_runs_and_then_labels_the_pod() -> None:
    sim = settled()
    target = next(pod.name for pod in sim.observe().pods if pod.shard == 0)
    asked = {target: Dress(running="256Mi", asked="512Mi", in_progress=True, generation=2, observed=2)}
    observation = world(sim, asked, maxmemory("256Mi"))
    planned = decided(sim, observation, wanted("512Mi", "t2"))
    assert maxmemory_sets(planned) == {}
    assert not of(planned, ResizePod)  # one resize at a time: this one is being applied
    assert not of(planned, PatchPodMetadata) or all(
        not action.labels for action in of(planned, PatchPodMetadata)
    )

    ran = {target: Dress(running="512Mi", generation=2, observed=2)}
    observation = world(sim, ran, maxmemory("256Mi"))
    planned = decided(sim, observation, wanted("512Mi", "t2"))
    assert maxmemory_sets(planned) == {target: maxmemory("512Mi")}  # raised only on the grown node
    assert not [action for action in of(planned, PatchPodMetadata) if action.labels]  # not before it runs

    observation = world(
        sim, ran, {**dict.fromkeys(observation.nodes, maxmemory("256Mi")), target: maxmemory("512Mi")}
    )
    planned = decided(sim, observation, wanted("512Mi", "t2"))
    labelled = [action for action in of(planned, PatchPodMetadata) if action.labels]
    assert [(action.pod, action.labels) for action in labelled] == [(target, ((TEMPLATE_HASH_LABEL, "t2"),))]


def test_a_resize_is_not_reported_before_the_kubelet_observed_the_generation() -> None:
    desired = wanted("512Mi", "t2")
    pod = settled().observe().pods[0]

    def at(dress: Dress) -> Stage | None:
        return stage(dressed(pod, dress), desired, now=1000.0)

    assert at(Dress(running="512Mi", generation=3, observed=2)) is Stage.WAITING  # generation not seen
    assert at(Dress(running="256Mi", asked="512Mi", generation=3, observed=3)) is Stage.WAITING
    assert at(Dress(running="512Mi", pending="Deferred", generation=3, observed=3)) is Stage.WAITING
    assert at(Dress(running="512Mi", in_progress=True, generation=3, observed=3)) is Stage.WAITING
    assert at(Dress(running="512Mi", generation=3, observed=3)) is Stage.REPORTED
    assert at(Dress(running="512Mi", generation=3, observed=None)) is Stage.REPORTED  # none reported
    assert at(Dress(running="256Mi")) is Stage.ASK
    assert at(Dress(running="512Mi", template="t2")) is None  # done


def test_a_shrink_lowers_maxmemory_on_every_node_before_any_pod_is_resized() -> None:
    sim = settled("512Mi")
    observation = world(sim, Dress(running="512Mi"), maxmemory("512Mi"))
    planned = decided(sim, observation, wanted("384Mi", "t2"))
    assert maxmemory_sets(planned) == dict.fromkeys(observation.nodes, maxmemory("384Mi"))
    assert not of(planned, ResizePod)  # memory goes down only once maxmemory is down

    observation = world(sim, Dress(running="512Mi"), maxmemory("384Mi"))
    planned = decided(sim, observation, wanted("384Mi", "t2"))
    assert maxmemory_sets(planned) == {}
    steps = of(planned, ResizePod)
    assert len(steps) == 1 and steps[0].resources == resources("384Mi")
    assert steps[0].pod not in primaries(sim, observation)


def test_the_primary_of_a_shard_is_resized_after_its_replica_and_shards_go_in_order() -> None:
    sim = settled()
    observation = sim.observe()
    order = []
    done: dict[str, Dress] = {}
    for _ in range(4):
        current = world(sim, done, maxmemory("256Mi"))
        steps = of(decided(sim, current, wanted("512Mi", "t2")), ResizePod)
        assert len(steps) == 1
        order.append(steps[0].pod)
        done[steps[0].pod] = Dress(running="512Mi", template="t2")
    shards = {pod.name: pod.shard for pod in observation.pods}
    leaders = primaries(sim, observation)
    assert [shards[name] for name in order] == [0, 0, 1, 1]
    assert [name in leaders for name in order] == [False, True, False, True]


def test_a_pod_without_the_shape_label_is_rolled_not_resized() -> None:
    sim = settled()
    observation = world(sim, Dress(running="256Mi", shape=None), maxmemory("256Mi"))
    planned = decided(sim, observation, wanted("512Mi", "t2"))
    assert not of(planned, ResizePod)
    assert planned.rolling.outdated and planned.rolling.shard == 0
    assert of(planned, NewPod)  # the roll's surge pod


def test_a_pod_of_another_shape_is_rolled() -> None:
    sim = settled()
    observation = world(sim, Dress(running="256Mi", shape="another"), maxmemory("256Mi"))
    planned = decided(sim, observation, wanted("512Mi", "t2"))
    assert not of(planned, ResizePod) and planned.rolling.shard == 0


def test_an_infeasible_resize_falls_back_to_the_roll() -> None:
    sim = settled()
    target = next(pod.name for pod in sim.observe().pods if pod.shard == 0)
    refused = Dress(running="256Mi", asked="512Gi", pending="Infeasible", generation=2, observed=2)
    observation = world(sim, {target: refused}, maxmemory("256Mi"))
    planned = decided(sim, observation, wanted("512Gi", "t2"))
    assert planned.rolling.outdated == (target,)
    assert planned.rolling.shard == 0
    assert target not in planned.rolling.resize.pods
    assert not of(planned, ResizePod)  # the others wait for the roll to end
    assert of(planned, NewPod)


def test_a_resize_that_would_change_the_qos_class_is_rolled() -> None:
    sim = settled()
    observation = world(sim, Dress(running="256Mi"), maxmemory("256Mi"))
    guaranteed = attrs.evolve(
        wanted("512Mi", "t2"),
        resources=ContainerResources(
            requests={"cpu": "1", "memory": "512Mi"}, limits={"cpu": "1", "memory": "512Mi"}
        ),
    )
    planned = decided(sim, observation, guaranteed)
    assert not of(planned, ResizePod) and planned.rolling.shard == 0


def test_an_explicit_maxmemory_is_never_changed_by_a_resize() -> None:
    sim = settled()
    observation = world(sim, Dress(running="256Mi"), str(100 * MI))  # the config's 100mb
    planned = decided(sim, observation, wanted("512Mi", "t2", derived=False))
    assert maxmemory_sets(planned) == {}
    assert len(of(planned, ResizePod)) == 1


def test_no_resize_is_sent_while_the_cluster_is_not_settled() -> None:
    sim = settled()
    observation = world(sim, Dress(running="256Mi"), maxmemory("256Mi"))
    quiet = observation.pods[0].name
    observation = attrs.evolve(observation, nodes={k: v for k, v in observation.nodes.items() if k != quiet})
    planned = decided(sim, observation, wanted("512Mi", "t2"))
    assert not of(planned, ResizePod)


def test_node_maxmemory_follows_the_smaller_of_the_running_and_the_desired_limit() -> None:
    pod = settled().observe().pods[0]
    grow, shrink = wanted("512Mi", "t2"), wanted("384Mi", "t2")
    assert node_maxmemory(dressed(pod, Dress(running="256Mi", asked="512Mi")), grow) == 192 * MI
    assert node_maxmemory(dressed(pod, Dress(running="512Mi")), grow) == 384 * MI
    assert node_maxmemory(dressed(pod, Dress(running="512Mi")), shrink) == 288 * MI
    assert node_maxmemory(pod, grow) == 384 * MI  # nothing reported: the desired value, as before
    assert (
        node_maxmemory(dressed(pod, Dress(running="512Mi")), attrs.evolve(grow, maxmemory_derived=False))
        is None
    )


def test_a_sent_resize_comes_with_a_record_of_its_refusal_that_only_a_refusal_lets_through() -> None:
    sim = settled()
    observation = world(sim, Dress(running="256Mi"), maxmemory("256Mi"))
    planned = decided(sim, observation, wanted("512Mi", "t2"))
    (step,) = of(planned, ResizePod)
    (record,) = [action for action in of(planned, PatchPodMetadata) if action.refused is not None]
    assert record.refused == step and record.annotations == ((REFUSED_ANNOTATION, "t2"),)
    assert planned.actions.index(record) > planned.actions.index(step)
    assert skipped(record, [])  # the resize went through: nothing to record
    assert skipped(record, [Failure(step, "timed out")])  # no answer: tried again next pass
    assert skipped(record, [Failure(step, "conflict", http_status=409)])
    assert skipped(record, [Failure(step, "overloaded", http_status=503)])
    for status in (403, 404, 422):  # no such subresource, a change it does not allow, no permission
        assert not skipped(record, [Failure(step, "refused", http_status=status)])


def test_a_pod_whose_resize_the_api_server_refused_is_rolled() -> None:
    sim = settled()
    target = next(pod.name for pod in sim.observe().pods if pod.shard == 0)
    observation = world(sim, Dress(running="256Mi"), maxmemory("256Mi"))
    observation = attrs.evolve(
        observation,
        pods=tuple(
            attrs.evolve(pod, annotations={REFUSED_ANNOTATION: "t2"}) if pod.name == target else pod
            for pod in observation.pods
        ),
    )
    planned = decided(sim, observation, wanted("512Mi", "t2"))
    assert planned.rolling.outdated == (target,) and planned.rolling.shard == 0
    assert not of(planned, ResizePod)
    # A refusal of an earlier resize (another template) does not keep a later one from going in place.
    later = decided(sim, observation, wanted("384Mi", "t3"))
    assert not later.rolling.outdated


def test_a_resize_deferred_too_long_falls_back_to_the_roll() -> None:
    sim = settled()
    target = next(pod.name for pod in sim.observe().pods if pod.shard == 1)
    since = sim.now - STUCK_LIMIT_S + 10
    deferred = Dress(running="256Mi", asked="512Mi", pending="Deferred", pending_since=since, generation=2)
    dresses = {target: deferred}
    planned = decided(sim, world(sim, dresses, maxmemory("256Mi")), wanted("512Mi", "t2"))
    assert not planned.rolling.outdated and target in planned.rolling.resize.pods
    assert not of(planned, ResizePod)  # the deferred one holds the others

    sim.tick += 20  # deferred for longer than the limit: its node has had no room for that long
    planned = decided(sim, world(sim, dresses, maxmemory("256Mi")), wanted("512Mi", "t2"))
    assert planned.rolling.outdated == (target,) and planned.rolling.shard == 1
    assert target not in planned.rolling.resize.pods


def test_pods_of_the_current_template_made_without_a_shape_label_get_one_and_nothing_else() -> None:
    sim = settled()
    observation = world(sim, Dress(running="256Mi", shape=None), maxmemory("256Mi"))
    planned = decided(sim, observation, wanted("256Mi", "t1"))
    adopted = {action.pod: action.labels for action in of(planned, PatchPodMetadata)}
    assert adopted == dict.fromkeys((pod.name for pod in observation.pods), ((SHAPE_HASH_LABEL, SHAPE),))
    assert {type(action) for action in planned.actions} == {PatchPodMetadata}  # nothing rolls or resizes
    assert planned.status.state is ClusterState.ACTIVE


def test_each_resize_sent_is_a_normal_event_and_a_failed_one_is_not() -> None:
    step = ResizePod("vk-0-00001", "uid", resources("512Mi"))
    other = ResizePod("vk-1-00002", "uid", resources("512Mi"))
    assert len({step, other}) == 2  # actions are hashable, resources and all
    events = list(resize_events([step, other], [Failure(other, "refused", http_status=422)]))
    assert [(event.type, event.reason) for event in events] == [("Normal", "PodResizing")]
    assert events[0].message == (
        "resizing pod vk-0-00001 in place: request cpu 500m, request memory 512Mi, limit memory 512Mi"
    )


def test_a_resize_the_kubelet_fails_to_carry_out_for_too_long_falls_back_to_the_roll() -> None:
    sim = settled("512Mi")
    target = next(pod.name for pod in sim.observe().pods if pod.shard == 0)
    observation = world(sim, Dress(running="512Mi"), maxmemory("384Mi"))
    failing = next(pod for pod in observation.pods if pod.name == target)
    stuck = attrs.evolve(
        failing.resources,
        asked=resources("384Mi"),
        generation=2,
        observed_generation=2,
        in_progress=True,
        failing_since=sim.now - STUCK_LIMIT_S - 1,
    )
    pods = tuple(
        attrs.evolve(pod, resources=stuck) if pod.name == target else pod for pod in observation.pods
    )
    planned = decided(sim, attrs.evolve(observation, pods=pods), wanted("384Mi", "t2"))
    assert planned.rolling.outdated == (target,) and planned.rolling.shard == 0
    fresh = attrs.evolve(stuck, failing_since=sim.now - 10)
    pods = tuple(
        attrs.evolve(pod, resources=fresh) if pod.name == target else pod for pod in observation.pods
    )
    planned = decided(sim, attrs.evolve(observation, pods=pods), wanted("384Mi", "t2"))
    assert not planned.rolling.outdated and target in planned.rolling.resize.pods
