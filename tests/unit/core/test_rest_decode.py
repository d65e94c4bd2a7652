"""Large answers are decoded with the cyclic collector paused, and it always runs again after."""

from __future__ import annotations

import gc

import orjson
import pytest

from valkey_operator.core.rest import LARGE_BODY, decode

LIST = orjson.dumps({"items": [{"metadata": {"name": f"cm-{i}"}, "data": {"k": "v"}} for i in range(20_000)]})


def test_a_large_list_decodes_without_collections_and_the_collector_stays_on() -> None:
    assert len(LIST) >= LARGE_BODY
    collections: list[str] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(phase)

    gc.callbacks.append(count)
    try:
        decoded = decode(LIST)
    finally:
        gc.callbacks.remove(count)
    assert len(decoded["items"]) == 20_000
    assert collections == []
    assert gc.isenabled()


def test_a_broken_large_body_raises_and_leaves_the_collector_on() -> None:
    with pytest.raises(orjson.JSONDecodeError):
        decode(LIST[:-1])
    assert gc.isenabled()


def test_a_process_that_turned_the_collector_off_keeps_it_off() -> None:
    gc.disable()
    try:
        decode(LIST)
        assert not gc.isenabled()
    finally:
        gc.enable()
