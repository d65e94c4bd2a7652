"""Day 2 in the planner: owned objects, runtime settings, ACLs, pod metadata, crash loops, cache lag.

Each decision is pure and read from one observation; the simulator applies the
actions as Valkey and the API server would, and the harness checks after
every pass that nothing is decided from an unknown fact.
"""

from __future__ import annotations

import base64
from collections import Counter

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st
from planner_harness import TAMPERED_SETTING, Chaos, Run, one_pass, run
from simulate import SimSettings, SimulatedCluster

from controllers.cluster.decision.actions import (
    ApplyObject,
    DeletePod,
    Failure,
    NewPod,
    PatchPodMetadata,
    PruneFailedPod,
    SetConfig,
    SyncAcl,
)
from controllers.cluster.decision.context import Context
from controllers.cluster.decision.desired import Desired, DesiredAcl, DesiredUser, OwnedObject
from controllers.cluster.decision.memory import Refusals, remember_refusals
from controllers.cluster.decision.plan import REQUEUE_REFUSED, Plan, finish, plan
from controllers.cluster.decision.report import Reason
from controllers.cluster.decision.upkeep import RENDERED_HASH_ANNOTATION
from controllers.cluster.render.acl import UserAcl
from controllers.shared.observation import Observation
from valkey_operator.api.cluster import ClusterState
from valkey_operator.api.tunables import SYNC_MAX_REPLICAS, desired_runtime
from valkey_operator.core.resource import CONFIG_MAPS, SECRETS
from valkey_operator.valkey.acl import normal_form

IMAGE = "valkey/valkey:9.1.2"
SECRET, KEY = "vk-internal", "users.acl"
INTERNAL = (
    UserAcl("default", ("reset", "off")),
    UserAcl("valkey-operator", ("reset", "on", "#" + "a" * 64, "~*", "&*", "+@all")),
    UserAcl("valkey-replication", ("reset", "on", "#" + "b" * 64, "~*", "+@write", "+psync")),
)
APP = UserAcl("app", ("reset", "on", "#" + "c" * 64, "+hello", "(~app:* -@all +@read +get)"))
OPS = UserAcl("ops", ("reset", "on", "#" + "d" * 64, "(~* -@all +@admin +config|get)"))


def objects() -> tuple[OwnedObject, ...]:
    meta = {"namespace": "ns", "labels": {"app": "vk"}}
    return (
        OwnedObject(SECRETS, {"metadata": {"name": SECRET, **meta}, "data": {"admin": "eA=="}}),
        OwnedObject(
            CONFIG_MAPS, {"metadata": {"name": "vk-config", **meta}, "data": {"valkey.conf": "port 6379\n"}}
        ),
    )


def day2(
    shards: int = 2,
    replicas: int = 1,
    *,
    runtime: dict[str, str] | None = None,
    users: tuple[DesiredUser, ...] = (DesiredUser(APP, (("reader", "get"),)),),
    annotations: dict[str, str] | None = None,
    config_hash: str = "h1",
) -> Desired:
    return Desired(
        shards=shards,
        replicas_per_shard=replicas,
        template_hash="t1",
        image=IMAGE,
        config_hash=config_hash,
        runtime=runtime if runtime is not None else {"maxmemory": "100mb", "maxmemory-policy": "allkeys-lru"},
        pod_annotations=annotations if annotations is not None else {"example.com/team": "cache"},
        acl=DesiredAcl(internal=INTERNAL, users=users, secret=SECRET, key=KEY),
        objects=objects(),
    )


def kinds(planned: Plan) -> Counter[str]:
    return Counter(type(action).__name__ for action in planned.actions)


def settled(wanted: Desired, settings_: SimSettings | None = None) -> Run:
    result = run(wanted, settings=settings_)
    assert result.last.status.state is ClusterState.ACTIVE, result.last.status.message
    return result


def file_text(sim: SimulatedCluster) -> str:
    return base64.b64decode(sim.objects[f"Secret/{SECRET}"]["data"][KEY]).decode()


def again(result: Run, chaos: Chaos | None = None, passes: int = 30) -> Run:
    """Keep reconciling an existing world until Active (or passes run out)."""
    start = result.passes
    for index in range(start, start + passes):
        one_pass(result, index, chaos or Chaos())
        if result.last.status.state is ClusterState.ACTIVE:
            break
    return result


# --- a fresh cluster comes up as specified ------------------------------------------------------


def test_a_fresh_cluster_runs_the_settings_users_annotations_and_objects_it_asks_for() -> None:
    result = settled(day2())
    sim = result.sim
    wanted = desired_runtime({"maxmemory": "100mb", "maxmemory-policy": "allkeys-lru"}, None).values
    for node in (node for node in sim.nodes.values() if node.alive):
        assert node.config["maxmemory"] == "104857600" and node.config["maxmemory-policy"] == "allkeys-lru"
        assert node.config == {**node.config, **{k: wanted[k] for k in ("maxmemory", "maxmemory-policy")}}
        assert node.acl["app"] == normal_form(APP.rules)
        assert "default" in node.acl and node.acl["default"] == normal_form(("reset", "off"))
    assert all(pod.annotations["example.com/team"] == "cache" for pod in sim.pods.values())
    assert file_text(sim).splitlines()[-1] == APP.file_line()
    assert result.last.status.config_hash == "h1"


def test_settings_are_set_on_a_new_node_before_it_is_met() -> None:
    result = settled(day2(1, 0))
    first = next(p for p in result.plans if any(type(a).__name__ == "AssignSlots" for a in p.actions))
    names = [type(action).__name__ for action in first.actions]
    assert names.index("SetConfig") < names.index("AssignSlots"), names


# --- runtime settings ----------------------------------------------------------------------------


def test_a_runtime_edit_is_one_config_set_per_node_and_the_hash_follows_only_when_all_run_it() -> None:
    result = settled(day2())
    edited = attrs.evolve(
        result.desired,
        runtime={**result.desired.runtime, "maxmemory-policy": "allkeys-lfu", "timeout": "30"},
        config_hash="h2",
    )
    one_pass(result, result.passes, Chaos(edits={result.passes: edited}))
    planned = result.last
    sets = [action for action in planned.actions if isinstance(action, SetConfig)]
    assert len(sets) == 4 and len({action.node for action in sets}) == 4
    assert all(
        dict(action.settings) == {"maxmemory-policy": "allkeys-lfu", "timeout": "30"} for action in sets
    )
    assert planned.status.state is ClusterState.UPDATING
    assert planned.status.config_hash == "h1"  # nodes did not run it when the pass observed them
    assert planned.status.condition("Progressing").reason == Reason.APPLYING_SETTINGS
    again(result)
    assert result.last.status.state is ClusterState.ACTIVE and result.last.status.config_hash == "h2"
    assert not any(isinstance(action, NewPod | DeletePod) for p in result.plans[-3:] for action in p.actions)


def test_removing_a_key_returns_the_node_to_its_default() -> None:
    result = settled(day2(1, 0, runtime={"timeout": "30", "notify-keyspace-events": "Ex"}))
    edited = attrs.evolve(result.desired, runtime={}, config_hash="h2")
    again(result, Chaos(edits={result.passes: edited}))
    node = next(node for node in result.sim.nodes.values() if node.alive)
    defaults = desired_runtime({}, node.version).values
    assert (node.config["timeout"], node.config["notify-keyspace-events"]) == (
        defaults["timeout"],
        defaults["notify-keyspace-events"],
    )


def test_a_setting_changed_by_hand_is_set_back() -> None:
    result = settled(day2(1, 1))
    seq = min(pod.seq for pod in result.sim.pods.values())
    again(result, Chaos(tampers={(result.passes, seq)}))
    planned = result.plans[-2] if len(result.plans) > 1 else result.last
    assert any(
        isinstance(action, SetConfig) and TAMPERED_SETTING[0] in dict(action.settings)
        for p in result.plans[-3:]
        for action in p.actions
    ), planned.actions
    assert result.last.status.state is ClusterState.ACTIVE


def test_a_sync_delay_a_backup_left_lowered_is_put_back_once_no_backup_runs() -> None:
    """A backup's stream lowers repl-diskless-sync-delay to 0 for the moment its SYNC starts; an
    operator stopped in between leaves it there. While a backup is Running the planner leaves it
    (the next shard's stream lowers it again); the first pass without one sets it back."""
    result = settled(day2(1, 1))
    pod = next(iter(result.sim.pods))
    result.sim.tamper_config(pod, "repl-diskless-sync-delay", "0")
    running = attrs.evolve(result.desired, backup_running=True)
    one_pass(result, result.passes, Chaos(edits={result.passes: running}))
    assert not [action for action in result.last.actions if isinstance(action, SetConfig)]
    assert result.sim.node_of(pod).config["repl-diskless-sync-delay"] == "0"  # type: ignore[union-attr]
    ended = attrs.evolve(result.desired, backup_running=False)
    one_pass(result, result.passes, Chaos(edits={result.passes: ended}))
    assert [action for action in result.last.actions if isinstance(action, SetConfig)] == [
        SetConfig(pod, (("repl-diskless-sync-delay", "5"),))
    ]
    assert result.sim.node_of(pod).config["repl-diskless-sync-delay"] == "5"  # type: ignore[union-attr]
    again(result, passes=3)
    assert result.last.status.state is ClusterState.ACTIVE
    assert not [action for action in result.last.actions if isinstance(action, SetConfig)]


def test_every_node_starts_a_full_sync_once_its_shards_replicas_all_asked() -> None:
    """A node runs repl-diskless-sync-max-replicas at the cluster's replicas per shard (Valkey starts
    at 0: every full sync waits the 5 s delay), set back when it differs, and changed with
    spec.replicasPerShard."""
    result = settled(day2(1, 2))
    pod = next(iter(result.sim.pods))
    result.sim.tamper_config(pod, SYNC_MAX_REPLICAS, "0")
    again(result, passes=1)
    assert SetConfig(pod, ((SYNC_MAX_REPLICAS, "2"),)) in result.last.actions
    more = attrs.evolve(result.desired, replicas_per_shard=3)
    running = set(result.sim.pods)
    one_pass(result, result.passes, Chaos(edits={result.passes: more}))
    sent = [action for action in result.last.actions if isinstance(action, SetConfig)]
    assert {action.node for action in sent} == running, sent
    assert all(dict(action.settings) == {SYNC_MAX_REPLICAS: "3"} for action in sent), sent


def test_a_refused_value_is_degraded_with_valkeys_words_and_the_others_still_apply() -> None:
    world = SimSettings(refused={"maxmemory-policy": frozenset({"allkeys-lfu"})})
    result = settled(day2(1, 0), world)
    edited = attrs.evolve(
        result.desired, runtime={**result.desired.runtime, "maxmemory-policy": "allkeys-lfu", "timeout": "30"}
    )
    one_pass(result, result.passes, Chaos(edits={result.passes: edited}))
    planned = result.last
    (action,) = [action for action in planned.actions if isinstance(action, SetConfig)]
    message = "CONFIG SET failed (possibly related to argument 'maxmemory-policy') - not on this build"
    finished = finish(planned, [Failure(action, message, refused="maxmemory-policy")])
    status = finished.status
    assert (
        status.condition("Degraded").status and status.condition("Degraded").reason == Reason.CONFIG_REJECTED
    )
    assert "maxmemory-policy 'allkeys-lfu'" in status.condition("Degraded").message
    assert message in status.condition("Degraded").message
    assert finished.requeue_after == REQUEUE_REFUSED
    node = next(node for node in result.sim.nodes.values() if node.alive)
    assert node.config["timeout"] == "0"  # all or nothing, as Valkey does: the refusal is a fact now
    one_pass(result, result.passes, Chaos())  # the next pass sends the others, without the refused value
    (resent,) = [action for action in result.last.actions if isinstance(action, SetConfig)]
    assert dict(resent.settings) == {"timeout": "30"}
    assert node.config["timeout"] == "30"  # the others applied
    again(result, passes=5)
    status = result.last.status
    assert status.state is ClusterState.UPDATING  # it never claims what no node runs
    assert not any(isinstance(action, SetConfig) for action in result.last.actions)  # never resent
    assert status.condition("Degraded").reason == Reason.CONFIG_REJECTED  # still named, every pass
    assert "maxmemory-policy 'allkeys-lfu' refused by 1 node(s)" in status.condition("Degraded").message
    assert result.last.requeue_after == REQUEUE_REFUSED


def test_a_refusal_that_names_no_directive_has_them_sent_one_by_one() -> None:
    """Valkey's error may name no argument: the next pass sends each directive on its own, so the
    refused one is named and the others apply (the actor never probes on its own)."""
    result = settled(day2(1, 0), SimSettings())
    edited = attrs.evolve(result.desired, runtime={**result.desired.runtime, "timeout": "30", "hz": "15"})
    pod = next(iter(result.sim.pods))
    sent = SetConfig(pod, (("hz", "15"), ("timeout", "30")))
    result.refusals = remember_refusals(
        Refusals(), [sent], [Failure(sent, "ERR CONFIG SET failed", refused="")]
    )
    one_pass(result, result.passes, Chaos(edits={result.passes: edited}))
    split = [action for action in result.last.actions if isinstance(action, SetConfig)]
    assert split == [SetConfig(pod, (("hz", "15"),)), SetConfig(pod, (("timeout", "30"),))]
    one_pass(result, result.passes, Chaos())
    assert not [action for action in result.last.actions if isinstance(action, SetConfig)]


def test_nothing_is_set_on_a_node_whose_settings_could_not_be_read() -> None:
    result = settled(day2(1, 1))
    edited = attrs.evolve(result.desired, runtime={"timeout": "30"}, config_hash="h2")
    seqs = sorted(pod.seq for pod in result.sim.pods.values())
    one_pass(result, result.passes, Chaos(edits={result.passes: edited}, unread={(result.passes, seqs[0])}))
    planned = result.last
    unread_pod = next(pod.name for pod in result.sim.pods.values() if pod.seq == seqs[0])
    assert {action.node for action in planned.actions if isinstance(action, SetConfig)} == {
        pod.name for pod in result.sim.pods.values() if pod.seq != seqs[0]
    }
    assert not any(getattr(action, "node", None) == unread_pod for action in planned.actions)
    assert planned.status.config_hash == "h1"
    assert "(not read)" in planned.status.message or planned.status.state is ClusterState.UPDATING


# --- ACLs -------------------------------------------------------------------------------------------


def test_acl_drift_is_reverted_and_a_user_added_by_hand_is_deleted_but_internal_users_stay() -> None:
    result = settled(day2(1, 1))
    seq = min(pod.seq for pod in result.sim.pods.values())
    pod = next(pod.name for pod in result.sim.pods.values() if pod.seq == seq)
    one_pass(result, result.passes, Chaos(tampers={(result.passes, seq)}))
    (sync,) = [action for action in result.last.actions if isinstance(action, SyncAcl)]
    assert sync.node == pod
    assert [user.username for user in sync.set_users] == ["app"]
    assert sync.delete_users == ("intruder",)
    again(result)
    node = result.sim.node_of(pod)
    assert node is not None and set(node.acl) == {"default", "valkey-operator", "valkey-replication", "app"}


def test_a_role_with_an_unknown_command_holds_its_users_and_new_pods_still_start() -> None:
    result = settled(day2(1, 0))
    bad = DesiredUser(
        UserAcl("app", ("reset", "on", "#" + "c" * 64, "(~app:* -@all +@read +nosuch)")),
        (("reader", "nosuch"),),
    )
    ops = DesiredUser(OPS, (("admin", "config|get"),))
    result.sim.settings = attrs.evolve(result.sim.settings, unknown_commands=frozenset({"nosuch"}))
    edited = attrs.evolve(result.desired, acl=attrs.evolve(result.desired.acl, users=(bad, ops)))
    again(result, Chaos(edits={result.passes: edited}), passes=6)
    status = result.last.status
    assert status.condition("Degraded").reason == Reason.UNKNOWN_COMMAND
    assert "ValkeyRole reader" in status.message + status.condition("Degraded").message
    text = file_text(result.sim)
    assert APP.file_line() in text and "nosuch" not in text  # the app user keeps its previous rules
    assert OPS.file_line() in text  # the other users still apply
    node = next(node for node in result.sim.nodes.values() if node.alive)
    assert node.acl["app"] == normal_form(APP.rules) and node.acl["ops"] == normal_form(OPS.rules)
    # a pod created afterwards (scale up) loads the file, starts and joins
    again(result, Chaos(specs={result.passes: (2, 0)}), passes=30)
    assert all(pod.phase.value == "Running" for pod in result.sim.pods.values())
    assert len([node for node in result.sim.nodes.values() if node.alive]) == 2


def test_a_user_whose_commands_no_node_could_confirm_stays_out_of_the_startup_file() -> None:
    planned = plan(Observation(pods=()), day2(1, 0), Context())
    (secret,) = [a for a in planned.actions if isinstance(a, ApplyObject) and a.object.resource is SECRETS]
    text = base64.b64decode(secret.object.body["data"][KEY]).decode()
    assert "user app " not in text and "user valkey-operator " in text


# --- pod metadata and owned objects -----------------------------------------------------------------


def test_new_and_changed_annotations_are_patched_and_removed_ones_stay() -> None:
    result = settled(day2(1, 1, annotations={"example.com/team": "cache", "example.com/old": "x"}))
    for pod in result.sim.pods.values():
        pod.annotations["other.io/owner"] = "someone"
    edited = attrs.evolve(
        result.desired, pod_annotations={"example.com/team": "store", "example.com/new": "1"}
    )
    one_pass(result, result.passes, Chaos(edits={result.passes: edited}))
    patches = [action for action in result.last.actions if isinstance(action, PatchPodMetadata)]
    assert len(patches) == 2
    assert all(dict(p.annotations) == {"example.com/new": "1", "example.com/team": "store"} for p in patches)
    for pod in result.sim.pods.values():
        assert pod.annotations == {
            "example.com/team": "store",
            "example.com/new": "1",
            "example.com/old": "x",
            "other.io/owner": "someone",
        }


def test_an_owned_object_is_applied_again_when_a_rendered_key_goes_away_or_is_edited() -> None:
    result = settled(day2(1, 0))
    stored = result.sim.objects["ConfigMap/vk-config"]
    assert RENDERED_HASH_ANNOTATION in stored["metadata"]["annotations"]
    assert plan_kinds(result)["ApplyObject"] == 0
    result.sim.objects["ConfigMap/vk-config"] = {**stored, "data": {"valkey.conf": "edited\n"}}
    assert plan_kinds(result)["ApplyObject"] == 1
    result.sim.objects["ConfigMap/vk-config"] = stored
    fewer = (objects()[0], OwnedObject(CONFIG_MAPS, {**objects()[1].body, "data": {}}))
    result.desired = attrs.evolve(result.desired, objects=fewer)
    assert plan_kinds(result)["ApplyObject"] == 1  # contains() alone would miss a dropped key


def plan_kinds(result: Run) -> Counter[str]:
    return kinds(plan(result.sim.observe(), result.desired, result.sim.context()))


# --- crash loops and cache lag -----------------------------------------------------------------------


def test_a_shard_whose_pods_keep_failing_gets_no_new_pod_and_the_cluster_says_failed() -> None:
    sim = SimulatedCluster(SimSettings(ready_delays=(1,)))
    wanted = day2(1, 0)
    for _ in range(4):
        sim.create_pod(0)
    sim.advance()
    for pod in list(sim.pods.values()):
        sim.crash_pod(pod.name)
    planned = plan(sim.observe(), wanted, sim.context())
    assert not any(isinstance(action, NewPod) for action in planned.actions)
    assert [type(a) for a in planned.actions if isinstance(a, PruneFailedPod)] == [PruneFailedPod]
    assert planned.status.state is ClusterState.FAILED
    assert planned.status.condition("Ready").reason == Reason.PODS_FAILING
    assert "keep failing" in planned.status.message
    assert 1.0 <= planned.requeue_after <= 300.0


def test_no_pod_is_created_or_deleted_while_the_cache_has_not_shown_the_last_writes() -> None:
    planned = plan(Observation(pods=()), day2(1, 0), Context(awaiting=frozenset({"vk-0-00000"})))
    assert not any(isinstance(action, NewPod | DeletePod | PruneFailedPod) for action in planned.actions)
    assert planned.requeue_after == 1.0


# --- any history -------------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 30), st.integers(0, 5)), max_size=4),
    st.lists(st.tuples(st.integers(0, 30), st.integers(0, 5)), max_size=4),
    st.lists(st.tuples(st.integers(0, 30), st.integers(0, 5)), max_size=3),
    st.integers(3, 20),
)
def test_any_history_of_unknown_facts_hand_edits_and_edits_converges(
    unread: list[tuple[int, int]],
    unreachable: list[tuple[int, int]],
    tampers: list[tuple[int, int]],
    edit_at: int,
) -> None:
    wanted = day2(2, 1)
    edited = attrs.evolve(
        wanted,
        runtime={"maxmemory": "200mb", "hz": "20"},
        pod_annotations={"example.com/team": "store"},
        acl=attrs.evolve(wanted.acl, users=(DesiredUser(OPS, (("admin", "config|get"),)),)),
        config_hash="h2",
    )
    chaos = Chaos(
        unread=frozenset(unread),
        unreachable=frozenset(unreachable),
        tampers=frozenset(tampers),
        edits={edit_at: edited},
    )
    result = run(wanted, chaos=chaos, max_passes=80, until=lambda p: False)
    # after the chaos, a calm stretch must end Active with every node as specified
    again(result, passes=30)
    assert result.last.status.state is ClusterState.ACTIVE, result.last.status.message
    assert result.last.status.config_hash == "h2"


def test_a_failed_object_apply_is_a_finding_and_counts_no_failover() -> None:
    from controllers.cluster.decision.decide import failover_counts

    planned = plan(Observation(pods=()), day2(1, 0), Context())
    apply = next(a for a in planned.actions if isinstance(a, ApplyObject))
    failures = [Failure(apply, "apply Secret/vk-internal: 500 Internal")]
    finished = finish(planned, failures)  # actions holding dicts must never need hashing
    assert finished.status.condition("Degraded").reason == Reason.ACTION_FAILED
    assert failover_counts(planned.actions, failures) == {}


def test_a_failed_pod_kept_as_evidence_is_not_listed_as_a_node_of_an_active_cluster() -> None:
    """Found by the chaos run: after a SIGKILL the Failed pod (kept as evidence) stayed in status.nodes
    of an Active 3x1 cluster, 7 "nodes" for 6, at an IP where no server answers."""
    result = settled(day2(2, 1))
    crashed = next(name for name, pod in result.sim.pods.items() if pod.node_id is not None)
    result.sim.crash_pod(crashed)
    result = again(result, passes=60)
    status = result.last.status
    assert status.state is ClusterState.ACTIVE, status.message
    assert crashed in result.sim.pods, "the Failed pod is kept as evidence"
    assert crashed not in {node.pod for node in status.nodes}
    assert len(status.nodes) == 4


def test_a_rolling_update_ends_active_while_a_failed_pod_of_the_old_template_is_kept_as_evidence() -> None:
    """Found by the chaos run: a SIGKILL then a roll left the cluster Updating for good, "1 pod(s) run an
    outdated template" counting the Failed pod the roll (rightly) never replaces."""
    result = settled(day2(2, 1))
    crashed = next(name for name, pod in result.sim.pods.items() if pod.node_id is not None)
    result.sim.crash_pod(crashed)
    result = again(result, passes=60)
    assert result.last.status.state is ClusterState.ACTIVE, result.last.status.message
    result.desired = attrs.evolve(result.desired, template_hash="t2")
    result = again(result, passes=300)
    status = result.last.status
    assert crashed in result.sim.pods, "the Failed pod of the old template is kept as evidence"
    assert status.state is ClusterState.ACTIVE, status.message
