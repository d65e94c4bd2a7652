"""The status merge patch removes dropped keys at any depth and is None when nothing changed."""

from __future__ import annotations

from controllers.status import merge_diff, status_patch


def test_equal_status_gives_no_patch() -> None:
    status = {"phase": "Ready", "restore": {"phase": "Done", "source": "b1"}, "nodes": [1, 2]}
    assert status_patch(status, dict(status)) is None


def test_dropped_nested_key_becomes_null() -> None:
    current = {"phase": "Ready", "restore": {"phase": "Done", "source": "b1"}}
    desired = {"phase": "Ready", "restore": {"phase": "Done"}}
    assert status_patch(current, desired) == {"status": {"restore": {"source": None}}}


def test_dropped_top_level_key_becomes_null() -> None:
    assert status_patch({"a": 1, "b": {"c": 2}}, {"a": 1}) == {"status": {"b": None}}


def test_lists_are_replaced_whole() -> None:
    current = {"nodes": [{"name": "a", "role": "primary"}, {"name": "b"}]}
    desired = {"nodes": [{"name": "a"}]}
    assert merge_diff(current, desired) == {"nodes": [{"name": "a"}]}


def test_changed_and_added_keys_are_sent_deeply() -> None:
    current = {"s": {"x": {"y": 1, "z": 2}}}
    desired = {"s": {"x": {"y": 3, "z": 2}, "new": True}}
    assert merge_diff(current, desired) == {"s": {"x": {"y": 3}, "new": True}}


def test_object_replacing_scalar_is_sent_whole() -> None:
    assert merge_diff({"a": 1}, {"a": {"b": 2}}) == {"a": {"b": 2}}
