"""Whose history a restore to a moment replays (decision/archive_restore.py): pure rules."""

from __future__ import annotations

from controllers.cluster.decision.archive import NodeProgress
from controllers.cluster.decision.archive_restore import (
    Group,
    Record,
    behind,
    candidates,
    groups_at,
    usable_bases,
)

THREE = {
    "shards": [
        {"slots": "0-5460", "primary": "a", "replicas": ["a2"]},
        {"slots": "5461-10922", "primary": "b", "replicas": ["b2"]},
        {"slots": "10923-16383", "primary": "c", "replicas": []},
    ]
}


def record(at: float, document: object) -> Record:
    parsed = Record.parse(at, document)
    assert parsed is not None
    return parsed


def test_the_record_in_force_at_the_moment_names_the_shards_primary_first() -> None:
    records = [record(100, THREE), record(50, {"shards": [{"slots": "0-16383", "primary": "a"}]})]
    assert groups_at(records, 120) == [
        Group("0-5460", ("a", "a2")),
        Group("5461-10922", ("b", "b2")),
        Group("10923-16383", ("c",)),
    ]
    earlier = groups_at(records, 99)
    assert earlier is not None and earlier[0] == Group("0-16383", ("a",))
    assert all(group.optional for group in earlier[1:]), "b and c appear in the next record: optional"
    assert groups_at(records, 100)[0] == Group("0-5460", ("a", "a2")), "recorded at the moment: in force"
    assert groups_at(records, 49) is None, "nothing recorded that early"


def test_a_shard_named_only_by_the_next_record_is_added_as_optional() -> None:
    # d appeared (a scale-out) and took slots just before the moment; the operator recorded it after.
    four = {"shards": [*THREE["shards"], {"slots": "16000-16383", "primary": "d", "replicas": ["d2"]}]}
    groups = groups_at([record(100, THREE), record(200, four)], 150)
    assert groups is not None and groups[-1] == Group("16000-16383", ("d", "d2"), optional=True)
    assert not any(group.departed for group in groups)


def test_a_shard_no_later_record_names_has_departed() -> None:
    two = {"shards": THREE["shards"][:2]}
    groups = groups_at([record(100, THREE), record(200, two)], 150)
    assert groups is not None and [group.departed for group in groups] == [False, False, True]
    alone = groups_at([record(100, THREE)], 150)
    assert alone is not None and not any(group.departed for group in alone), "no later record: present"


def test_the_primary_is_preferred_and_a_replica_stands_in_when_it_is_behind() -> None:
    group = Group("0-5460", ("a", "a2", "a3"))
    progress = {"a": NodeProgress(200.0), "a2": NodeProgress(90.0), "a3": NodeProgress(160.0)}
    assert candidates(group, progress, 150) == ["a", "a3"]
    progress["a"] = NodeProgress(120.0)  # died at 120: its replica took over
    assert candidates(group, progress, 150) == ["a3"]
    assert candidates(group, {}, 150) == []
    assert "archived until: a 1970-01-01T00:02:00Z, a2 1970-01-01T00:01:30Z" in behind(group, progress, 150)


def test_a_departed_shard_replays_its_node_archived_furthest() -> None:
    group = Group("0-5460", ("a", "a2"), departed=True)
    progress = {"a": NodeProgress(120.0), "a2": NodeProgress(130.0)}
    assert candidates(group, progress, 150) == ["a2", "a"]
    assert candidates(group, {"a": NodeProgress(None)}, 150) == []


def test_a_replay_starts_after_every_gap_from_the_newest_base() -> None:
    assert usable_bases([1, 2, 3, 4], []) == [4, 3, 2, 1]
    assert usable_bases([1, 2, 3, 4], [2]) == [4, 3]
    assert usable_bases([1, 2], [5]) == []


def test_a_record_the_operator_did_not_write_is_ignored() -> None:
    assert Record.parse(1, {"shards": [{"slots": 5, "primary": "a"}]}) is None
    assert Record.parse(1, {"shards": [{"slots": "0-1", "primary": "a", "replicas": [3]}]}) is None
    assert Record.parse(1, ["shards"]) is None
    assert Record.parse(1, {"shards": ["x"]}) is None
