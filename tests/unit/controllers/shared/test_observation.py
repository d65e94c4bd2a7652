"""The observation model: slot-range arithmetic, reply parsers, pods from the cache, the desired spec."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controllers.cluster.decision.desired import Desired
from controllers.shared.names import SHAPE_HASH_LABEL, SHARD_LABEL
from controllers.shared.observation import (
    ContainerResources,
    NodeObservation,
    PodObservation,
    PodPhase,
    same_quantity,
)
from controllers.shared.versions import meets_floor, parse_version, version_from_info
from valkey_operator.api.cluster import ValkeyCluster
from valkey_operator.valkey.replies import MigrationOperation, SlotMigration, parse_cluster_nodes
from valkey_operator.valkey.slots import (
    ALL_SLOTS,
    SLOT_COUNT,
    SlotRange,
    coverage,
    even_split,
    format_slot_ranges,
    intersect,
    normalize,
    parse_slot_ranges,
    slot_count,
    subtract,
    union,
)

# --- slot ranges -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ranges"),
    [
        ("0-5460,5462", (SlotRange(0, 5460), SlotRange(5462, 5462))),
        ("0-10 20-30", (SlotRange(0, 10), SlotRange(20, 30))),
        ("5,3-4,0-1", (SlotRange(0, 1), SlotRange(3, 5))),
        ("", ()),
        ("0-16383", ALL_SLOTS),
    ],
)
def test_slot_ranges_parse_in_both_spellings_and_normalize(text: str, ranges: tuple[SlotRange, ...]) -> None:
    assert parse_slot_ranges(text) == ranges


def test_slot_ranges_format_in_the_status_spelling() -> None:
    assert format_slot_ranges([SlotRange(5462, 5462), SlotRange(0, 5460)]) == "0-5460,5462"
    assert format_slot_ranges([]) == ""


@pytest.mark.parametrize(("start", "end"), [(-1, 3), (5, 4), (0, SLOT_COUNT)])
def test_a_slot_range_outside_the_16384_slots_is_refused(start: int, end: int) -> None:
    with pytest.raises(ValueError, match="invalid slot range"):
        SlotRange(start, end)


slot_sets = st.frozensets(st.integers(0, SLOT_COUNT - 1), max_size=60)


def as_ranges(slots: frozenset[int]) -> tuple[SlotRange, ...]:
    return normalize(SlotRange(slot, slot) for slot in slots)


def as_set(ranges: tuple[SlotRange, ...]) -> set[int]:
    return {slot for item in ranges for slot in range(item.start, item.end + 1)}


@given(slot_sets, slot_sets)
def test_range_arithmetic_agrees_with_sets(left: frozenset[int], right: frozenset[int]) -> None:
    a, b = as_ranges(left), as_ranges(right)
    assert as_set(union(a, b)) == left | right
    assert as_set(subtract(a, b)) == left - right
    assert as_set(intersect(a, b)) == left & right
    assert slot_count(a) == len(left)
    assert parse_slot_ranges(format_slot_ranges(a)) == a
    assert all(x.end + 1 < y.start for x, y in itertools.pairwise(a))  # merged and sorted


@given(st.lists(slot_sets, max_size=5))
def test_coverage_agrees_with_counting_every_slot(claims: list[frozenset[int]]) -> None:
    result = coverage(as_ranges(claim) for claim in claims)
    counts = [sum(slot in claim for claim in claims) for slot in range(SLOT_COUNT)]
    assert as_set(result.uncovered) == {slot for slot, count in enumerate(counts) if count == 0}
    assert as_set(result.contested) == {slot for slot, count in enumerate(counts) if count > 1}


def test_coverage_of_an_even_split_is_complete() -> None:
    assert coverage(even_split(3)).complete
    assert not coverage([*even_split(3), (SlotRange(7, 9),)]).complete
    assert coverage([]).uncovered == ALL_SLOTS


@given(st.integers(1, 1000))
def test_even_split_covers_everything_in_near_equal_shares(shards: int) -> None:
    layout = even_split(shards)
    assert coverage(layout).complete
    sizes = [slot_count(share) for share in layout]
    assert max(sizes) - min(sizes) <= 1
    assert [share[0].start for share in layout] == sorted(share[0].start for share in layout)


# --- versions ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "version", "ok"),
    [
        ("9.0.1", (9, 0, 1), True),
        ("9.1.0", (9, 1, 0), True),
        ("10.0.0", (10, 0, 0), True),
        ("9.0.0", (9, 0, 0), False),
        ("8.1.8", (8, 1, 8), False),
        ("9.0", None, False),
        ("9.0.1-rc1", None, False),
        (None, None, False),
    ],
)
def test_versions_parse_strictly_and_compare_with_the_floor(
    text: str | None, version: tuple[int, int, int] | None, ok: bool
) -> None:
    assert parse_version(text) == version
    assert meets_floor(version) is ok


def test_the_version_comes_from_valkey_version_only() -> None:
    assert version_from_info({"valkey_version": "9.0.1", "redis_version": "7.2.4"}) == (9, 0, 1)
    assert version_from_info({"redis_version": "7.2.4"}) is None


# --- replies ---------------------------------------------------------------------------------------------

ME, PRIMARY, DEAD, HANDSHAKE = (
    "07c37dfeb235213a872192d90877d0cd55635b91",
    "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca",
    "292f8b365bb7edb5e285caf0b7e6ddc7265e2f4f",
    "6ec23923021cf3ffec47632106199cb7f496ce01",
)
CLUSTER_NODES = "\n".join(
    [
        f"{ME} 10.0.0.11:6379@16379,vk-0-abcde myself,slave {PRIMARY} 0 1426238317239 4 connected",
        f"{PRIMARY} 10.0.0.10:6379@16379 master - 0 1426238316232 1 connected 0-5460 5462 [5461->-{DEAD}]",
        f"{DEAD} :0@0 master,fail,noaddr - 1426238317741 1426238316232 2 disconnected",
        f"{HANDSHAKE} 10.0.0.14:6379@16379 master,handshake - 0 0 0 connected",
    ]
)


def test_cluster_nodes_lines_parse_into_known_nodes() -> None:
    me, primary, dead, handshake = parse_cluster_nodes(CLUSTER_NODES)
    assert me.myself and me.ip == "10.0.0.11" and me.primary_id == primary.node_id and not me.slots
    assert primary.slots == (SlotRange(0, 5460), SlotRange(5462, 5462)) and primary.connected
    assert dead.failed and dead.ip is None and not dead.connected
    assert handshake.in_handshake
    assert dead.pong_received_ms == 1426238316232 and handshake.pong_received_ms == 0


def test_a_node_observation_knows_peers_but_not_handshakes_or_itself() -> None:
    known = parse_cluster_nodes(CLUSTER_NODES)
    node = NodeObservation(reachable=True, node_id=known[0].node_id, known_nodes=known)
    assert [peer.node_id for peer in node.peers] == [known[1].node_id, known[2].node_id]
    assert node.knows(known[3].node_id) is None
    assert node.handshaking_with("10.0.0.14") and not node.handshaking_with("10.0.0.10")
    assert NodeObservation.unreachable("timeout") == NodeObservation(reachable=False, error="timeout")


def test_a_slot_migration_entry_parses_from_its_reply() -> None:
    entry = {
        "name": b"5371b28997de6fd0bbe813ad8ebdfdf2faadb308",
        "operation": "EXPORT",
        "slot_ranges": "0-10 20-30",
        "target_node": "4b4f12fdfb58d5e30fef7b9ad3f1651dacbbaba9",
        "source_node": "93941e777e17fcbc92d4398cc957ffea888f472b",
        "last_update_time": 1754870400,
        "state": "success",
        "message": "",
    }
    migration = SlotMigration.from_reply(entry)
    assert migration.operation is MigrationOperation.EXPORT
    assert migration.slots == (SlotRange(0, 10), SlotRange(20, 30))
    assert migration.name.startswith("5371") and not migration.active and not migration.failed
    assert SlotMigration.from_reply({**entry, "state": "snapshotting"}).active
    assert SlotMigration.from_reply({**entry, "state": "cancelled"}).failed
    replica_view = SlotMigration.from_reply({**entry, "source_node": "", "target_node": None})
    assert replica_view.source_id is None and replica_view.target_id is None


# --- pods and the desired spec ------------------------------------------------------------------------------


def test_a_pod_from_the_cache() -> None:
    pod = PodObservation.from_pod(
        {
            "metadata": {
                "name": "vk-1-bcdfg",
                "creationTimestamp": "2025-01-01T00:00:03Z",
                "labels": {"valkey.gomomento.com/shard": "1", "valkey.gomomento.com/template-hash": "abc"},
                "deletionTimestamp": "2025-01-01T00:01:00Z",
            },
            "status": {
                "phase": "Running",
                "podIP": "10.0.0.7",
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )
    assert (pod.shard, pod.template_hash, pod.phase, pod.ready, pod.ip) == (
        1,
        "abc",
        PodPhase.RUNNING,
        True,
        "10.0.0.7",
    )
    assert pod.deleting and not pod.live and not pod.never_started
    assert pod.order == ("2025-01-01T00:00:03Z", "vk-1-bcdfg")


def test_a_young_or_odd_pod_is_tolerated() -> None:
    pod = PodObservation.from_pod({"metadata": {"name": "x", "labels": {SHARD_LABEL: "one"}}})
    assert (pod.shard, pod.phase, pod.ready, pod.ip, pod.deleting) == (
        None,
        PodPhase.PENDING,
        False,
        None,
        False,
    )
    assert pod.never_started and pod.live
    odd = PodObservation.from_pod({"metadata": {"name": "y"}, "status": {"phase": "Weird"}})
    assert odd.phase is PodPhase.UNKNOWN


@pytest.mark.parametrize(
    ("annotation", "paused"), [(None, False), ("true", True), ("True", True), ("no", False)]
)
def test_desired_reads_the_spec_and_the_paused_annotation(annotation: str | None, paused: bool) -> None:
    annotations = {} if annotation is None else {"valkey.gomomento.com/paused": annotation}
    cluster = ValkeyCluster.from_dict(
        {
            "metadata": {"name": "vk", "namespace": "a", "annotations": annotations},
            "spec": {"configRef": "c", "shards": 4, "replicasPerShard": 2},
        }
    )
    wanted = Desired.of(cluster, template_hash="h", image="valkey/valkey:9.0.1")
    assert (wanted.shards, wanted.replicas_per_shard, wanted.pods_per_shard, wanted.paused) == (
        4,
        2,
        3,
        paused,
    )


# --- a pod's resources and its in-place resize ---------------------------------------------------


def infeasible(generation: int) -> dict[str, object]:
    condition = {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}
    return {**condition, "observedGeneration": generation}


def resized_pod(**status: object) -> dict[str, object]:
    container = {
        "name": "valkey",
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "512Mi"}},
    }
    return {
        "metadata": {"name": "p", "generation": 3, "labels": {SHARD_LABEL: "0", SHAPE_HASH_LABEL: "s"}},
        "spec": {"containers": [{"name": "exporter"}, container]},
        "status": {"phase": "Running", **status},
    }


def test_a_pods_resize_is_read_from_its_spec_status_and_conditions() -> None:
    pod = PodObservation.from_pod(
        resized_pod(
            observedGeneration=3,
            conditions=[
                {"type": "Ready", "status": "True"},
                infeasible(3),
                {"type": "PodResizeInProgress", "status": "False"},
            ],
            containerStatuses=[
                {
                    "name": "valkey",
                    "allocatedResources": {"cpu": "500m", "memory": "256Mi"},
                    "resources": {
                        "requests": {"cpu": "0.5", "memory": "256Mi"},
                        "limits": {"memory": "268435456"},
                    },
                }
            ],
        )
    )
    resources = pod.resources
    assert pod.shape_hash == "s"
    assert resources.asked == ContainerResources(
        requests={"cpu": "500m", "memory": "512Mi"}, limits={"memory": "512Mi"}
    )
    assert resources.allocated == {"cpu": "500m", "memory": "256Mi"}
    assert resources.running is not None and resources.running.memory_limit == 256 << 20
    assert resources.running.same(
        ContainerResources(requests={"cpu": "500m", "memory": "256Mi"}, limits={"memory": "256Mi"})
    )
    assert (resources.generation, resources.observed_generation) == (3, 3)
    assert resources.pending == "Infeasible" and resources.infeasible
    assert not resources.in_progress  # a False condition is no resize in progress


def test_an_infeasible_verdict_on_an_older_generation_is_not_the_current_asks() -> None:
    pod = PodObservation.from_pod(resized_pod(conditions=[infeasible(2)]))
    assert pod.resources.pending == "Infeasible" and not pod.resources.infeasible


def test_a_pod_not_started_reports_no_allocation() -> None:
    pod = PodObservation.from_pod(resized_pod())
    assert pod.resources.allocated is None and pod.resources.running is None
    assert pod.resources.observed_generation is None and pod.resources.pending is None


def test_quantities_a_runtime_rounds_are_the_same() -> None:
    assert same_quantity("memory", "1G", str(1_000_000_000 // 4096 * 4096))  # whole pages
    assert not same_quantity("memory", "256Mi", "384Mi")
    assert same_quantity("cpu", "0.5", "500m") and not same_quantity("cpu", "500m", "1")
    assert same_quantity("cpu", None, None) and not same_quantity("cpu", "1", None)


def test_a_resize_the_kubelet_fails_to_carry_out_is_read_with_its_time() -> None:
    failing = {
        "type": "PodResizeInProgress",
        "status": "True",
        "reason": "Error",
        "lastTransitionTime": "2026-12-05T10:00:00Z",
    }
    pod = PodObservation.from_pod(resized_pod(conditions=[failing]))
    assert pod.resources.in_progress and pod.resources.failing_since is not None
    assert pod.resources.stuck_since() == pod.resources.failing_since
    normal = PodObservation.from_pod(resized_pod(conditions=[{**failing, "reason": ""}]))
    assert normal.resources.in_progress and normal.resources.stuck_since() is None
