"""A controller: event handlers feed keys into a rate-limited queue; N workers reconcile them.

Semantics follow controller-runtime: a key is never reconciled by two workers
at once; an error requeues the key with per-key exponential backoff (and an
overall token bucket); `Result(requeue_after=...)` requeues after that delay
and forgets past failures; a `TerminalError` is reported and not retried
until the object changes again. A reconcile that outlives its deadline is
cancelled, counted as an error and requeued with backoff, so one hung call
never holds a worker.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from prometheus_client import REGISTRY, CollectorRegistry

from valkey_operator.core.clock import Clock, RealClock, within
from valkey_operator.core.deadline import WorkerDeadline
from valkey_operator.core.handler import EnqueueMapped, MapFunc, UpdateFilter
from valkey_operator.core.metrics import controller_metrics
from valkey_operator.core.reconcile import Reconciler, Request, Result, TerminalError
from valkey_operator.core.workqueue import PrometheusQueueMetrics, RateLimiter, RateLimitingQueue, ShutDown

log = structlog.get_logger(__name__)

DEFAULT_RECONCILE_TIMEOUT = 300.0
"""Seconds one reconcile may run before it is cancelled (None: no deadline)."""


class ReconcileTimeout(Exception):
    """The reconcile ran past the controller's deadline and was cancelled."""


class Controller:
    """One reconciler, its queue, and its workers."""

    def __init__(
        self,
        name: str,
        reconciler: Reconciler,
        *,
        workers: int = 1,
        rate_limiter: RateLimiter[Request] | None = None,
        clock: Clock | None = None,
        registry: CollectorRegistry = REGISTRY,
        reconcile_timeout: float | None = DEFAULT_RECONCILE_TIMEOUT,
    ) -> None:
        if workers < 1:
            raise ValueError(f"controller {name}: workers must be >= 1")
        self.name = name
        self.reconciler = reconciler
        self.workers = workers
        self.reconcile_timeout = reconcile_timeout
        clock = clock or RealClock()
        self._clock = clock
        self.queue: RateLimitingQueue[Request] = RateLimitingQueue(
            rate_limiter, clock=clock, metrics=PrometheusQueueMetrics(name, registry, clock=clock)
        )
        self._metrics = controller_metrics(registry)
        self._metrics.init_controller(name, workers)
        # Labelled children looked up once: labels() per reconcile showed in the profile.
        metrics = self._metrics
        self._active = metrics.active_workers.labels(controller=name)
        self._terminal_errors = metrics.terminal_reconcile_errors.labels(controller=name)
        self._reconcile_time = metrics.reconcile_time.labels(controller=name)
        self._errors = metrics.reconcile_errors.labels(controller=name)
        self._outcomes = {
            outcome: metrics.reconcile_total.labels(controller=name, result=outcome)
            for outcome in ("success", "error", "requeue", "requeue_after")
        }
        self._informers: list[Any] = []
        self._worker_tasks: list[asyncio.Task[None]] = []
        self._log = log.bind(controller=name)

    def watch(self, informer: Any, map_fn: MapFunc, update_filter: UpdateFilter | None = None) -> None:
        """Enqueue map_fn(obj) for every event of informer; workers wait for its cache to sync."""
        informer.add_event_handler(EnqueueMapped(self.queue, map_fn, update_filter))
        self._informers.append(informer)

    async def run(self) -> None:
        """Wait for the watched caches, then reconcile until the queue shuts down."""
        for informer in self._informers:
            await informer.wait_for_sync()
        self._log.info("starting workers", workers=self.workers)
        self._worker_tasks = [
            asyncio.create_task(self._work(), name=f"{self.name}-worker-{index}")
            for index in range(self.workers)
        ]
        await asyncio.gather(*self._worker_tasks)

    async def shutdown(self, drain_timeout: float = 30.0) -> None:
        """Stop taking new keys; let in-flight reconciles finish (up to drain_timeout), then cancel."""
        try:
            await within(self._clock, drain_timeout, self.queue.shut_down_with_drain())
        except TimeoutError:
            self._log.warning("drain timed out; cancelling in-flight reconciles", timeout=drain_timeout)
            self.queue.shut_down()
            for task in self._worker_tasks:
                task.cancel()
        await asyncio.gather(*self._worker_tasks, return_exceptions=True)

    async def _work(self) -> None:
        deadline = self._worker_deadline()
        try:
            while True:
                try:
                    request = await self.queue.get()
                except ShutDown:
                    return
                try:
                    await self._reconcile(request, deadline)
                finally:
                    self.queue.done(request)
        finally:
            if deadline is not None:
                await deadline.close()

    def _worker_deadline(self) -> WorkerDeadline | None:
        """One timer per worker on the controller's clock (None: no deadline)."""
        if self.reconcile_timeout is None:
            return None
        return WorkerDeadline(self.reconcile_timeout, self._clock)

    async def _reconcile(self, request: Request, deadline: WorkerDeadline | None) -> None:
        active = self._active
        active.inc()
        started = self._clock.now()
        outcome = "success"
        error: BaseException | None = None
        try:
            result = await self._bounded(request, deadline)
        except TerminalError as exc:
            outcome, error = "error", exc
            self._terminal_errors.inc()
            self.queue.forget(request)
        except Exception as exc:
            outcome, error = "error", exc
            self.queue.add_rate_limited(request)
        else:
            outcome = self._requeue(request, result)
        finally:
            elapsed = self._clock.now() - started
            active.dec()
            self._reconcile_time.observe(elapsed)
        self._outcomes[outcome].inc()
        if error is not None:
            self._errors.inc()
            self._log.error(
                "reconcile failed",
                key=str(request),
                duration=round(elapsed, 4),
                error=f"{type(error).__name__}: {error}",
                terminal=isinstance(error, TerminalError),
                retries=self.queue.num_requeues(request),
                # Where it failed: a bug (NotCached, KeyError) is found from the traceback, not the
                # message; bad input (TerminalError) says all in its message.
                exc_info=None if isinstance(error, TerminalError) else error,
            )
        else:
            self._log.info("reconciled", key=str(request), duration=round(elapsed, 4), result=outcome)

    async def _bounded(self, request: Request, deadline: WorkerDeadline | None) -> Result:
        """The reconcile, cancelled once reconcile_timeout passes on the clock."""
        if deadline is None:
            return await self.reconciler.reconcile(request)
        deadline.start()
        try:
            return await self.reconciler.reconcile(request)
        except asyncio.CancelledError:
            if deadline.expired:
                raise ReconcileTimeout(f"cancelled after {self.reconcile_timeout}s") from None
            raise
        finally:
            deadline.finish()

    def _requeue(self, request: Request, result: Result) -> str:
        if result.requeue_after > 0:
            self.queue.forget(request)
            self.queue.add_after(request, result.requeue_after)
            return "requeue_after"
        if result.requeue:
            self.queue.add_rate_limited(request)
            return "requeue"
        self.queue.forget(request)
        return "success"
