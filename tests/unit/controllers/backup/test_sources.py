"""Which node each shard's RDB comes from, and when a cluster may be backed up (pure)."""

from __future__ import annotations

import attrs
import observed

from controllers.backup.sources import IN_SYNC_BYTES, NotSettled, sources
from controllers.shared.observation import NodeObservation, Observation
from valkey_operator.api.cluster import NodeRole
from valkey_operator.valkey.replies import MigrationOperation, SlotMigration
from valkey_operator.valkey.slots import even_split

LAYOUT = even_split(3)


def primary(shard: int, offset: int = 1000) -> NodeObservation:
    return observed.primary(
        f"p{shard}", slots=LAYOUT[shard], ok=None, version=None, repl_offset=offset, version_text="9.1.2"
    )


def replica(shard: int, offset: int, link_up: bool = True) -> NodeObservation:
    return observed.replica(
        f"r{shard}", f"p{shard}", offset=offset, link_up=link_up, version=None, version_text="9.1.2"
    )


def cluster(nodes: dict[str, NodeObservation]) -> Observation:
    pods = tuple(
        observed.pod(name, int(name[1]), f"127.0.0.{i + 2}", template="h", created="2026-12-03T00:00:00Z")
        for i, name in enumerate(sorted(nodes))
    )
    return Observation(pods=pods, nodes=nodes)


def test_each_shard_is_read_from_its_in_sync_replica() -> None:
    found = sources(
        cluster({f"p{s}": primary(s) for s in range(3)} | {f"r{s}": replica(s, 990) for s in range(3)})
    )
    assert not isinstance(found, NotSettled)
    assert [(s.index, s.pod, s.role) for s in found] == [(i, f"r{i}", NodeRole.REPLICA) for i in range(3)]
    assert [s.slots for s in found] == list(LAYOUT)
    assert found[0].slots_text == "0-5460"


def test_a_shard_without_an_in_sync_replica_is_read_from_its_primary() -> None:
    nodes = {f"p{s}": primary(s, offset=10 * IN_SYNC_BYTES) for s in range(3)}
    nodes |= {"r0": replica(0, 0), "r1": replica(1, 10 * IN_SYNC_BYTES, link_up=False)}
    found = sources(cluster(nodes))
    assert not isinstance(found, NotSettled)
    assert [(s.pod, s.role) for s in found] == [
        ("p0", NodeRole.PRIMARY),
        ("p1", NodeRole.PRIMARY),
        ("p2", NodeRole.PRIMARY),
    ]


def test_not_settled_while_a_slot_is_unserved_a_node_is_unreachable_or_a_migration_runs() -> None:
    nodes = {f"p{s}": primary(s) for s in range(2)}
    assert isinstance(sources(cluster(nodes)), NotSettled)
    nodes = {f"p{s}": primary(s) for s in range(3)} | {"r0": NodeObservation.unreachable("refused")}
    assert isinstance(sources(cluster(nodes)), NotSettled)
    job = SlotMigration(
        name="j",
        operation=MigrationOperation.EXPORT,
        slots=LAYOUT[0],
        source_id="p0",
        target_id="p1",
        state="syncing",
    )
    nodes = {f"p{s}": primary(s) for s in range(3)}
    busy = {**nodes, "p0": attrs.evolve(nodes["p0"], migrations=(job,))}
    assert isinstance(sources(cluster(busy)), NotSettled)
    unknown = {**nodes, "p0": attrs.evolve(nodes["p0"], migrations=None)}
    assert isinstance(sources(cluster(unknown)), NotSettled)
    done = {**nodes, "p0": attrs.evolve(nodes["p0"], migrations=(attrs.evolve(job, state="success"),))}
    assert not isinstance(sources(cluster(done)), NotSettled), "a finished job in the log is history"
