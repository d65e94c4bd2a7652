"""The reconciler's record of its own status writes the cache has not shown yet (pure)."""

from __future__ import annotations

from controllers.cluster.written import WrittenStatuses


def cluster(version: str, status: dict | None = None) -> dict:
    return {"metadata": {"name": "c", "resourceVersion": version}, "status": status or {}}


def test_a_cache_still_at_the_written_version_reads_as_the_written_status() -> None:
    written = WrittenStatuses()
    rolling = cluster("10", {"state": "Updating", "rollout": {"shardsUpdated": 2}})
    written.wrote("ns/c", rolling, cluster("11", {"state": "Active"}))
    assert written.ours("ns/c", rolling) == {"state": "Active"}  # stale cache: no second finish
    assert written.ours("ns/other", cluster("10", {"state": "Creating"})) is None  # the cached one


def test_any_other_version_in_the_cache_wins_and_ends_the_record() -> None:
    written = WrittenStatuses()
    rolling = cluster("10", {"rollout": {}})
    written.wrote("ns/c", rolling, cluster("11", {"state": "Active"}))
    newer = cluster("12", {"state": "Failed"})  # someone wrote after us: versions are never ordered
    assert written.ours("ns/c", newer) is None  # the cached one wins
    assert written.ours("ns/c", rolling) is None  # the record is gone once passed


def test_forgetting_a_deleted_cluster_drops_its_record() -> None:
    written = WrittenStatuses()
    rolling = cluster("10", {"rollout": {}})
    written.wrote("ns/c", rolling, cluster("11", {}))
    written.forget("ns/c")
    assert written.ours("ns/c", rolling) is None


def test_ours_is_only_the_write_the_cache_has_not_shown() -> None:
    """The reconciler parses only this one (the cached status comes parsed with the cluster)."""
    written = WrittenStatuses()
    rolling = cluster("10", {"state": "Updating"})
    assert written.ours("ns/c", rolling) is None
    written.wrote("ns/c", rolling, cluster("11", {"state": "Active"}))
    assert written.ours("ns/c", rolling) == {"state": "Active"}
    assert written.ours("ns/c", cluster("11", {"state": "Active"})) is None  # the cache caught up
    assert written.ours("ns/c", rolling) is None  # and the record is gone
