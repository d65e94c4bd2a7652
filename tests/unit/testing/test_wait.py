"""The one polling helper of tests and benchmarks: returns what held, explains what never did."""

from __future__ import annotations

import itertools
import time

import pytest

from valkey_testbed.wait import NotYet, WaitTimeout, eventually, eventually_blocking


async def test_returns_the_first_truthy_value_of_an_async_check() -> None:
    counter = itertools.count()

    async def third() -> int | None:
        value = next(counter)
        return value if value >= 2 else None

    assert await eventually(third, "the third call", 5, interval=0.001) == 2


async def test_plain_checks_are_called_on_the_loop() -> None:
    calls = itertools.count(1)
    assert await eventually(lambda: next(calls) >= 3, "three calls", 5, interval=0.001) is True


async def test_a_timeout_names_what_was_awaited_and_the_last_value_seen() -> None:
    seen = itertools.count()
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as caught:
        await eventually(
            lambda: NotYet({"state": f"Creating {next(seen)}"}), "the cluster Active", 0.2, interval=0.01
        )
    elapsed = time.monotonic() - started
    message = str(caught.value)
    assert message.startswith("timed out after 0.2s waiting for the cluster Active")
    checks = next(seen)
    assert f"({checks} checks); last value: {{'state': 'Creating {checks - 1}'}}" in message
    assert 0.2 <= elapsed < 2.0
    assert isinstance(caught.value, AssertionError)


async def test_ignored_exceptions_are_retried_and_the_last_one_reported() -> None:
    async def refused() -> bool:
        raise ConnectionRefusedError("node 127.0.0.9 refused")

    with pytest.raises(WaitTimeout, match=r"last error: ConnectionRefusedError\('node 127.0.0.9 refused'\)"):
        await eventually(refused, "a PONG", 0.05, interval=0.01, ignore=(OSError,))


async def test_other_exceptions_propagate_at_once() -> None:
    calls = itertools.count(1)

    def broken() -> bool:
        next(calls)
        raise KeyError("status")

    with pytest.raises(KeyError):
        await eventually(broken, "a status", 5, ignore=(OSError,))
    assert next(calls) == 2, "checked exactly once"


async def test_a_spent_timeout_still_checks_once() -> None:
    assert await eventually(lambda: "done", "an immediate answer", -1) == "done"
    with pytest.raises(WaitTimeout, match=r"\(1 checks\); last value: False"):
        await eventually(lambda: False, "a miracle", 0)


def test_the_blocking_variant_waits_and_explains_the_same_way() -> None:
    calls = itertools.count()
    assert eventually_blocking(lambda: next(calls) == 3, "the fourth call", 5, interval=0.001) is True
    with pytest.raises(WaitTimeout, match=r"waiting for cluster_state:ok .*last value: b'fail'"):
        eventually_blocking(lambda: NotYet(b"fail"), "cluster_state:ok", 0.05, interval=0.01)
