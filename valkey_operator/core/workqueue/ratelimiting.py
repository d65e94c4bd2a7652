"""A delaying queue whose retries are spaced by a rate limiter: what a controller's workers use.

A failed reconcile calls :meth:`RateLimitingQueue.add_rate_limited`; a successful one
calls :meth:`RateLimitingQueue.forget` so the next failure starts from the base delay.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

from valkey_operator.core.clock import Clock
from valkey_operator.core.workqueue.delaying import DelayingQueue
from valkey_operator.core.workqueue.metrics import QueueMetrics
from valkey_operator.core.workqueue.ratelimiter import RateLimiter, default_controller_rate_limiter

__all__ = ["RateLimitingQueue"]

T = TypeVar("T", bound=Hashable)


class RateLimitingQueue(DelayingQueue[T]):
    """:class:`DelayingQueue` plus a :class:`RateLimiter` (default: the controller default, on ``clock``)."""

    def __init__(
        self,
        rate_limiter: RateLimiter[T] | None = None,
        *,
        clock: Clock | None = None,
        metrics: QueueMetrics | None = None,
    ) -> None:
        super().__init__(clock=clock, metrics=metrics)
        self._rate_limiter: RateLimiter[T] = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter(self.clock)
        )

    @property
    def rate_limiter(self) -> RateLimiter[T]:
        return self._rate_limiter

    def add_rate_limited(self, item: T) -> None:
        """Add ``item`` after the delay the rate limiter assigns to its next retry."""
        self.add_after(item, self._rate_limiter.when(item))

    def forget(self, item: T) -> None:
        """Stop tracking ``item``'s failures (it succeeded or was given up on); does not remove it."""
        self._rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return self._rate_limiter.num_requeues(item)
