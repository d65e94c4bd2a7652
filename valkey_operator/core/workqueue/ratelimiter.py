"""Rate limiters deciding how long a failed item waits before its retry (client-go semantics).

Per-item exponential backoff keeps one broken object from hot-looping; the overall
token bucket keeps a mass failure (say, the API server briefly down) from turning
into a retry storm. The controller default is the max of both, as in client-go's
``DefaultTypedControllerRateLimiter``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from valkey_operator.core.clock import Clock, RealClock

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "default_controller_rate_limiter",
]

T = TypeVar("T", bound=Hashable)
T_contra = TypeVar("T_contra", bound=Hashable, contravariant=True)


class RateLimiter(Protocol[T_contra]):
    """How long to wait before retrying an item, with per-item failure memory."""

    def when(self, item: T_contra) -> float:
        """Record one more failure of ``item``; return the seconds to wait before its retry."""
        ...

    def forget(self, item: T_contra) -> None:
        """The item succeeded (or was dropped): reset its failure history."""
        ...

    def num_requeues(self, item: T_contra) -> int:
        """How many failures of ``item`` are remembered."""
        ...


class ItemExponentialFailureRateLimiter(Generic[T]):
    """``base_delay * 2**failures`` per item, capped at ``max_delay``."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        if base_delay < 0 or max_delay < 0:
            raise ValueError("delays must be >= 0")
        self._base = base_delay
        self._max = max_delay
        self._failures: dict[T, int] = {}

    def when(self, item: T) -> float:
        exponent = self._failures.get(item, 0)
        self._failures[item] = exponent + 1
        try:
            backoff = math.ldexp(self._base, exponent)
        except OverflowError:
            return self._max
        return min(backoff, self._max)

    def forget(self, item: T) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: T) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter(Generic[T]):
    """Overall token bucket (``golang.org/x/time/rate`` reservation semantics), item-agnostic.

    The bucket starts full (``burst`` tokens) and refills at ``qps``. Each ``when``
    reserves one token, possibly one not yet refilled, and returns how long until it
    is: the 101st immediate call with the defaults waits 0.1 s, the 102nd 0.2 s.
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock | None = None) -> None:
        if qps <= 0:
            raise ValueError("qps must be > 0")
        if burst < 1:
            raise ValueError("burst must be >= 1")
        self._qps = qps
        self._burst = float(burst)
        self._clock: Clock = clock if clock is not None else RealClock()
        self._tokens = self._burst
        self._last: float | None = None

    def when(self, item: T) -> float:
        now = self._clock.now()
        if self._last is not None:
            elapsed = max(now - self._last, 0.0)
            self._tokens = min(self._burst, self._tokens + elapsed * self._qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self._qps

    def forget(self, item: T) -> None:
        pass

    def num_requeues(self, item: T) -> int:
        return 0


class MaxOfRateLimiter(Generic[T]):
    """The longest wait any of the limiters asks for; every limiter sees every failure."""

    def __init__(self, *limiters: RateLimiter[T]) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self._limiters = limiters

    def when(self, item: T) -> float:
        # Evaluate all of them: each records the failure (or reserves a token).
        return max([limiter.when(item) for limiter in self._limiters])

    def forget(self, item: T) -> None:
        for limiter in self._limiters:
            limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return max(limiter.num_requeues(item) for limiter in self._limiters)


def default_controller_rate_limiter(clock: Clock | None = None) -> MaxOfRateLimiter[T]:
    """client-go's default: per-item 5 ms .. 1000 s exponential, max-ed with 10 qps / 100 burst overall."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(qps=10.0, burst=100, clock=clock),
    )
