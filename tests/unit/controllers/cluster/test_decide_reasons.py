"""decide() driven against the simulator reaches every condition reason, blocked ones too.

Each scenario is a story the world tells (a bootstrap, a scale, a roll, a lost
node, a refusal, a bad config...), varied by hypothesis (sizes, delays, which
pod, when); a property test asserts that each story, whatever the draw, reaches
the reasons it names, with decide() deterministic at every pass. The stories'
reasons together must cover every `Reason` and every blocked reason; the exempt
ones are listed with why.
"""

from __future__ import annotations

import random
import typing
from collections.abc import Callable

import attrs
import pytest
from decide_harness import SECRET_KEY, World, config, run, step, world
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from restore_support import backup, source
from simulate import SimSettings

from controllers.cluster.decision.actions import ApplyObject, CreateObject
from controllers.cluster.decision.decide import (
    INTERNAL_SECRET_DAMAGED,
    PASSWORD_SECRET_INVALID,
    TLS_SECRET_INVALID,
    RolloutSlots,
)
from controllers.cluster.decision.report import Reason
from controllers.shared.config_resolve import FailureReason
from controllers.shared.observation import Observation, PodPhase
from controllers.shared.tls import Certificate, TlsMaterial, TlsProblem
from valkey_operator.api.cluster import ClusterState
from valkey_operator.api.resources import VERSION_FLOOR
from valkey_operator.valkey.slots import even_split

ACTIVE = ClusterState.ACTIVE.value
HASH = "c" * 64
BLOCKED_REASONS = frozenset(
    {
        *typing.get_args(FailureReason),
        TLS_SECRET_INVALID,
        INTERNAL_SECRET_DAMAGED,
        PASSWORD_SECRET_INVALID,
        "RoleNotFound",
        "InvalidAcl",
    }
)
"""Every reason a blocked status can carry: config resolution, TLS Secret, internal Secret, ACL."""
EXEMPT: dict[str, str] = {}
"""Reasons no story reaches, and why (none today)."""


def active(shards: int, replicas: int, rng: random.Random, **sim: object) -> World:
    settings_ = SimSettings(cluster="vk", gossip_every=rng.choice((1, 2)), ready_delays=(1, 2), **sim)  # type: ignore[arg-type]
    found = run(world(shards, replicas, settings_), passes=120)
    assert found.state == ACTIVE, found.status.get("message")
    return found


def pod_of(found: World, rng: random.Random, primary: bool) -> str:
    """A live pod whose server is (or is not) a slot-serving primary."""
    pods = sorted(
        name
        for name in found.sim.pods
        if (node := found.sim.node_of(name)) is not None and bool(node.slots) == primary
    )
    return rng.choice(pods)


# --- the stories ---------------------------------------------------------------------------------


def bootstrap_and_pause(rng: random.Random) -> World:
    found = active(rng.randint(1, 3), rng.randint(0, 1), rng)
    found.annotate({"valkey.gomomento.com/paused": "true"})
    step(found)
    return found


def gossip_lags(rng: random.Random) -> World:
    """A node restarts with a new identity while gossip stalls: only the seed meets it again."""
    found = active(3, rng.randint(0, 1), rng)
    found.sim.settings = attrs.evolve(found.sim.settings, gossip_every=10**6)
    found.sim.reboot_pod(rng.choice(sorted(found.sim.pods)))
    run(found, passes=12, until=lambda w: False)
    return found


def scale_out_and_in(rng: random.Random) -> World:
    found = active(2, 1, rng, sync_delay=rng.randint(2, 3))
    found.edit(shards=3)
    run(found, passes=200)
    assert found.state == ACTIVE
    found.edit(shards=2)
    run(found, passes=200)
    return found


def roll_with_a_failover_that_times_out(rng: random.Random) -> World:
    found = active(1, 1, rng, failing_failovers=frozenset({0}))
    found.images["v9b"] = {
        "metadata": {"name": "v9b"},
        "spec": {"repository": "valkey/valkey", "tag": "9.1.3"},
    }
    found.configs["cfg"] = config(image="v9b")
    run(found, passes=200)
    return found


def a_roll_waits_for_a_slot(rng: random.Random) -> World:
    found = active(1, 0, rng)
    found.rollout_slots = RolloutSlots(limit=1, holders=frozenset({"ns/other"}))
    found.images["v9b"] = {
        "metadata": {"name": "v9b"},
        "spec": {"repository": "valkey/valkey", "tag": "9.1.3"},
    }
    found.configs["cfg"] = config(image="v9b")
    step(found)
    step(found)
    return found


def a_lone_primary_is_lost(rng: random.Random) -> World:
    found = active(rng.randint(2, 3), 0, rng)
    found.sim.delete_pod(pod_of(found, rng, primary=True))
    run(found, passes=60)
    return found


def a_primary_is_lost_and_no_election_runs(rng: random.Random) -> World:
    found = active(3, 1, rng, elections=False)
    found.sim.delete_pod(pod_of(found, rng, primary=True))
    run(found, passes=90)
    return found


def nodes_do_not_answer(rng: random.Random) -> World:
    found = active(2, 1, rng)
    silent = pod_of(found, rng, primary=False)
    step(found, unreachable={silent})
    found.edit(podAnnotations={"example.com/team": "a"})
    found.configs["cfg"] = config(valkey={"timeout": str(rng.randint(10, 99))})
    step(found, act_unreachable=set(found.sim.pods))
    return found


def a_migration_fails(rng: random.Random) -> World:
    found = active(2, rng.randint(0, 1), rng, failing_migrations=frozenset({0}))
    found.edit(shards=3)
    run(found, passes=200)
    return found


def pods_keep_failing(rng: random.Random) -> World:
    found = world(1, 0)
    for _ in range(40):
        step(found)
        for name, pod in found.sim.pods.items():
            if found.sim.node_of(name) is not None and pod.phase.value == "Running":
                found.sim.crash_pod(name)
        if found.state == ClusterState.FAILED.value:
            break
    return found


def a_node_below_the_floor(rng: random.Random) -> World:
    old = (VERSION_FLOOR[0] - 1, 0, 0)
    found = world(1, rng.randint(0, 1), SimSettings(cluster="vk", version_overrides={0: old}))
    run(found, passes=15, until=lambda w: w.state == ClusterState.FAILED.value)
    return found


def settings_acl_and_annotations_change(rng: random.Random) -> World:
    found = active(
        1,
        1,
        rng,
        refused={"maxmemory-policy": frozenset({"allkeys-lfu"})},
        unknown_commands=frozenset({"nosuch"}),
        refused_users=frozenset({"picky"}),
    )
    found.roles["reader"] = {"metadata": {"name": "reader"}, "spec": {"categories": [{"name": "read"}]}}
    found.roles["odd"] = {
        "metadata": {"name": "odd"},
        "spec": {"categories": [{"name": "read"}], "commands": [{"name": "nosuch"}]},
    }
    found.configs["cfg"] = config(valkey={"maxmemory-policy": "allkeys-lfu", "timeout": "30"})
    found.edit(
        podAnnotations={"example.com/team": "a"},
        acl=[
            {
                "username": "app",
                "passwordHashes": [HASH],
                "permissions": [{"roleRef": "reader", "keys": [{"pattern": "app:*"}]}],
            },
            {
                "username": "picky",
                "passwordHashes": [HASH],
                "permissions": [{"roleRef": "reader", "keys": [{"pattern": "p:*"}]}],
            },
            {
                "username": "oddly",
                "passwordHashes": [HASH],
                "permissions": [{"roleRef": "odd", "keys": [{"pattern": "o:*"}]}],
            },
        ],
    )
    run(found, passes=8, until=lambda w: False)
    return found


def primaries_share_a_node(rng: random.Random) -> World:
    """Every primary ends up on one Kubernetes node (a reschedule the operator did not ask for)."""
    found = active(rng.randint(2, 3), 1, rng, k8s_nodes=(("a", "z1"), ("b", "z2")))
    for name, pod in found.sim.pods.items():
        node = found.sim.node_of(name)
        pod.k8s_node = "a" if node is not None and node.slots else "b"
    run(found, passes=150, until=lambda w: w.state == ACTIVE and len(w.decisions) > 3)
    return found


def hands_on_the_cluster(rng: random.Random) -> World:
    """Someone else's pods and a scheduler that cannot place one; then two primaries in one shard."""
    found = active(2, 1, rng)
    pod = next(iter(sorted(found.sim.pods)))

    def strays(observation: Observation) -> Observation:
        first = observation.pods[0]
        unlabelled = attrs.evolve(first, name="vk-stray", shard=None, uid="u-stray")
        stuck = attrs.evolve(
            first,
            name="vk-0-stuck",
            uid="u-stuck",
            phase=PodPhase.PENDING,
            ready=False,
            ip=None,
            unschedulable="0/3 nodes are available",
        )
        return attrs.evolve(observation, pods=(*observation.pods, unlabelled, stuck))

    step(found, hands=strays)
    primary = found.sim.node_of(pod_of(found, rng, primary=True))
    assert primary is not None
    replica = next(n for n in found.sim.nodes.values() if n.alive and n.primary_id == primary.node_id)
    replica.role, replica.primary_id, replica.slots = primary.role, None, primary.slots  # split brain
    step(found)
    del pod
    return found


def a_primary_sees_the_cluster_down(rng: random.Random) -> World:
    """Every slot has a reachable primary, but one of them reports cluster_state:fail (it lost
    sight of its peers): its clients get CLUSTERDOWN, so the cluster is not Ready."""
    found = active(rng.randint(2, 3), rng.randint(0, 1), rng)
    down = pod_of(found, rng, primary=True)

    def partitioned(observation: Observation) -> Observation:
        nodes = dict(observation.nodes)
        nodes[down] = attrs.evolve(nodes[down], cluster_ok=False)
        return attrs.evolve(observation, nodes=nodes)

    step(found, hands=partitioned)
    return found


def certificates_rotate(rng: random.Random) -> World:
    """A TLS cluster whose nodes present an old leaf that expires soon, and refuse to reload."""
    found = world(1, 0, SimSettings(cluster="vk", refuse_tls=True), tls={"secretRef": "vk-tls"})
    now = found.sim.now
    found.tls = TlsMaterial(
        secret="vk-tls",
        leaf=Certificate(fingerprint="new", serial="2", not_after=now + 90 * 86400),
        ca_pem="",
        content_hash="c2",
    )
    old = Certificate(fingerprint="old", serial="1", not_after=now + 86400)

    def presenting_old(observation: Observation) -> Observation:
        nodes = {
            pod: attrs.evolve(node, served=old) if node.reachable else node
            for pod, node in observation.nodes.items()
        }
        return attrs.evolve(observation, nodes=nodes)

    run(found, passes=12, until=lambda w: False, hands=presenting_old)
    return found


def the_operator_may_not_and_the_image_never_pulls(rng: random.Random) -> World:
    """Only a human can help: RBAC refuses the owned objects (then is granted), and the pods of a
    new cluster wait for an image reference that never pulls."""
    found = active(1, 0, rng)
    # Owned Services gone (deleted by hand): applying them again is refused, then allowed.
    found.sim.objects = {
        key: body for key, body in found.sim.objects.items() if not key.startswith("Service")
    }
    step(found, forbidden=lambda action: isinstance(action, CreateObject | ApplyObject))
    assert dict_of(found.status, "Stalled")["status"] == "True", found.status["conditions"]
    run(found, passes=20)
    fresh = world(1, rng.randint(0, 1))

    def no_image(observation: Observation) -> Observation:
        pods = tuple(
            attrs.evolve(pod, phase=PodPhase.PENDING, ready=False, image_wait="InvalidImageName")
            for pod in observation.pods
        )
        return attrs.evolve(observation, pods=pods, nodes={})

    run(fresh, passes=4, until=lambda w: False, hands=no_image)
    found.reasons |= fresh.reasons
    return found


def dict_of(status: dict, kind: str) -> dict:
    return next(c for c in status["conditions"] if c["type"] == kind)


def blocked(rng: random.Random) -> World:
    """Every fact that blocks a cluster, one after another, on a live one."""
    found = active(1, 0, rng)
    configs = dict(found.configs)
    for broken in (
        {},  # ConfigNotFound
        {"cfg": config(base="base")},  # BaseNotFound
        {
            "cfg": config(base="base"),
            "base": {"metadata": {"name": "base"}, "spec": {"baseRef": "cfg"}},
        },  # BaseCycle
        {"cfg": config(image="missing")},  # ImageNotFound
        {
            "cfg": config(base="c1"),
            **{
                f"c{i}": {"metadata": {"name": f"c{i}"}, "spec": {"baseRef": f"c{i + 1}"}}
                for i in range(1, 20)
            },
        },  # TooDeep
        {
            "cfg": {
                "metadata": {"name": "cfg"},
                "spec": {"imageRef": "v9", "resources": {"cpu": "2", "limits": {"cpu": "1"}}},
            }
        },  # LimitBelowRequest
        {
            "cfg": {"metadata": {"name": "cfg"}, "spec": {"imageRef": "v9", "persistence": {"mode": "rdb"}}}
        },  # PersistenceInvalid
    ):
        found.configs = broken
        step(found)
    found.configs = configs
    found.tls = TlsProblem("Secret vk-tls not found")
    found.edit(tls={"secretRef": "vk-tls"})
    step(found)
    found.tls = None
    found.edit(tls=None)
    found.edit(acl=[{"username": "app", "passwordSecretName": "absent", "permissions": []}])
    step(found)  # PasswordSecretInvalid
    found.edit(acl=[{"username": "app", "passwordHashes": [HASH], "permissions": [{"roleRef": "nobody"}]}])
    step(found)
    found.edit(
        acl=[{"username": "app", "passwordHashes": [HASH]}, {"username": "app", "passwordHashes": [HASH]}]
    )
    step(found)
    found.edit(acl=[])
    secret = found.sim.objects[SECRET_KEY]
    found.sim.objects[SECRET_KEY] = {**secret, "data": {}}
    step(found)
    assert not found.decisions[-1].actions
    return found


def durable_nodes_lose_a_volume_and_the_size_changes(rng: random.Random) -> World:
    """Persistence: a volume comes back empty under its node; then the config asks for smaller claims,
    then for larger ones on a class that cannot expand."""
    found = world(rng.randint(1, 2), 1, SimSettings(cluster="vk", ready_delays=(1, 2)))
    found.configs["cfg"] = config(persistence={"mode": "aof", "size": "2Gi"})
    run(found, passes=120)
    run(found, passes=2, until=lambda w: False)
    victim = rng.choice(sorted(found.sim.pods))
    found.sim.lose_volume(found.sim.pods[victim].claim or "")
    found.sim.crash_pod(victim)
    run(found, passes=200)
    found.configs["cfg"] = config(persistence={"mode": "aof", "size": "1Gi"})
    step(found)
    found.sim.settings = attrs.evolve(found.sim.settings, expandable=False)
    found.configs["cfg"] = config(persistence={"mode": "aof", "size": "4Gi"})
    step(found)
    return found


def a_restore_counts_wrong_then_right(rng: random.Random) -> World:
    """spec.restore: the manifest's count for one shard differs from what its server loaded (held),
    then the right manifest is read and the restore goes on to Active."""
    shards = rng.randint(1, 3)
    saved = backup(even_split(shards))
    found = world(
        shards, rng.randint(0, 1), SimSettings(cluster="vk", backup=saved), restore={"backupName": "nightly"}
    )
    wrong = rng.randrange(shards)
    found.restore = source({**saved, wrong: (7, saved[wrong][1])})
    run(found, passes=20, until=lambda w: (w.status.get("restore") or {}).get("phase") == "Held")
    found.restore = source(saved)
    run(found, passes=300)
    return found


Story = Callable[[random.Random], World]
STORIES: dict[Story, frozenset[str]] = {
    bootstrap_and_pause: frozenset(
        {
            Reason.WAITING_FOR_PODS,
            Reason.APPLYING_OBJECTS,
            Reason.ASSIGNING_SLOTS,
            Reason.READY,
            Reason.RECONCILED,
            Reason.AS_EXPECTED,
            Reason.PAUSED,
        }
    ),
    gossip_lags: frozenset({Reason.WAITING_FOR_GOSSIP}),
    scale_out_and_in: frozenset(
        {
            Reason.REBALANCING_SLOTS,
            Reason.MIGRATING_SLOTS,
            Reason.SCALE_DOWN_PENDING,
            Reason.REMOVING_PODS,
            Reason.ATTACHING_REPLICAS,
            Reason.SYNCING_REPLICAS,
            Reason.JOINING_NODES,
            Reason.FORGETTING_NODES,
        }
    ),
    roll_with_a_failover_that_times_out: frozenset({Reason.UPDATE_PENDING, Reason.FAILOVER_FAILED}),
    a_roll_waits_for_a_slot: frozenset({Reason.UPDATE_PENDING}),
    a_lone_primary_is_lost: frozenset({Reason.SLOTS_UNCOVERED, Reason.DATA_LOST, Reason.FORGETTING_NODES}),
    a_primary_is_lost_and_no_election_runs: frozenset(
        {Reason.PROMOTING_REPLICA, Reason.WAITING_FOR_CLUSTER_STATE}
    ),
    nodes_do_not_answer: frozenset({Reason.NODES_UNREACHABLE, Reason.ACTION_FAILED, Reason.PATCHING_PODS}),
    a_migration_fails: frozenset({Reason.MIGRATION_FAILED}),
    pods_keep_failing: frozenset({Reason.PODS_FAILING}),
    a_node_below_the_floor: frozenset({Reason.VERSION_BELOW_FLOOR}),
    settings_acl_and_annotations_change: frozenset(
        {
            Reason.APPLYING_SETTINGS,
            Reason.CONFIG_REJECTED,
            Reason.APPLYING_ACL,
            Reason.UNKNOWN_COMMAND,
            Reason.ACL_REJECTED,
            Reason.PATCHING_PODS,
        }
    ),
    primaries_share_a_node: frozenset({Reason.BALANCING_PRIMARIES}),
    a_primary_sees_the_cluster_down: frozenset({Reason.CLUSTER_STATE_FAIL}),
    hands_on_the_cluster: frozenset(
        {Reason.UNLABELLED_PODS, Reason.PODS_UNSCHEDULABLE, Reason.SHARD_CONFLICT, Reason.SLOTS_CONTESTED}
    ),
    certificates_rotate: frozenset({Reason.RELOADING_TLS, Reason.CERTIFICATE_EXPIRING, Reason.TLS_REJECTED}),
    blocked: BLOCKED_REASONS,
    durable_nodes_lose_a_volume_and_the_size_changes: frozenset(
        {Reason.VOLUME_LOST, Reason.CLAIM_SHRINK_REFUSED, Reason.CLAIM_GROWTH_REFUSED}
    ),
    a_restore_counts_wrong_then_right: frozenset({Reason.RESTORING, Reason.RESTORE_INCOMPLETE, Reason.READY}),
    the_operator_may_not_and_the_image_never_pulls: frozenset({Reason.FORBIDDEN, Reason.IMAGE_PULL_FAILED}),
}


@pytest.mark.parametrize("story", STORIES, ids=lambda story: story.__name__)
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(seed=st.integers(0, 2**16))
def test_each_story_reaches_its_reasons_whatever_the_draw(story: Story, seed: int) -> None:
    found = story(random.Random(seed))
    missing = sorted(STORIES[story] - found.reasons)
    assert not missing, f"{story.__name__} (seed {seed}) never reached {missing}"


def test_the_stories_together_reach_every_reason_blocked_ones_too() -> None:
    wanted = {reason.value for reason in Reason} | BLOCKED_REASONS
    missing = sorted(wanted - set().union(*STORIES.values()) - EXEMPT.keys())
    assert not missing, f"no story reaches {missing}"


def test_the_stories_reach_every_state() -> None:
    states = {decision.status.state for story in STORIES for decision in story(random.Random(3)).decisions}
    assert states == set(ClusterState)
