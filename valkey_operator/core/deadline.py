"""A worker's reconcile deadline on the event loop's clock, with one timer per worker, not per reconcile.

`asyncio.timeout` schedules and cancels a loop timer for every reconcile; with
thousands of short reconciles in a row that was a sixth of a no-op
reconcile's cost in the profile. Here a reconcile only writes down its
deadline. The worker's single timer, when it fires, either cancels the
reconcile that is now late or moves on to the deadline of the one running
(deadlines only move later), and drops out while the worker is idle. The
cancellation is asyncio's own (`Task.cancel`, taken back with `uncancel`), as
`asyncio.timeout` does it, so the reconcile sees an ordinary CancelledError.
"""

from __future__ import annotations

import asyncio

__all__ = ["WorkerDeadline"]


class WorkerDeadline:
    """Belongs to one worker task (create it there); `start()` before each reconcile, `finish()` after it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        """The running reconcile was cancelled for being late (reset by `start`)."""
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._deadline: float | None = None
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self.expired = False
        self._deadline = self._loop.time() + self.seconds
        if self._timer is None:
            self._timer = self._loop.call_at(self._deadline, self._fire)

    def finish(self) -> None:
        """The reconcile ended: our cancellation, raised or swallowed, is taken back from the task, so it
        never reaches the worker's next await."""
        self._deadline = None
        if self.expired and self._task is not None and self._task.cancelling():
            self._task.uncancel()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fire(self) -> None:
        self._timer = None
        if self._deadline is None:
            return  # idle: the next start arms the timer again
        if self._loop.time() < self._deadline:
            self._timer = self._loop.call_at(self._deadline, self._fire)
            return
        self.expired = True
        if self._task is not None:
            self._task.cancel()
