"""The per-reconcile deadline runs on the injected clock, one timer per worker.

Each test runs on a loop whose own clock the test can jump ahead: a deadline
that read the loop's time (loop.time, call_at, asyncio.timeout) would fire on
the jump; one on the FakeClock fires only when the FakeClock is stepped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from test_controller import Hanging

from valkey_operator.core.clock import FakeClock
from valkey_operator.core.controller import Controller
from valkey_operator.core.deadline import WorkerDeadline
from valkey_operator.core.reconcile import Request

HOUR = 3600.0

pytestmark = pytest.mark.timeout(30)


class JumpingLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock a test moves ahead at will (timers scheduled on it come due)."""

    def __init__(self) -> None:
        super().__init__()
        self.ahead = 0.0

    def time(self) -> float:
        return super().time() + self.ahead


def on_jumping_loop(scenario: Callable[[JumpingLoop], Coroutine[Any, Any, None]]) -> None:
    loop = JumpingLoop()
    with asyncio.Runner(loop_factory=lambda: loop) as runner:
        runner.run(scenario(loop))  # no loop timer around it: the jump would fire that too


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


class CountingClock(FakeClock):
    """A FakeClock that counts sleeps: each is one armed timer."""

    def __init__(self) -> None:
        super().__init__()
        self.sleeps = 0

    async def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        await super().sleep(seconds)


def test_a_deadline_fires_when_the_injected_clock_passes_it_not_the_loops() -> None:
    async def scenario(loop: JumpingLoop) -> None:
        clock = FakeClock()
        outcome: list[str] = []

        async def worker() -> None:
            deadline = WorkerDeadline(30, clock)
            deadline.start()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                outcome.append("cancelled" if deadline.expired else "cancelled, not expired")
            finally:
                deadline.finish()
                await deadline.close()

        task = asyncio.create_task(worker())
        await settle()
        assert clock.waiters == 1, "the deadline's timer sleeps on the injected clock"
        loop.ahead += HOUR  # the loop's clock is an hour past the deadline; the FakeClock is not
        await settle()
        assert outcome == [] and not task.done(), "the deadline read the loop's clock"
        clock.step(29.9)
        await settle()
        assert outcome == []
        clock.step(0.1)
        await settle()
        assert outcome == ["cancelled"]
        await task
        assert clock.waiters == 0, "the timer ended with the worker"

    on_jumping_loop(scenario)


def test_a_controller_on_a_fake_clock_cancels_a_late_reconcile_only_when_that_clock_says_so() -> None:
    async def scenario(loop: JumpingLoop) -> None:
        clock = FakeClock()
        reconciler = Hanging()
        controller = Controller(
            "demo", reconciler, clock=clock, registry=CollectorRegistry(), reconcile_timeout=60
        )
        task = asyncio.create_task(controller.run())
        controller.queue.add(Request("stuck"))
        controller.queue.add(Request("next"))
        await settle()
        assert clock.waiters == 1, "the deadline's timer sleeps on the injected clock"
        loop.ahead += HOUR
        await settle()
        assert reconciler.calls == ["stuck"] and reconciler.cancelled == 0
        clock.step(60)
        await settle()
        assert reconciler.cancelled == 1 and reconciler.calls == ["stuck", "next"]
        await controller.shutdown(drain_timeout=0.1)
        await task

    on_jumping_loop(scenario)


def test_one_timer_serves_a_worker_through_many_reconciles() -> None:
    """The performance property: a reconcile only writes its deadline down; no timer per reconcile."""

    async def scenario(loop: JumpingLoop) -> None:
        clock = CountingClock()
        reconciler = Hanging()
        controller = Controller(
            "demo", reconciler, clock=clock, registry=CollectorRegistry(), reconcile_timeout=60
        )
        task = asyncio.create_task(controller.run())
        for index in range(200):
            controller.queue.add(Request(f"quick-{index}"))
        await settle()
        assert len(reconciler.calls) == 200
        assert clock.sleeps == 1, f"{clock.sleeps} timers for 200 reconciles"
        clock.step(60)  # the timer comes due while the worker is idle: it ends, and cancels nothing
        await settle()
        assert clock.waiters == 0
        controller.queue.add(Request("later"))
        await settle()
        assert reconciler.calls[-1] == "later" and not task.done()
        assert clock.sleeps == 2  # the next busy stretch arms it again
        await controller.shutdown(drain_timeout=0.1)
        await task

    on_jumping_loop(scenario)
