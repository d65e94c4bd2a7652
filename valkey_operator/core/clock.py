"""Injectable time, so anything that waits (queues, backoff, leases) is testable without real sleeping.

Code in the core never reads time or sleeps directly (``time``, ``datetime.now``,
``asyncio.sleep``); it takes a :class:`Clock`. Production uses :class:`RealClock`; tests
use :class:`FakeClock` and move time by hand.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import time
from collections.abc import Awaitable
from typing import Protocol, TypeVar

T = TypeVar("T")

__all__ = ["Clock", "FakeClock", "RealClock", "micro_time", "parse_rfc3339", "rfc3339", "within"]


class Clock(Protocol):
    """Monotonic time source plus a sleep that honours it."""

    def now(self) -> float:
        """Monotonic seconds; only differences are meaningful."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return once ``now()`` has advanced by ``seconds`` (immediately if ``seconds <= 0``)."""
        ...

    def wall(self) -> float:
        """Seconds since the epoch, for timestamps written to the API (Lease times, Event times)."""
        ...


def rfc3339(seconds: float) -> str:
    """Seconds since the epoch as a Kubernetes Time (RFC 3339, seconds precision, UTC): what
    conditions, status timestamps and annotations carry."""
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str | None) -> float | None:
    """A Kubernetes Time or MicroTime (RFC 3339; UTC when it names no zone) as seconds since the
    epoch; None when absent or unreadable."""
    if not text:
        return None
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def micro_time(clock: Clock) -> str:
    """The clock's wall time as a Kubernetes MicroTime (RFC 3339, microseconds, UTC)."""
    moment = datetime.datetime.fromtimestamp(clock.wall(), datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def within(clock: Clock, seconds: float | None, awaitable: Awaitable[T]) -> T:
    """awaitable's result, or TimeoutError once `seconds` of the clock's time have passed (then it is
    cancelled and awaited); None waits forever. asyncio.timeout on the clock instead of the loop."""
    if seconds is None:
        return await awaitable
    if isinstance(clock, RealClock):
        # The loop's own timer, in the caller's task: no extra tasks on the hot path.
        async with asyncio.timeout(seconds):
            return await awaitable
    work = asyncio.ensure_future(awaitable)
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        work.cancel()
        raise
    finally:
        timer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await timer  # its sleep is unregistered before we return
    if not work.done():
        work.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await work
        raise TimeoutError(f"not done within {seconds}s")
    return work.result()


class RealClock:
    """The wall of the event loop: ``time.monotonic`` and ``asyncio.sleep``."""

    def now(self) -> float:
        """time.monotonic()."""
        return time.monotonic()

    def wall(self) -> float:
        """time.time()."""
        return time.time()

    async def sleep(self, seconds: float) -> None:
        """asyncio.sleep (0 for a negative delay)."""
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

    WALL_AT_ZERO = 1_800_000_000.0
    """The epoch seconds ``wall()`` reports when ``now()`` is 0 (2027-01-15)."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._seq = 0
        self._sleepers: list[_Sleeper] = []
        self._watchers: list[asyncio.Future[None]] = []

    def now(self) -> float:
        """The time set by `start`, `set_time` and `step`; nothing else moves it."""
        return self._now

    def wall(self) -> float:
        """now() plus WALL_AT_ZERO (2027-01-15): fixed timestamps in tests."""
        return self.WALL_AT_ZERO + self._now

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
        """Park until `step` or `set_time` reaches now() + seconds (a bare yield when seconds <= 0)."""
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
        """Whether any coroutine is parked in sleep()."""
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
