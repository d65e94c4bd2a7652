"""Injectable time, so anything that waits (queues, backoff, leases) is testable without real sleeping.

Code in the core never calls ``time.monotonic`` or ``asyncio.sleep`` directly for
scheduling; it takes a :class:`Clock`. Production uses :class:`RealClock`; tests
use :class:`FakeClock` and move time by hand.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

__all__ = ["Clock", "FakeClock", "RealClock"]


class Clock(Protocol):
    """Monotonic time source plus a sleep that honours it."""

    def now(self) -> float:
        """Monotonic seconds; only differences are meaningful."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return once ``now()`` has advanced by ``seconds`` (immediately if ``seconds <= 0``)."""
        ...


class RealClock:
    """The wall of the event loop: ``time.monotonic`` and ``asyncio.sleep``."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0))


# Go's time resolution. Deadlines computed as ``now + (t - now)`` can land an ulp past
# ``t``; without this slack a test stepping exactly to ``t`` would leave a sleeper waiting.
_RESOLUTION = 1e-9


class _Sleeper:
    __slots__ = ("deadline", "future", "seq")

    def __init__(self, deadline: float, seq: int, future: asyncio.Future[None]) -> None:
        self.deadline = deadline
        self.seq = seq
        self.future = future


class FakeClock:
    """Time that only moves when a test says so.

    ``sleep`` parks the caller on a future until :meth:`step` (or :meth:`set_time`)
    moves time past its deadline; nothing sleeps for real. Tests synchronise with
    the code under test through :attr:`waiters` / :meth:`wait_for_waiters`, e.g.
    "wait until the backoff loop is sleeping, then step past its deadline".
    Sleepers are woken in deadline order (ties in the order they went to sleep).
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._seq = 0
        self._sleepers: list[_Sleeper] = []
        self._watchers: list[asyncio.Future[None]] = []

    def now(self) -> float:
        return self._now

    def set_time(self, t: float) -> None:
        """Jump to ``t`` (never backwards: the clock is monotonic) and wake due sleepers."""
        if t < self._now:
            raise ValueError(f"FakeClock is monotonic: cannot go back from {self._now} to {t}")
        self._now = t
        self._wake_due()

    def step(self, seconds: float) -> None:
        """Advance time by ``seconds`` and wake every sleeper whose deadline has passed."""
        if seconds < 0:
            raise ValueError(f"cannot step a monotonic clock by {seconds}")
        self.set_time(self._now + seconds)

    async def sleep(self, seconds: float) -> None:
        deadline = self._now + seconds
        if deadline <= self._now + _RESOLUTION:
            # Still a suspension point, as asyncio.sleep(0) is.
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._seq += 1
        sleeper = _Sleeper(deadline, self._seq, future)
        self._sleepers.append(sleeper)
        self._notify_watchers()
        try:
            await future
        finally:
            # On cancellation the sleeper is still registered; drop it so `waiters` stays exact.
            if sleeper in self._sleepers:
                self._sleepers.remove(sleeper)

    @property
    def waiters(self) -> int:
        """How many coroutines are currently parked in :meth:`sleep`."""
        return len(self._sleepers)

    def has_waiters(self) -> bool:
        return bool(self._sleepers)

    def next_deadline(self) -> float | None:
        """The earliest pending sleep deadline, to step exactly to it."""
        return min((s.deadline for s in self._sleepers), default=None)

    async def wait_for_waiters(self, count: int = 1) -> None:
        """Block until at least ``count`` coroutines sleep on this clock.

        Event driven (no polling): a test awaits this, then steps, knowing the code
        under test has reached its sleep.
        """
        while len(self._sleepers) < count:
            watcher: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._watchers.append(watcher)
            try:
                await watcher
            finally:
                if watcher in self._watchers:
                    self._watchers.remove(watcher)

    def _wake_due(self) -> None:
        due = [s for s in self._sleepers if s.deadline <= self._now + _RESOLUTION]
        if not due:
            return
        due.sort(key=lambda s: (s.deadline, s.seq))
        for sleeper in due:
            self._sleepers.remove(sleeper)
            if not sleeper.future.done():
                sleeper.future.set_result(None)

    def _notify_watchers(self) -> None:
        watchers, self._watchers = self._watchers, []
        for watcher in watchers:
            if not watcher.done():
                watcher.set_result(None)
