"""decide() restoring a backup (spec.restore, SPEC 1.7), on the simulator.

The simulated server does what a real one does with a restored RDB: it starts
with the shard's keys loaded (INFO's count) and takes the slots holding them.
The stories check the operator's side: the backup's layout first, primaries
only, every new pod carrying the init container for its shard; no slot given
to anyone before every shard loaded (a slot with keys must stay with the node
that loaded them); never Active before every count matched; then the spec's
shards and replicas through the ordinary paths. A bad source holds the restore
with nothing created; a failed download or a count that differs holds it too.
"""

from __future__ import annotations

import attrs
import pytest
from decide_harness import World, config, run, world
from restore_support import FETCH, backup, source
from simulate import SimSettings

from controllers.cluster.decision.actions import AssignSlots, CreatePod, MigrateSlots
from controllers.cluster.decision.restore import RestoreHeld, RestoreSource
from controllers.cluster.render.restore import ArchiveShard
from valkey_operator.api.backup import RestorePhase, RestoreStatus
from valkey_operator.api.cluster import ClusterState
from valkey_operator.valkey.slots import (
    SlotRange,
    SlotRanges,
    even_split,
    format_slot_ranges,
    subtract,
    union,
)

ACTIVE = ClusterState.ACTIVE


def restoring(shards: int, replicas: int, layout: tuple[SlotRanges, ...], **sim: object) -> World:
    saved = backup(layout)
    found = world(
        shards,
        replicas,
        SimSettings(cluster="vk", backup=saved, **sim),  # type: ignore[arg-type]
        restore={"backupName": "nightly"},
    )
    found.restore = source(saved)
    return found


def restore_phase(found: World) -> str | None:
    """The phase as stored (the world keeps the status the reconciler would write)."""
    return (found.status.get("restore") or {}).get("phase")


def restore_phase_of(restore: RestoreStatus | None) -> RestorePhase | None:
    return restore.phase if restore is not None else None


def check_restore(found: World, layout: tuple[SlotRanges, ...]) -> None:
    """Until Verified: primaries only, at the backup's layout, each created with its init container;
    no slot assigned before every shard loaded; never Active. At Verified each loaded node still owns
    the slots it loaded."""
    saved = backup(layout)
    for decision in found.decisions:
        restore = decision.status.restore
        if restore is not None and restore.phase is RestorePhase.VERIFIED:
            break
        assert decision.status.state is not ACTIVE, decision.status.message
        for action in decision.actions:
            if isinstance(action, CreatePod):
                assert action.shard < len(layout)
                init = action.body["spec"]["initContainers"] if action.body else []
                assert [c["name"] for c in init] == ["restore"], action
                args = init[0]["args"]
                assert args[args.index("--key") + 1] == f"ns/old/nightly/shard-{action.shard}.rdb"
                assert {e["name"] for e in init[0]["env"]} == {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
            if isinstance(action, AssignSlots):
                progress = decision.plan.view.restore_progress if decision.plan else None
                assert progress is not None and progress.all_loaded, "no slot assigned before every load"
    verified = next(
        (
            d.status.restore
            for d in found.decisions
            if restore_phase_of(d.status.restore) is RestorePhase.VERIFIED
        ),
        None,
    )
    assert verified is not None, found.status.get("restore")
    assert verified.keys == sum(keys for keys, _ in saved.values())
    assert verified.loaded_keys == verified.keys


def loaders(found: World) -> dict[int, str]:
    """backup shard -> the node id that loaded it."""
    return {
        pod.restores: pod.node_id
        for pod in found.sim.pods.values()
        if pod.restores is not None and pod.node_id is not None
    }


@pytest.mark.parametrize(("shards", "replicas"), [(3, 1), (5, 1), (2, 0)])
def test_a_restore_loads_the_backup_layout_then_becomes_the_spec(shards: int, replicas: int) -> None:
    layout = even_split(3)
    found = restoring(shards, replicas, layout)
    run(found, passes=300)
    assert found.state == ACTIVE, found.status.get("message")
    assert restore_phase(found) == "Verified"
    check_restore(found, layout)
    assert len(loaders(found)) == min(3, shards), "a loaded shard scaled away is drained, then removed"
    served = found.sim.served()
    assert len(served) == shards and union(*served.values()) == even_split(1)[0]
    assert len(found.sim.pods) == shards * (1 + replicas)
    assert found.status["restore"]["shards"] == 3


def test_slots_loaded_outside_the_standard_layout_stay_with_the_node_that_loaded_them() -> None:
    # The backup was taken after scaling moved slots: shard 0 holds some of what shard 1 would get.
    standard = even_split(3)
    moved = (SlotRange(5461, 6000),)
    layout = (union(standard[0], moved), subtract(standard[1], moved), standard[2])
    found = restoring(3, 0, layout, ready_delays=(1, 6, 3))  # shard 1's loader starts last
    run(found, passes=300, until=lambda w: restore_phase(w) == "Verified")
    assert restore_phase(found) == "Verified", found.status.get("restore")
    check_restore(found, layout)
    owners = loaders(found)
    _, holding = backup(layout)[0]
    assert not subtract(holding, found.sim.nodes[owners[0]].slots), "shard 0 keeps every slot it loaded"
    run(found, passes=300)
    assert found.state == ACTIVE, found.status.get("message")


def test_a_count_that_differs_holds_the_restore_and_the_cluster_is_never_active() -> None:
    layout = even_split(2)
    found = restoring(2, 0, layout)
    found.restore = source({**backup(layout), 1: (5, backup(layout)[1][1])})  # the manifest says 5 keys
    run(found, passes=25, until=lambda w: False)
    assert restore_phase(found) == "Held", found.status.get("restore")
    assert found.status["restore"]["reason"] == "RestoreIncomplete"
    assert "shard 1 loaded 1001 keys, the backup holds 5" in found.status["restore"]["message"]
    assert all(d.status.state is not ACTIVE for d in found.decisions)
    assert not any(isinstance(a, AssignSlots) for d in found.decisions for a in d.actions)


def test_a_failed_download_holds_the_restore_with_the_pods_failure() -> None:
    found = restoring(2, 0, even_split(2), failing_restores=frozenset({1}))
    run(found, passes=30, until=lambda w: False)
    assert restore_phase(found) == "Held", found.status.get("restore")
    assert all(d.status.state is not ACTIVE for d in found.decisions)
    created = [a for d in found.decisions for a in d.actions if isinstance(a, CreatePod) and a.shard == 1]
    assert 1 < len(created) <= 3, "the failing shard is retried, then left failing (a crash loop)"


def test_a_source_that_cannot_be_read_holds_the_restore_and_creates_nothing() -> None:
    found = restoring(2, 1, even_split(2))
    found.restore = RestoreHeld("BackupNotFound", "ValkeyBackup ns/nightly not found")
    run(found, passes=5, until=lambda w: False)
    assert all(not d.actions for d in found.decisions)
    assert found.status["restore"] == {
        "backupName": "nightly",
        "phase": "Held",
        "reason": "BackupNotFound",
        "message": "ValkeyBackup ns/nightly not found",
    }
    assert found.state != ACTIVE
    found.restore = source(backup(even_split(2)))  # the backup appears: the restore goes on
    run(found, passes=300)
    assert found.state == ACTIVE and restore_phase(found) == "Verified"


def test_the_newest_scheduled_backup_is_status_last_backup() -> None:
    found = world(1, 0)
    run(found, passes=60)
    assert "lastBackup" not in found.status
    found.last_backup = "vk-20261203030000"
    run(found, passes=2, until=lambda w: False)
    assert found.status["lastBackup"] == "vk-20261203030000"


def test_no_slot_moves_while_a_backup_of_the_cluster_runs() -> None:
    found = world(2, 0)
    run(found, passes=80)
    found.edit(shards=3)
    found.backup_running = True
    since = len(found.decisions)
    run(found, passes=15, until=lambda w: False)
    assert not any(isinstance(a, MigrateSlots) for d in found.decisions[since:] for a in d.actions)
    assert found.state != ACTIVE, "the scale waits"
    found.backup_running = False
    run(found, passes=200)
    assert found.state == ACTIVE and len(found.sim.served()) == 3


MOMENT = "2026-12-06T07:00:00Z"
ARCHIVE = {
    "pointInTime": MOMENT,
    "clusterName": "old",
    "destination": {"endpoint": "http://127.0.0.1:7070", "bucket": "backups", "credentialsSecretName": "s3"},
}


def to_a_moment(shards: int, replicas: int, layout: tuple[SlotRanges, ...], mode: str = "aof") -> World:
    """A cluster restoring the archive of a len(layout)-shard cluster to MOMENT; each history loads
    the keys backup(layout) gives its shard (the simulator's server counts them as it holds them)."""
    saved = backup(layout)
    found = world(shards, replicas, SimSettings(cluster="vk", backup=saved), restore=ARCHIVE)
    found.configs["cfg"] = config(persistence={"mode": mode, "size": "1Gi"})
    found.restore = RestoreSource(
        label=f"cluster old at {MOMENT}",
        shards=tuple(
            ArchiveShard(
                index=index,
                node=f"node-{index}",
                folder=f"vk/ns/old/archive/node-{index}",
                base_seq=3,
                slots=format_slot_ranges(slots),
            )
            for index, slots in enumerate(layout)
        ),
        fetch=attrs.evolve(FETCH, until=1_796_540_400),
    )
    return found


def test_a_restore_to_a_moment_loads_each_history_reports_its_keys_then_becomes_the_spec() -> None:
    layout = even_split(3)
    found = to_a_moment(2, 1, layout)
    run(found, passes=300)
    assert found.state == ACTIVE, found.status.get("message")
    restore = found.status["restore"]
    assert (restore["phase"], restore["pointInTime"], restore["shards"]) == ("Verified", MOMENT, 3), restore
    assert "keys" not in restore, "a history counts nothing ahead"
    assert restore["loadedKeys"] == sum(keys for keys, _ in backup(layout).values())
    assert "(keys loaded: shard 0 1000, shard 1 1001, shard 2 1002)" in restore["message"], restore
    loading = set()
    for decision in found.decisions:
        for action in decision.actions:
            if isinstance(action, CreatePod) and action.body and action.shard < 3:
                init = action.body["spec"].get("initContainers", [])
                if init and init[0]["name"] == "restore":
                    args = init[0]["args"]
                    assert args[args.index("--archive") + 1] == f"vk/ns/old/archive/node-{action.shard}"
                    assert (args[args.index("--base-seq") + 1], args[args.index("--until") + 1]) == (
                        "3",
                        "1796540400",
                    )
                    assert "--key" not in args and args[args.index("--layout") + 1] == "aof"
                    loading.add(action.shard)
    assert loading == {0, 1, 2}, "every shard's first pod loads its history"
    assert len(found.sim.served()) == 2 and len(found.sim.pods) == 4


def test_a_restore_to_a_moment_into_a_cluster_without_append_only_files_is_held() -> None:
    found = to_a_moment(2, 0, even_split(2), mode="rdb")
    run(found, passes=5, until=lambda w: False)
    assert all(not d.actions for d in found.decisions)
    restore = found.status["restore"]
    assert (restore["phase"], restore["reason"], restore["pointInTime"]) == (
        "Held",
        "NeedsAppendOnly",
        MOMENT,
    )
    assert "needs persistence mode aof; the config runs rdb" in restore["message"]
