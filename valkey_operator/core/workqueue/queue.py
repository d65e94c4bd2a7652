"""The client-go work queue: deduplicated, fair, and never hands one item to two workers.

Reconcilers are level-based, so ten events for one object need one reconcile, not ten
(the *dirty* set deduplicates), and two reconciles of one object must never run
concurrently (the *processing* set). An item added while it is being processed is
parked in *dirty* and queued again by :meth:`Queue.done`, so the change that arrived
mid-reconcile is never lost. All of it runs on one event loop: no locks.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from valkey_operator.core.workqueue.metrics import NoopQueueMetrics, QueueMetrics

__all__ = ["Queue", "ShutDown"]

T = TypeVar("T", bound=Hashable)


class ShutDown(Exception):
    """Raised by :meth:`Queue.get` once the queue is shut down and empty: the worker should exit."""


class Queue(Generic[T]):
    """FIFO of unique items with client-go ``workqueue.Typed`` semantics.

    * ``add`` of an item already waiting is a no-op (dedup).
    * ``get`` hands out an item and marks it processing until ``done``; an item
      ``add``-ed meanwhile is not given to another worker but re-queued by ``done``.
    * After ``shut_down`` new adds are ignored, ``get`` still returns what is queued
      and raises :class:`ShutDown` once empty.
    """

    def __init__(self, *, metrics: QueueMetrics | None = None) -> None:
        self._metrics: QueueMetrics = metrics if metrics is not None else NoopQueueMetrics()
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._shutting_down = False
        self._drain = False
        self._getters: deque[asyncio.Future[None]] = deque()
        self._drainers: list[asyncio.Future[None]] = []

    def add(self, item: T) -> None:
        """Mark ``item`` as needing processing; see the class docstring for dedup rules."""
        if self._shutting_down or item in self._dirty:
            return
        self._metrics.add(item)
        self._dirty.add(item)
        if item in self._processing:
            return  # done() re-queues it; handing it out now would run it twice at once
        self._queue.append(item)
        self._wake_one_getter()

    async def get(self) -> T:
        """Wait for an item and mark it processing. Raises :class:`ShutDown` when shut down and empty."""
        while not self._queue and not self._shutting_down:
            getter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(getter)
            try:
                await getter
            except asyncio.CancelledError:
                getter.cancel()
                with contextlib.suppress(ValueError):
                    self._getters.remove(getter)
                if self._queue and not getter.cancelled():
                    # We were woken for an item but will not take it: pass the wake-up on.
                    self._wake_one_getter()
                raise
        if not self._queue:
            raise ShutDown
        item = self._queue.popleft()
        self._processing.add(item)
        self._dirty.discard(item)
        self._metrics.get(item)
        return item

    def done(self, item: T) -> None:
        """The worker finished ``item``; queue it again if it was re-added meanwhile."""
        self._metrics.done(item)
        self._processing.discard(item)
        if item in self._dirty:
            self._queue.append(item)
            self._wake_one_getter()
        elif not self._processing:
            self._wake_all(self._drainers)

    def len(self) -> int:
        """Items waiting to be handed out (not those being processed), as client-go's ``Len``."""
        return len(self._queue)

    def __len__(self) -> int:
        return len(self._queue)

    def shut_down(self) -> None:
        """Ignore new adds and wake every blocked ``get`` (they drain what is queued, then raise)."""
        self._drain = False
        self._shutting_down = True
        self._wake_all(self._getters)
        self._wake_all(self._drainers)

    async def shut_down_with_drain(self) -> None:
        """Shut down, then wait until no item is being processed.

        As in client-go, workers keep getting queued items until empty. A concurrent
        :meth:`shut_down` ends the wait early.
        """
        self._drain = True
        self._shutting_down = True
        self._wake_all(self._getters)
        while self._processing and self._drain:
            drainer: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._drainers.append(drainer)
            try:
                await drainer
            finally:
                if drainer in self._drainers:
                    self._drainers.remove(drainer)

    def shutting_down(self) -> bool:
        return self._shutting_down

    def _wake_one_getter(self) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
                return

    @staticmethod
    def _wake_all(futures: deque[asyncio.Future[None]] | list[asyncio.Future[None]]) -> None:
        for future in futures:
            if not future.done():
                future.set_result(None)
        futures.clear()
