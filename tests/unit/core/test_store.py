"""The indexed store: indexes stay exact through add, update, delete and replace."""

from __future__ import annotations

from typing import Any

import pytest

from valkey_operator.core.informer import SharedInformerFactory
from valkey_operator.core.resource import CONFIG_MAPS, SECRETS
from valkey_operator.core.rest import Obj
from valkey_operator.core.store import (
    DeletedFinalStateUnknown,
    Store,
    keep_metadata,
    meta_namespace_key,
    split_meta_namespace_key,
    strip_managed_fields,
    then,
    unwrap_tombstone,
)


def obj(name: str, namespace: str | None = "ns", rv: str = "1", **labels: str) -> Obj:
    metadata: dict[str, Any] = {"name": name, "resourceVersion": rv, "labels": dict(labels)}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}


def by_app(o: Obj) -> list[str]:
    app = o["metadata"]["labels"].get("app")
    return [app] if app else []


def by_tiers(o: Obj) -> list[str]:
    """Multi-valued: a comma-separated label."""
    tiers = o["metadata"]["labels"].get("tiers", "")
    return [t for t in tiers.split(",") if t]


def indexed_store() -> Store:
    return Store(indexers={"app": by_app, "tiers": by_tiers})


def names(objects: list[Obj]) -> list[str]:
    return [o["metadata"]["name"] for o in objects]


def test_meta_namespace_key_for_namespaced_cluster_scoped_and_tombstones() -> None:
    assert meta_namespace_key(obj("a", "ns")) == "ns/a"
    assert meta_namespace_key(obj("img", None)) == "img"
    tombstone = DeletedFinalStateUnknown("ns/gone", obj("gone"))
    assert meta_namespace_key(tombstone) == "ns/gone"
    assert unwrap_tombstone(tombstone)["metadata"]["name"] == "gone"
    assert split_meta_namespace_key("ns/a") == ("ns", "a")
    assert split_meta_namespace_key("img") == (None, "img")
    with pytest.raises(ValueError):
        split_meta_namespace_key("a/b/c")
    with pytest.raises(ValueError):
        meta_namespace_key({"metadata": {}})


def test_add_get_list_and_delete() -> None:
    store = Store()
    stored = store.add(obj("a"))
    store.add(obj("b", "other"))
    assert store.get("ns/a") is stored
    assert store.get(obj("a")) is stored
    assert store.get_by_key("other/b") is not None
    assert sorted(store.list_keys()) == ["ns/a", "other/b"]
    assert sorted(names(store.list())) == ["a", "b"]
    assert len(store) == 2 and "ns/a" in store
    removed = store.delete(obj("a"))
    assert removed is stored
    assert store.get_by_key("ns/a") is None
    assert store.delete(obj("a")) is None
    assert store.delete(DeletedFinalStateUnknown("other/b", obj("b", "other"))) is not None
    assert len(store) == 0


def test_index_follows_add_update_delete() -> None:
    store = indexed_store()
    store.add(obj("a", app="web"))
    store.add(obj("b", app="web"))
    store.add(obj("c", app="db"))
    assert store.index_keys("app", "web") == ["ns/a", "ns/b"]
    assert names(store.by_index("app", "db")) == ["c"]
    assert store.list_index_values("app") == ["db", "web"]

    # Moving a to db must remove its stale web entry.
    store.update(obj("a", rv="2", app="db"))
    assert store.index_keys("app", "web") == ["ns/b"]
    assert store.index_keys("app", "db") == ["ns/a", "ns/c"]

    # Dropping the label leaves the object in no app index at all.
    store.update(obj("b", rv="2"))
    assert store.index_keys("app", "web") == []
    assert store.list_index_values("app") == ["db"], "empty values must disappear"

    store.delete(obj("c"))
    assert store.index_keys("app", "db") == ["ns/a"]
    store.delete(obj("a"))
    assert store.list_index_values("app") == []
    assert store.by_index("app", "db") == []


def test_multi_valued_index_removes_only_values_no_longer_present() -> None:
    store = indexed_store()
    store.add(obj("a", tiers="gold,silver"))
    store.add(obj("b", tiers="silver"))
    assert store.index_keys("tiers", "silver") == ["ns/a", "ns/b"]
    assert store.index_keys("tiers", "gold") == ["ns/a"]

    store.update(obj("a", rv="2", tiers="silver,bronze"))
    assert store.index_keys("tiers", "gold") == []
    assert store.index_keys("tiers", "silver") == ["ns/a", "ns/b"]
    assert store.index_keys("tiers", "bronze") == ["ns/a"]
    assert store.list_index_values("tiers") == ["bronze", "silver"]


def test_replace_rebuilds_items_and_indexes() -> None:
    store = indexed_store()
    store.add(obj("a", app="web"))
    store.add(obj("b", app="web"))
    stored = store.replace([obj("b", rv="5", app="db"), obj("c", rv="5", app="web")], "5")
    assert names(stored) == ["b", "c"]
    assert sorted(store.list_keys()) == ["ns/b", "ns/c"]
    assert store.index_keys("app", "web") == ["ns/c"]
    assert store.index_keys("app", "db") == ["ns/b"]
    assert store.list_resource_version == "5"
    store.replace([], "6")
    assert store.list() == [] and store.list_index_values("app") == []


def test_replace_of_one_namespace_keeps_the_others() -> None:
    """One store fed by one reflector per namespace: a relist of one never drops another's objects."""
    store = indexed_store()
    store.add(obj("a", "team-a", app="web"))
    store.add(obj("b", "team-b", app="web"))
    stored = store.replace([obj("c", "team-a", rv="7", app="db")], "7", namespace="team-a")
    assert names(stored) == ["c"]
    assert sorted(store.list_keys()) == ["team-a/c", "team-b/b"]
    assert store.index_keys("app", "web") == ["team-b/b"]
    assert store.index_keys("app", "db") == ["team-a/c"]
    assert sorted(store.snapshot("team-b")) == ["team-b/b"]
    assert sorted(store.snapshot()) == ["team-a/c", "team-b/b"]


def test_transform_applies_to_add_and_replace() -> None:
    store = Store(transform=strip_managed_fields)
    with_fields = obj("a")
    with_fields["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    stored = store.add(with_fields)
    assert "managedFields" not in stored["metadata"]
    assert "managedFields" not in store.get_by_key("ns/a")["metadata"]  # type: ignore[index]

    listed = obj("b")
    listed["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    store.replace([listed], "9")
    assert "managedFields" not in store.get_by_key("ns/b")["metadata"]  # type: ignore[index]
    final = obj("c")
    final["metadata"]["managedFields"] = []
    assert "managedFields" not in store.transform_object(final)["metadata"]


def test_indexers_added_later_index_existing_objects_and_names_are_unique() -> None:
    store = Store()
    store.add(obj("a", app="web"))
    store.add_indexers({"app": by_app})
    assert store.index_keys("app", "web") == ["ns/a"]
    with pytest.raises(ValueError, match="app"):
        store.add_indexers({"app": by_app})
    with pytest.raises(KeyError, match="nope"):
        store.by_index("nope", "x")


def test_failing_index_function_leaves_object_unindexed_but_stored() -> None:
    def broken(o: Obj) -> list[str]:
        if o["metadata"]["name"] == "bad":
            raise RuntimeError("boom")
        return ["v"]

    store = Store(indexers={"broken": broken})
    store.add(obj("bad"))
    store.add(obj("good"))
    assert store.get_by_key("ns/bad") is not None
    assert store.index_keys("broken", "v") == ["ns/good"]


def test_tombstone_carries_key_and_last_known_state() -> None:
    last = obj("gone", rv="7")
    tombstone = DeletedFinalStateUnknown(key="ns/gone", obj=last)
    assert tombstone.key == "ns/gone"
    assert tombstone.obj is last
    assert tombstone == DeletedFinalStateUnknown("ns/gone", obj("gone", rv="7"))


def test_upsert_returns_the_replaced_object_and_keeps_indexes_exact() -> None:
    store = indexed_store()
    first = obj("a", app="web")
    assert store.upsert(first) == (None, first)
    second = obj("a", rv="2", app="db")
    old, stored = store.upsert(second)
    assert old is first and stored is second
    assert store.index_keys("app", "web") == []
    assert store.index_keys("app", "db") == ["ns/a"]


def test_upsert_applies_the_transform_before_keying() -> None:
    store = Store(transform=strip_managed_fields)
    with_fields = obj("a")
    with_fields["metadata"]["managedFields"] = [{"manager": "x"}]
    old, stored = store.upsert(with_fields)
    assert old is None and "managedFields" not in stored["metadata"]
    assert store.get_by_key("ns/a") is stored


def test_keep_metadata_keeps_only_the_named_fields_and_no_payload() -> None:
    """A Secret applied with client-side kubectl apply: its data is in an annotation too."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "s",
            "namespace": "ns",
            "uid": "u-1",
            "resourceVersion": "7",
            "labels": {"team": "shop"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": '{"data":{"p":"c2VjcmV0"}}'},
            "managedFields": [{"manager": "kubectl"}],
            "ownerReferences": [{"name": "o"}],
        },
        "data": {"p": "c2VjcmV0"},
    }
    store = Store(
        transform=then(
            strip_managed_fields, keep_metadata(("name", "namespace", "uid", "resourceVersion", "labels"))
        )
    )
    stored = store.add(secret)
    assert stored == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "s",
            "namespace": "ns",
            "uid": "u-1",
            "resourceVersion": "7",
            "labels": {"team": "shop"},
        },
    }
    assert "c2VjcmV0" not in repr(store.list())
    assert store.get_by_key("ns/s") == stored
    assert keep_metadata(("name",))({"metadata": None}) == {"metadata": {}}
    assert then(None, None) is None and then(strip_managed_fields, None) is strip_managed_fields


def test_the_factory_narrows_only_the_metadata_only_informers_of_the_kinds_named() -> None:
    factory = SharedInformerFactory(
        None,  # type: ignore[arg-type]  # nothing is listed: only the stores' transforms are read
        metadata_transforms={SECRETS: keep_metadata(("name", "namespace"))},
    )
    secret = {
        "kind": "Secret",
        "metadata": {"name": "s", "namespace": "ns", "annotations": {"a": "b"}},
        "data": {},
    }
    narrowed = factory.informer_for(SECRETS, metadata_only=True).store.transform_object(dict(secret))
    assert narrowed == {"kind": "Secret", "metadata": {"name": "s", "namespace": "ns"}}
    full = factory.informer_for(SECRETS).store.transform_object(dict(secret))
    assert full["metadata"]["annotations"] == {"a": "b"}
    other = factory.informer_for(CONFIG_MAPS, metadata_only=True).store.transform_object(
        {"kind": "ConfigMap", "metadata": {"name": "c", "annotations": {"a": "b"}}}
    )
    assert other["metadata"]["annotations"] == {"a": "b"}
