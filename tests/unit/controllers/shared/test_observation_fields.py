"""The Observation holds only what a pass observed: a fixed list of fields, none of them remembered.

The stored status, the cluster's Memory and rollout admission are the decision's own inputs
(controllers/cluster/decision/context.py). Put back on the Observation, they would make it depend on
what the operator remembers, and the View would copy them again: these tests fail when one is.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import attrs

from controllers.cluster.decision.context import Context
from controllers.cluster.decision.memory import Memory
from controllers.shared import observation as observation_module
from controllers.shared import probe
from controllers.shared.observation import Observation

OBSERVED = frozenset({"pods", "nodes", "objects", "node_zones", "claims", "expandable", "services"})
"""What one pass reads: owned pods and objects, per-pod Services and data claims from the cache, the
nodes' reports, the zones of the Kubernetes nodes hosting pods, and whether the claims' storage
classes expand."""
REMEMBERED = frozenset(field.name for cls in (Context, Memory) for field in attrs.fields(cls))
"""The non-observed inputs of a pass: the pass's time, the stored status, the Memory, admission."""


def beyond_observed(cls: type) -> list[str]:
    """The fields of cls outside the observed list (the allowlist the Observation keeps to)."""
    return sorted({field.name for field in attrs.fields(cls)} - OBSERVED)


def remembered_in(cls: type) -> list[str]:
    """The fields of cls named like a remembered input (no model of an observation has one)."""
    return sorted({field.name for field in attrs.fields(cls)} & REMEMBERED)


def observation_classes() -> list[type]:
    return [
        cls
        for _, cls in inspect.getmembers(observation_module, inspect.isclass)
        if attrs.has(cls) and cls.__module__ == observation_module.__name__
    ]


def test_the_observation_has_exactly_the_observed_fields() -> None:
    assert {field.name for field in attrs.fields(Observation)} == OBSERVED
    assert beyond_observed(Observation) == []


def test_no_model_of_the_observation_carries_a_stored_status_or_memory_field() -> None:
    classes = observation_classes()
    assert {"Observation", "NodeObservation", "PodObservation", "ClaimObservation"} <= {
        cls.__name__ for cls in classes
    }
    for cls in classes:
        assert remembered_in(cls) == [], cls.__name__
    assert {"recorded_state", "may_roll", "awaiting", "refusals", "now", "expected"} <= REMEMBERED


def test_the_check_catches_a_remembered_field_put_back() -> None:
    for name in ("recorded_state", "recorded_tls", "may_roll", "refusals", "awaiting", "now"):
        widened = attrs.make_class("Widened", {"pods": attrs.field(), name: attrs.field(default=None)})
        assert beyond_observed(widened) == [name] and remembered_in(widened) == [name]
    node = attrs.make_class("Node", {"reachable": attrs.field(), "claim_until": attrs.field(default=None)})
    assert remembered_in(node) == ["claim_until"]


def test_the_probe_reads_no_clock() -> None:
    """An observation is stamped by nobody: the pass's time is Facts.now (Context.now)."""
    source = Path(probe.__file__).read_text()
    calls = {
        node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
    }
    assert not calls & {"time", "now", "monotonic"}, calls & {"time", "now", "monotonic"}
