"""Selectors and update filters without a server: which informer a builder's selectors make, and
what data_changed passes. The API server's filtering is in
tests/integration/core/test_selector_informers.py."""

from __future__ import annotations

import copy

from prometheus_client import CollectorRegistry

from valkey_operator.core import CONFIG_MAPS, SECRETS, Manager, Result, build_controller
from valkey_operator.core.handler import data_changed, generation_changed
from valkey_operator.core.rest import Obj


class Nothing:
    async def reconcile(self, request: object) -> Result:
        return Result()


def manager() -> Manager:
    return Manager(
        None,  # type: ignore[arg-type]  # never run: no requests
        field_manager="t",
        namespace="app",
        label_selectors={CONFIG_MAPS: "team=red"},
        metrics_bind_address="0",
        health_probe_bind_address="0",
        registry=CollectorRegistry(),
    )


def test_builder_selectors_make_their_own_server_side_selected_informer() -> None:
    built = manager()
    builder = build_controller(built, "mirror").for_(SECRETS, namespace="src", label_selector="mirror=yes")
    builder.owns(SECRETS, namespace="dst", field_selector="type=Opaque").complete(Nothing())
    primary = built.informers.existing(SECRETS, "src", label_selector="mirror=yes")
    owned = built.informers.existing(SECRETS, "dst", field_selector="type=Opaque")
    assert primary is not None and primary.label_selector == "mirror=yes" and primary.field_selector is None
    assert primary.namespaces == ("src",)
    assert owned is not None and owned.field_selector == "type=Opaque" and owned.label_selector is None
    assert built.informers.existing(SECRETS, "src") is None  # no unselected one was made
    assert built.cache.list(SECRETS, "src") == []


def test_the_managers_label_selector_is_the_default_and_a_builder_selector_overrides_it() -> None:
    built = manager()
    default = built.informer(CONFIG_MAPS)
    assert default.label_selector == "team=red"
    assert built.informer(CONFIG_MAPS, label_selector="team=red") is default
    other = built.informer(CONFIG_MAPS, label_selector="team=blue")
    assert other is not default and other.label_selector == "team=blue"
    assert built.informer(CONFIG_MAPS, metadata_only=True).label_selector is None


def secret(**fields: object) -> Obj:
    return {
        "metadata": {"name": "s", "resourceVersion": "1", "labels": {"a": "1"}},
        "data": {"k": "dg=="},
        **fields,
    }


def changed(obj: Obj, **metadata: object) -> Obj:
    new = copy.deepcopy(obj)
    new["metadata"].update(metadata, resourceVersion="2")
    return new


def test_data_changed_passes_what_generation_changed_drops_for_a_secret() -> None:
    old = secret()
    new_data = copy.deepcopy(old)
    new_data["data"]["k"] = "dw=="
    for passed in (
        new_data,
        {**copy.deepcopy(old), "type": "kubernetes.io/tls"},
        changed(old, labels={"a": "2"}),
        changed(old, annotations={"note": "x"}),
        changed(old, deletionTimestamp="2026-12-03T10:00:00Z"),
    ):
        assert data_changed(old, passed), passed
        assert not generation_changed(old, passed) or "deletionTimestamp" in passed["metadata"]
    for dropped in (
        copy.deepcopy(old),  # a relist
        changed(old),
        changed(old, finalizers=["example.com/mirror"]),
        changed(old, managedFields=[{"manager": "x"}]),
        {**changed(old), "status": {"seen": True}},
    ):
        assert not data_changed(old, dropped), dropped


def test_data_changed_passes_a_new_generation() -> None:
    old = {"metadata": {"name": "d", "generation": 1}, "spec": {"replicas": 1}}
    assert data_changed(old, {"metadata": {"name": "d", "generation": 2}, "spec": {"replicas": 1}})
