"""What a reconciler receives and returns (controller-runtime's `reconcile` package)."""

from __future__ import annotations

from typing import Protocol

import attrs


@attrs.frozen(cache_hash=True)  # hashed several times per reconcile by the queue's sets
class Request:
    """The key of one object to reconcile; the reconciler reads the rest from the cache."""

    name: str
    namespace: str = ""

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@attrs.frozen
class Result:
    """Ask to be called again: after a delay, or rate-limited when `requeue` is set.

    A plain `Result()` means "done until something changes".
    """

    requeue: bool = False
    requeue_after: float = 0.0


class TerminalError(Exception):
    """A failure retrying cannot fix (bad input); reported, never requeued."""


class Reconciler(Protocol):
    """Any object with this method; the controller never calls it twice at once for one Request."""

    async def reconcile(self, request: Request) -> Result:
        """Make the world match the object named by request (read it from the cache: it may be gone);
        return a Result, raise to retry with backoff, raise TerminalError to stop retrying."""
        ...
