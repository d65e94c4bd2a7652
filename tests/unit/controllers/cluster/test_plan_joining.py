"""A scale-out's new node joins at once (SPEC 1.4, docs/performance.md "Scaling").

A new primary MET within Valkey's 2 s writable delay after its start reports
cluster_state ok when that delay ends; MET later, it waits the rejoin delay
(min(cluster-node-timeout, 5 s)) after learning the slot map. So the planner
MEETs a starting pod's server as soon as it answers (before its readiness probe
passes), polls closely while a node joins or a migration job runs, and still
moves slots only to a Ready target that reports cluster_state ok.
"""

from __future__ import annotations

import attrs
import observed
from observed import line

from controllers.cluster.decision.actions import Meet, MigrateSlots
from controllers.cluster.decision.context import Context
from controllers.cluster.decision.desired import Desired
from controllers.cluster.decision.plan import JOIN_WINDOW_S, REQUEUE_FAST, plan, settling
from controllers.cluster.decision.report import Reason
from controllers.cluster.decision.view import View
from controllers.shared.observation import NodeObservation, Observation, PodObservation
from valkey_operator.valkey.replies import MigrationOperation, SlotMigration
from valkey_operator.valkey.slots import SlotRange

IMAGE = "valkey/valkey:9.1.0"
NOW = 1_800_000_000.0
AT_NOW = Context(now=NOW)
ALL = (SlotRange(0, 16383),)
A, N = "a" * 40, "n" * 40


def desired() -> Desired:
    return Desired(shards=2, replicas_per_shard=0, template_hash="t1", image=IMAGE)


def pod(name: str, shard: int, ip: str, *, ready: bool = True, age: float = 1.0) -> PodObservation:
    created = f"2027-01-15T08:00:0{shard}Z"
    return observed.pod(
        name, shard, ip, ready=ready, created=created, created_at=NOW - age, member=ready and shard == 0
    )


def seed(*, knows_new: bool, jobs: tuple[SlotMigration, ...] = ()) -> NodeObservation:
    known = (line(A, "10.0.0.1", slots=ALL, me=True), *((line(N, "10.0.0.2"),) if knows_new else ()))
    return observed.primary(A, slots=ALL, known=known, jobs=jobs)


def new(*, met: bool, ok: bool) -> NodeObservation:
    known = (line(N, "10.0.0.2", me=True), *((line(A, "10.0.0.1", slots=ALL),) if met else ()))
    return observed.primary(N, ok=ok, known=known)


def observe(new_pod: PodObservation, nodes: dict[str, NodeObservation]) -> Observation:
    return Observation(pods=(pod("vk-0-a", 0, "10.0.0.1"), new_pod), nodes=nodes)


def test_a_starting_pod_whose_server_answers_is_met_at_once_and_polled_closely() -> None:
    starting = pod("vk-1-n", 1, "10.0.0.2", ready=False)
    assert starting.starting
    planned = plan(
        observe(starting, {"vk-0-a": seed(knows_new=False), "vk-1-n": new(met=False, ok=False)}),
        desired(),
        AT_NOW,
    )
    assert Meet(node="vk-0-a", peer="vk-1-n", peer_ip="10.0.0.2") in planned.actions
    assert planned.requeue_after == REQUEUE_FAST


def test_a_starting_pod_not_listening_yet_is_no_fault_and_is_polled_only_while_young() -> None:
    unanswered = NodeObservation.unreachable("connection refused")
    young = pod("vk-1-n", 1, "10.0.0.2", ready=False)
    planned = plan(observe(young, {"vk-0-a": seed(knows_new=False), "vk-1-n": unanswered}), desired(), AT_NOW)
    assert not any(isinstance(action, Meet) for action in planned.actions)
    assert Reason.NODES_UNREACHABLE not in {finding.reason for finding in planned.status.findings}
    assert planned.requeue_after == REQUEUE_FAST
    old = attrs.evolve(young, created_at=NOW - JOIN_WINDOW_S - 1)
    planned = plan(observe(old, {"vk-0-a": seed(knows_new=False), "vk-1-n": unanswered}), desired(), AT_NOW)
    assert planned.requeue_after > REQUEUE_FAST


def test_slots_move_only_to_a_ready_new_primary_reporting_ok_and_the_wait_is_polled_closely() -> None:
    for ready, ok in ((True, False), (False, True)):
        nodes = {"vk-0-a": seed(knows_new=True), "vk-1-n": new(met=True, ok=ok)}
        planned = plan(observe(pod("vk-1-n", 1, "10.0.0.2", ready=ready), nodes), desired(), AT_NOW)
        assert not any(isinstance(action, MigrateSlots) for action in planned.actions), (ready, ok)
        assert planned.requeue_after == REQUEUE_FAST
    nodes = {"vk-0-a": seed(knows_new=True), "vk-1-n": new(met=True, ok=True)}
    planned = plan(observe(pod("vk-1-n", 1, "10.0.0.2"), nodes), desired(), AT_NOW)
    assert [action.target_id for action in planned.actions if isinstance(action, MigrateSlots)] == [N]
    assert planned.requeue_after == REQUEUE_FAST


def test_a_migration_job_under_way_is_polled_closely_and_an_old_idle_node_is_not() -> None:
    job = SlotMigration(
        name="j1",
        operation=MigrationOperation.EXPORT,
        slots=(SlotRange(15360, 16383),),
        source_id=A,
        target_id=N,
        state="in_progress",
    )
    old = pod("vk-1-n", 1, "10.0.0.2", age=JOIN_WINDOW_S + 1)
    nodes = {"vk-0-a": seed(knows_new=True, jobs=(job,)), "vk-1-n": new(met=True, ok=True)}
    assert settling(View(observe(old, nodes), desired(), AT_NOW))
    nodes = {"vk-0-a": seed(knows_new=True), "vk-1-n": new(met=True, ok=False)}
    assert not settling(View(observe(old, nodes), desired(), AT_NOW))
    assert not settling(View(observe(old, nodes), attrs.evolve(desired(), paused=True), AT_NOW))


def test_a_ready_node_is_the_seed_before_an_older_starting_one() -> None:
    older = attrs.evolve(pod("vk-0-s", 0, "10.0.0.3", ready=False), created="2027-01-15T07:00:00Z")
    ready = pod("vk-1-r", 1, "10.0.0.4")
    empty = {
        name: observed.primary(name[-1] * 40, ok=False, known=(line(name[-1] * 40, ip, me=True),))
        for name, ip in (("vk-0-s", "10.0.0.3"), ("vk-1-r", "10.0.0.4"))
    }
    view = View(Observation(pods=(older, ready), nodes=empty), desired(), AT_NOW)
    assert view.seed is not None and view.seed.pod.name == "vk-1-r"
    planned = plan(Observation(pods=(older, ready), nodes=empty), desired(), AT_NOW)
    assert Meet(node="vk-1-r", peer="vk-0-s", peer_ip="10.0.0.3") in planned.actions


def test_a_young_node_loading_its_data_is_met_after_the_load_and_polled_closely_meanwhile() -> None:
    """A restore's node reads its RDB for seconds and refuses MEET meanwhile; the load's end raises
    no event, so a young loading node is polled closely and met the pass after it has loaded."""
    young = pod("vk-1-n", 1, "10.0.0.2")
    loading = attrs.evolve(new(met=False, ok=False), loading=True)
    planned = plan(observe(young, {"vk-0-a": seed(knows_new=False), "vk-1-n": loading}), desired(), AT_NOW)
    assert not any(isinstance(action, Meet) for action in planned.actions)
    assert planned.requeue_after == REQUEUE_FAST
    old = attrs.evolve(young, created_at=NOW - JOIN_WINDOW_S - 1)
    assert not settling(
        View(observe(old, {"vk-0-a": seed(knows_new=False), "vk-1-n": loading}), desired(), AT_NOW)
    )
    loaded = plan(
        observe(young, {"vk-0-a": seed(knows_new=False), "vk-1-n": new(met=False, ok=False)}),
        desired(),
        AT_NOW,
    )
    assert Meet(node="vk-0-a", peer="vk-1-n", peer_ip="10.0.0.2") in loaded.actions
