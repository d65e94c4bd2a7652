"""The cache reader reads registered informers only: a kind nobody registered is an error, not a new watch."""

from __future__ import annotations

from typing import Any

import pytest

from valkey_operator.core.cache import CacheReader, NotCached
from valkey_operator.core.informer import NAMESPACE_ALL, SharedInformerFactory
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


def test_an_informer_of_another_namespace_than_the_default_is_read() -> None:
    """The embedder's bug: `for_(SECRETS, namespace="src")` on a manager scoped elsewhere was
    registered under ("src",) while the reader looked only under the default scope."""
    factory = SharedInformerFactory(rest=None, namespace="app")  # type: ignore[arg-type]
    factory.informer_for(SECRETS, "src").store.add(config_map("src", "token", "red"))
    reader = CacheReader(factory)
    found = reader.get(SECRETS, "token", "src")
    assert found is not None and found["metadata"]["namespace"] == "src"
    assert reader.get(SECRETS, "other", "src") is None
    assert [obj["metadata"]["name"] for obj in reader.list(SECRETS, "src")] == ["token"]
    assert [obj["metadata"]["name"] for obj in reader.list(SECRETS)] == ["token"]
    with pytest.raises(NotCached) as raised:
        reader.get(SECRETS, "token", "dst")
    message = str(raised.value)
    assert "secrets" in message and "'dst'" in message and "namespace src" in message, message
    assert len(factory.informers) == 1  # the failed read started nothing


def test_reads_span_every_registered_scope_of_a_kind_each_object_once() -> None:
    factory = SharedInformerFactory(rest=None, namespace="a")  # type: ignore[arg-type]
    other = factory.informer_for(CONFIG_MAPS, ["b", "c"])
    everywhere, default = factory.informer_for(CONFIG_MAPS, NAMESPACE_ALL), factory.informer_for(CONFIG_MAPS)
    assert factory.registered(CONFIG_MAPS) == [default, other, everywhere]  # the default scope first
    for informer, (namespace, team) in ((default, ("a", "red")), (other, ("c", "red"))):
        informer.store.add(config_map(namespace, "x", team))
        everywhere.store.add(config_map(namespace, "x", team))
    for informer in (default, other):
        informer.add_indexers({"by-team": lambda obj: [obj["metadata"]["labels"]["team"]]})
    reader = CacheReader(factory)
    assert reader.get(CONFIG_MAPS, "x", "c") is not None
    assert sorted(o["metadata"]["namespace"] for o in reader.list(CONFIG_MAPS)) == ["a", "c"]
    assert [o["metadata"]["namespace"] for o in reader.list(CONFIG_MAPS, "c")] == ["c"]
    red = reader.by_index(CONFIG_MAPS, "by-team", "red")
    assert sorted(o["metadata"]["namespace"] for o in red) == ["a", "c"]
    with pytest.raises(KeyError, match="no-such-index"):
        reader.by_index(CONFIG_MAPS, "no-such-index", "red")
