"""The archive's retention lets go of nothing a restore inside the window needs: a node keeps every
sequence from the newest base stored at or before the horizon; a departed node whose history ends
before the horizon goes whole; a node still in the cluster never does."""

from __future__ import annotations

from valkey_operator.archiver import layout
from valkey_operator.archiver.replay import replay_chain
from valkey_operator.archiver.retention import Expired, expired

FOLDER = "team-a/ns/cache/archive"
HORIZON = 10_000.0


def node(name: str, sequences: dict[int, float], progress: float) -> list[tuple[str, int, float]]:
    """Objects of a node: each sequence's base stored at its time, one segment after it, progress.json."""
    objects = [(f"{FOLDER}/{name}/{layout.PROGRESS_NAME}", 40, progress)]
    for seq, stored in sequences.items():
        objects.append((f"{FOLDER}/{name}/" + "/".join(layout.base_name(seq)), 100, stored))
        objects.append((f"{FOLDER}/{name}/" + "/".join(layout.segment_name(seq, 0)), 10, stored + 1))
    return objects


def test_sequences_before_the_newest_base_at_the_horizon_go() -> None:
    listing = node("a", {1: 100.0, 2: 5_000.0, 3: 9_000.0, 4: 12_000.0}, 13_000.0)
    doomed = expired(listing, FOLDER, HORIZON, {"a"})
    assert doomed == Expired(folders=[f"{FOLDER}/a/0000000001", f"{FOLDER}/a/0000000002"])
    kept = [item for item in listing if not any(item[0].startswith(d + "/") for d in doomed.folders)]
    chain = replay_chain([(key, size) for key, size, _ in kept], f"{FOLDER}/a")
    assert chain is not None and chain.base_seq == 3, "a restore at the horizon still has its base"


def test_a_node_without_a_base_at_or_before_the_horizon_keeps_everything() -> None:
    listing = node("a", {1: 10_500.0, 2: 12_000.0}, 13_000.0)
    assert expired(listing, FOLDER, HORIZON, {"a"}) == Expired()


def test_a_departed_node_goes_whole_only_once_its_history_ends_before_the_horizon() -> None:
    gone = node("gone", {1: 100.0}, 9_999.0)
    recent = node("recent", {1: 100.0}, 10_001.0)
    assert expired(gone + recent, FOLDER, HORIZON, set()) == Expired(folders=[f"{FOLDER}/gone"])
    assert not expired(gone, FOLDER, HORIZON, {"gone"}), "a node in the cluster is never dropped whole"


def test_objects_outside_the_folder_or_not_an_archivers_are_left_alone() -> None:
    listing = [
        ("team-a/ns/cache/backup-1/manifest.json", 10, 1.0),
        (f"{FOLDER}/a/notes.txt", 10, 1.0),
        *node("a", {5: 20_000.0}, 20_001.0),
    ]
    assert expired(listing, FOLDER, HORIZON, {"a"}) == Expired()


def test_topology_records_before_the_one_in_force_at_the_horizon_go() -> None:
    records = [
        (f"{FOLDER}/topology/{layout.topology_name(at)}", 100, at) for at in (100, 5_000, 9_000, 12_000)
    ]
    doomed = expired([*records, *node("a", {1: 100.0}, 13_000.0)], FOLDER, HORIZON, {"a"})
    assert doomed == Expired(
        records=[
            f"{FOLDER}/topology/{layout.topology_name(100)}",
            f"{FOLDER}/topology/{layout.topology_name(5_000)}",
        ]
    )
    assert not expired(records[-1:], FOLDER, HORIZON, set()), "no record at or before the horizon: all stay"
