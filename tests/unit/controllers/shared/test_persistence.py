"""Persistence through the baseRef chain (pure): field by field, defaults at the root, the status.

Admission sees one config at a time; these are the cases only the chain shows.
"""

from __future__ import annotations

from typing import Any

from controllers.config.reconciler import desired_status
from controllers.shared.config_resolve import ResolutionFailure, ResolvedConfig, resolve
from controllers.shared.persistence import NONE, Persistence
from valkey_operator.api.config import Appendfsync, PersistenceMode, ReclaimPolicy, ValkeyConfigStatus

Obj = dict[str, Any]
IMAGES = {"v9": {"metadata": {"name": "v9"}, "spec": {"repository": "r", "tag": "9.1.2", "version": "9.1.2"}}}


def config(name: str, base: str | None = None, **persistence: Any) -> Obj:
    spec: Obj = {"baseRef": base} if base else {"imageRef": "v9"}
    if persistence:
        spec["persistence"] = persistence
    return {"metadata": {"name": name, "generation": 1}, "spec": spec}


def chain(*configs: Obj) -> ResolvedConfig | ResolutionFailure:
    by_name = {c["metadata"]["name"]: c for c in configs}
    return resolve(configs[-1]["metadata"]["name"], by_name.get, IMAGES.get)


def persistence_of(*configs: Obj) -> Persistence:
    resolved = chain(*configs)
    assert isinstance(resolved, ResolvedConfig), resolved
    return resolved.persistence


def test_a_config_without_persistence_is_a_cache() -> None:
    assert persistence_of(config("a")) == NONE
    assert NONE.mode is PersistenceMode.NONE and NONE.size is None and not NONE.enabled


def test_defaults_at_the_root_of_the_chain() -> None:
    found = persistence_of(config("a", mode="aof", size="1Gi"))
    assert found == Persistence(
        mode=PersistenceMode.AOF,
        size="1Gi",
        size_bytes=2**30,
        appendfsync=Appendfsync.EVERYSEC,
        reclaim_policy=ReclaimPolicy.DELETE,
    )


def test_child_overrides_its_base_field_by_field() -> None:
    base = config("base", mode="aof", size="10Gi", storageClassName="slow", reclaimPolicy="Retain")
    assert persistence_of(base, config("leaf", "base", appendfsync="always")) == Persistence(
        mode=PersistenceMode.AOF,
        size="10Gi",
        size_bytes=10 * 2**30,
        storage_class_name="slow",
        appendfsync=Appendfsync.ALWAYS,
        reclaim_policy=ReclaimPolicy.RETAIN,
    )
    grown = persistence_of(base, config("leaf", "base", size=21474836480, storageClassName="fast"))
    assert (grown.size, grown.size_bytes, grown.storage_class_name) == ("21474836480", 20 * 2**30, "fast")
    assert grown.mode is PersistenceMode.AOF


def test_a_child_leaving_aof_drops_the_inherited_appendfsync() -> None:
    """The child cannot unset its base's appendfsync; it only means something with aof."""
    base = config("base", mode="aof", size="10Gi", appendfsync="always")
    rdb = persistence_of(base, config("leaf", "base", mode="rdb"))
    assert (rdb.mode, rdb.appendfsync, rdb.size) == (PersistenceMode.RDB, None, "10Gi")
    assert persistence_of(base, config("leaf", "base", mode="none")) == NONE


def test_a_child_may_turn_persistence_on_over_a_base_that_has_only_a_size() -> None:
    base = config("base", size="3Gi")
    assert persistence_of(base) == NONE
    assert persistence_of(base, config("leaf", "base", mode="rdb")).size == "3Gi"


def test_rdb_or_aof_without_a_size_anywhere_in_the_chain_is_a_failure() -> None:
    outcome = chain(config("base"), config("leaf", "base", mode="rdb"))
    assert isinstance(outcome, ResolutionFailure)
    assert outcome.reason == "PersistenceInvalid"
    assert "leaf -> base" in outcome.message and "persistence.size" in outcome.message


def test_values_admission_would_refuse_are_a_failure_not_a_crash() -> None:
    for bad in (
        {"mode": "both"},
        {"mode": "rdb", "size": "lots"},
        {"mode": "rdb", "size": "1Gi", "reclaimPolicy": "x"},
    ):
        outcome = chain(config("a", **bad))
        assert isinstance(outcome, ResolutionFailure) and outcome.reason == "PersistenceInvalid", bad


def test_settings_hash_moves_with_persistence_and_not_for_a_cache() -> None:
    def settings(*configs: Obj) -> str:
        resolved = chain(*configs)
        assert isinstance(resolved, ResolvedConfig)
        return resolved.settings_hash

    cache = settings(config("a"))
    assert settings(config("a", mode="none", size="1Gi")) == cache
    hashes = {
        cache,
        settings(config("a", mode="rdb", size="1Gi")),
        settings(config("a", mode="rdb", size="2Gi")),
        settings(config("a", mode="aof", size="1Gi")),
        settings(config("a", mode="rdb", size="1Gi", reclaimPolicy="Retain")),
    }
    assert len(hashes) == 5


def test_the_config_status_shows_the_resolved_persistence() -> None:
    base = config("base", mode="aof", size="10Gi")
    leaf = config("leaf", "base", appendfsync="always", reclaimPolicy="Retain")
    status = desired_status(leaf, chain(base, leaf))
    assert status["persistence"] == {
        "mode": "aof",
        "size": "10Gi",
        "appendfsync": "always",
        "reclaimPolicy": "Retain",
    }
    ValkeyConfigStatus.from_dict(status)  # the schema's model reads it
    assert "persistence" not in desired_status(config("a"), chain(config("a")))
