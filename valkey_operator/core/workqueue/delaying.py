"""A work queue that can also add an item later: how requeue-after and retry backoff happen.

Waiting items sit in a heap of ready times; one background task sleeps on the
injected :class:`~valkey_operator.core.clock.Clock` until the earliest is due and then
``add``-s it, so with a ``FakeClock`` the whole schedule is deterministic.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections.abc import Hashable
from typing import TypeVar

from valkey_operator.core.clock import Clock, RealClock
from valkey_operator.core.workqueue.metrics import QueueMetrics
from valkey_operator.core.workqueue.queue import Queue

__all__ = ["DelayingQueue"]

T = TypeVar("T", bound=Hashable)

_log = logging.getLogger(__name__)


class DelayingQueue(Queue[T]):
    """:class:`Queue` plus :meth:`add_after`.

    The waiting loop is started lazily by the first ``add_after`` with a positive
    delay (so a queue can be built outside a running event loop) and cancelled by
    ``shut_down``; items still waiting then are dropped, as in client-go. If one item
    is scheduled twice, the earlier ready time wins.
    """

    def __init__(self, *, clock: Clock | None = None, metrics: QueueMetrics | None = None) -> None:
        super().__init__(metrics=metrics)
        self._clock: Clock = clock if clock is not None else RealClock()
        # (ready_at, seq, item); entries whose (ready_at, seq) no longer match
        # self._waiting[item] were superseded by an earlier schedule and are skipped.
        self._heap: list[tuple[float, int, T]] = []
        self._waiting: dict[T, tuple[float, int]] = {}
        self._seq = 0
        self._loop_task: asyncio.Task[None] | None = None
        self._wakeup: asyncio.Future[None] | None = None

    @property
    def clock(self) -> Clock:
        return self._clock

    def add_after(self, item: T, delay: float) -> None:
        """Add ``item`` once ``delay`` seconds have passed (now, if ``delay <= 0``)."""
        if self.shutting_down():
            return
        self._metrics.retry()
        if delay <= 0:
            self.add(item)
            return
        ready_at = self._clock.now() + delay
        current = self._waiting.get(item)
        if current is not None and current[0] <= ready_at:
            return
        self._seq += 1
        self._waiting[item] = (ready_at, self._seq)
        heapq.heappush(self._heap, (ready_at, self._seq, item))
        self._ensure_loop()
        if self._heap[0][1] == self._seq and self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)  # new earliest deadline: the loop must re-arm its sleep

    def shut_down(self) -> None:
        self._stop_loop()
        super().shut_down()

    async def shut_down_with_drain(self) -> None:
        self._stop_loop()
        await super().shut_down_with_drain()

    def _ensure_loop(self) -> None:
        if self._loop_task is None or self._loop_task.done():
            self._loop_task = asyncio.get_running_loop().create_task(
                self._waiting_loop(), name="workqueue-waiting-loop"
            )
            self._loop_task.add_done_callback(_log_crash)

    def _stop_loop(self) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()
            self._loop_task = None
        self._heap.clear()
        self._waiting.clear()

    def _add_due(self, now: float) -> None:
        while self._heap and self._heap[0][0] <= now:
            ready_at, seq, item = heapq.heappop(self._heap)
            if self._waiting.get(item) == (ready_at, seq):
                del self._waiting[item]
                self.add(item)

    async def _waiting_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.shutting_down():
            self._add_due(self._clock.now())
            self._wakeup = loop.create_future()
            if not self._heap:
                await self._wakeup
                continue
            target = self._heap[0][0]
            sleeper = loop.create_task(self._clock.sleep(target - self._clock.now()))
            try:
                await asyncio.wait({sleeper, self._wakeup}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not sleeper.done():
                    sleeper.cancel()
                    # Let the clock unregister the sleeper before we look at time again.
                    await asyncio.wait({sleeper})
            if not sleeper.cancelled():
                sleeper.result()  # a failing clock crashes the loop (logged) rather than spinning
                # The sleep ended: `target` is reached even if float rounding says an ulp short.
                self._add_due(max(self._clock.now(), target))


def _log_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        _log.error("workqueue waiting loop crashed", exc_info=task.exception())
