"""The cache reader reads registered informers only: a kind nobody registered is an error, not a new watch."""

from __future__ import annotations

from typing import Any

import pytest

from valkey_operator.core.cache import CacheReader, NotCached
from valkey_operator.core.informer import SharedInformerFactory
from valkey_operator.core.resource import CONFIG_MAPS, NAMESPACES, SECRETS


def config_map(namespace: str, name: str, team: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "labels": {"team": team}}}


def test_reads_what_the_registered_informer_holds() -> None:
    factory = SharedInformerFactory(rest=None)  # type: ignore[arg-type]  # never started: no requests
    informer = factory.informer_for(CONFIG_MAPS)
    informer.add_indexers({"by-team": lambda obj: [obj["metadata"]["labels"]["team"]]})
    for namespace, name, team in (("a", "x", "red"), ("a", "y", "blue"), ("b", "x", "red")):
        informer.store.add(config_map(namespace, name, team))
    reader = CacheReader(factory)
    found = reader.get(CONFIG_MAPS, "x", "b")
    assert found is not None and found["metadata"]["namespace"] == "b"
    assert reader.get(CONFIG_MAPS, "z", "a") is None
    assert [obj["metadata"]["name"] for obj in reader.list(CONFIG_MAPS, "a")] == ["x", "y"]
    assert len(reader.list(CONFIG_MAPS)) == 3
    red = reader.by_index(CONFIG_MAPS, "by-team", "red")
    assert {obj["metadata"]["namespace"] for obj in red} == {"a", "b"}


def test_an_unregistered_kind_is_an_error_naming_it_and_starts_nothing() -> None:
    factory = SharedInformerFactory(rest=None)  # type: ignore[arg-type]
    factory.informer_for(SECRETS, metadata_only=True)
    reader = CacheReader(factory)
    with pytest.raises(NotCached, match="secrets"):
        reader.get(SECRETS, "tls", "a")  # only the metadata-only informer exists
    with pytest.raises(NotCached, match="namespaces"):
        reader.list(NAMESPACES)
    assert reader.get(SECRETS, "tls", "a", metadata_only=True) is None
    assert len(factory.informers) == 1
