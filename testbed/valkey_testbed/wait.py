"""Waiting on the real world in tests and benchmarks: poll a check until it holds, or say what never did.

Tests and benchmarks talk to a real API server and real Valkey servers, so
much of their time is spent on "poll until X". One helper does that for every
test module, benchmark and plugin user, so that a timeout always explains
itself: what was awaited, for how long, how often it was checked, and the last
value (or exception) the check gave.

    await eventually(lambda: active(kube, "demo"), "demo Active", timeout=180)

A check returns something truthy when the wait is over (that value is
returned) and anything falsy otherwise; return `NotYet(seen)` to have `seen`
shown on timeout. Exceptions propagate at once unless their type is in
`ignore`, in which case the check is retried and the last one is reported.
`eventually` awaits async checks and calls plain ones on the event loop;
`eventually_blocking` is the same loop for synchronous code.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeGuard, TypeVar, overload

import attrs

__all__ = ["NotYet", "WaitTimeout", "eventually", "eventually_blocking"]

T = TypeVar("T")
Ignored = tuple[type[BaseException], ...]

DEFAULT_TIMEOUT = 30.0
DEFAULT_INTERVAL = 0.25
_SHOWN = 1500
"""Characters of the last value or error kept in a timeout message."""


class WaitTimeout(AssertionError):
    """A check never held in time; the message names what was awaited and what was seen last.

    An AssertionError, so pytest reports it as a failed expectation, not a crash."""


@attrs.frozen
class NotYet:
    """A falsy check result that carries what the check saw, for the timeout message."""

    seen: object

    def __bool__(self) -> bool:
        return False


class _Attempts:
    """One wait's bookkeeping, shared by the async and the blocking loop."""

    def __init__(self, what: str, timeout: float) -> None:
        self.what = what
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.count = 0

    def over(self, value: T | NotYet | None) -> TypeGuard[T]:
        """True when value ends the wait; raises WaitTimeout when it does not and time is up."""
        if value:
            return True
        self._next(f"last value: {value.seen if isinstance(value, NotYet) else value!r}")
        return False

    def failed(self, error: BaseException) -> None:
        """An ignored exception: retry, unless time is up."""
        self._next(f"last error: {error!r}")

    def _next(self, last: str) -> None:
        self.count += 1
        if time.monotonic() >= self.deadline:
            shown = last if len(last) <= _SHOWN else last[:_SHOWN] + "..."
            raise WaitTimeout(
                f"timed out after {self.timeout:.1f}s waiting for {self.what} ({self.count} checks); {shown}"
            )


@overload
async def eventually(
    check: Callable[[], Awaitable[T | NotYet | None]],
    what: str,
    timeout: float = ...,
    *,
    interval: float = ...,
    ignore: Ignored = ...,
) -> T: ...


@overload
async def eventually(
    check: Callable[[], T | NotYet | None],
    what: str,
    timeout: float = ...,
    *,
    interval: float = ...,
    ignore: Ignored = ...,
) -> T: ...


async def eventually(
    check: Callable[[], Any],
    what: str,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    interval: float = DEFAULT_INTERVAL,
    ignore: Ignored = (),
) -> Any:
    """Call check every `interval` seconds until it returns something truthy, and return that.

    It is always checked at least once. After `timeout` seconds raise
    WaitTimeout naming `what` and the last value or ignored exception.
    """
    attempts = _Attempts(what, timeout)
    while True:
        try:
            value = check()
            if inspect.isawaitable(value):
                value = await value
        except ignore as exc:
            attempts.failed(exc)
        else:
            if attempts.over(value):
                return value
        await asyncio.sleep(interval)


def eventually_blocking(
    check: Callable[[], T | NotYet | None],
    what: str,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    interval: float = DEFAULT_INTERVAL,
    ignore: Ignored = (),
) -> T:
    """`eventually` for synchronous code: the same loop, sleeping the calling thread."""
    attempts = _Attempts(what, timeout)
    while True:
        try:
            value = check()
        except ignore as exc:
            attempts.failed(exc)
        else:
            if attempts.over(value):
                return value
        time.sleep(interval)
