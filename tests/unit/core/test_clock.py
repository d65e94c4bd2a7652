"""FakeClock must be exact and deterministic: every time-driven test in the core relies on it."""

from __future__ import annotations

import asyncio

import pytest

from valkey_operator.core.clock import Clock, FakeClock, RealClock, within


async def settle(ticks: int = 20) -> None:
    for _ in range(ticks):
        await asyncio.sleep(0)


def test_clocks_satisfy_protocol() -> None:
    clocks: list[Clock] = [RealClock(), FakeClock()]
    assert all(isinstance(c.now(), float) for c in clocks)


def test_fake_now_is_settable_and_monotonic() -> None:
    clock = FakeClock(start=10.0)
    assert clock.now() == 10.0
    clock.step(2.5)
    assert clock.now() == 12.5
    clock.set_time(20.0)
    assert clock.now() == 20.0
    with pytest.raises(ValueError):
        clock.set_time(19.0)
    with pytest.raises(ValueError):
        clock.step(-1.0)
    assert clock.now() == 20.0


async def test_sleep_returns_only_when_time_reaches_deadline() -> None:
    clock = FakeClock()
    task = asyncio.create_task(clock.sleep(5.0))
    await clock.wait_for_waiters(1)
    assert clock.waiters == 1
    assert clock.has_waiters()
    assert clock.next_deadline() == 5.0

    clock.step(4.9)
    await settle()
    assert not task.done()
    assert clock.waiters == 1

    clock.step(0.1)
    await settle()
    assert task.done()
    assert clock.waiters == 0
    assert not clock.has_waiters()


async def test_sleepers_wake_in_deadline_order() -> None:
    clock = FakeClock()
    woke: list[str] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(name)

    tasks = [
        asyncio.create_task(sleeper("c", 3.0)),
        asyncio.create_task(sleeper("a", 1.0)),
        asyncio.create_task(sleeper("b", 2.0)),
    ]
    await clock.wait_for_waiters(3)
    clock.step(1.5)
    await settle()
    assert woke == ["a"]
    clock.step(10.0)
    await asyncio.gather(*tasks)
    assert woke == ["a", "b", "c"]


async def test_non_positive_sleep_does_not_wait_for_step() -> None:
    clock = FakeClock()
    await asyncio.wait_for(clock.sleep(0), timeout=1)
    await asyncio.wait_for(clock.sleep(-3), timeout=1)
    assert clock.waiters == 0


async def test_cancelled_sleep_is_unregistered() -> None:
    clock = FakeClock()
    task = asyncio.create_task(clock.sleep(5.0))
    await clock.wait_for_waiters(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert clock.waiters == 0
    clock.step(10.0)  # nothing left to wake; must not fail


async def test_wait_for_waiters_blocks_until_count_reached() -> None:
    clock = FakeClock()
    waiting = asyncio.create_task(clock.wait_for_waiters(2))
    first = asyncio.create_task(clock.sleep(1.0))
    await settle()
    assert not waiting.done()
    second = asyncio.create_task(clock.sleep(1.0))
    await asyncio.wait_for(waiting, timeout=1)
    clock.step(1.0)
    await asyncio.wait_for(asyncio.gather(first, second), timeout=1)


async def test_deadline_computed_by_difference_is_reached_despite_rounding() -> None:
    # A scheduler computing `sleep(target - now)` must wake when a test steps to `target`.
    clock = FakeClock(start=1e6 + 0.1)
    target = clock.now() + 0.3
    task = asyncio.create_task(clock.sleep(target - clock.now()))
    await clock.wait_for_waiters(1)
    for _ in range(3):
        clock.step(0.1)
    await asyncio.wait_for(task, timeout=1)


async def test_real_clock_is_monotonic_and_sleeps() -> None:
    clock = RealClock()
    before = clock.now()
    await clock.sleep(0)
    await clock.sleep(-1)
    assert clock.now() >= before


async def test_within_bounds_an_awaitable_on_either_clock() -> None:
    async def answer() -> int:
        return 42

    assert await within(RealClock(), 1.0, answer()) == 42
    with pytest.raises(TimeoutError):
        await within(RealClock(), 0.01, asyncio.Event().wait())
    fake = FakeClock()
    waiting = asyncio.ensure_future(within(fake, 5.0, asyncio.Event().wait()))
    await fake.wait_for_waiters()
    fake.step(5.0)
    with pytest.raises(TimeoutError):
        await waiting
    assert fake.waiters == 0
