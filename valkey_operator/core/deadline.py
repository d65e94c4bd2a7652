"""A worker's reconcile deadline on the injected clock, with one timer per worker, not per reconcile.

`asyncio.timeout` schedules and cancels a loop timer for every reconcile; with
thousands of short reconciles in a row that was a sixth of a no-op
reconcile's cost in the profile. Here a reconcile only writes down its
deadline (one `clock.now()`). The worker's single timer, a task sleeping on
the clock, wakes at the deadline it was armed for and either cancels the
reconcile that is now late or sleeps on to the deadline of the one running
(deadlines only move later), and ends while the worker is idle; the next
`start` arms it again. Time is the clock's, never the loop's, so a FakeClock
test steps a reconcile past its deadline without waiting. The cancellation is
asyncio's own (`Task.cancel`, taken back with `uncancel`), as `asyncio.timeout`
does it, so the reconcile sees an ordinary CancelledError.
"""

from __future__ import annotations

import asyncio
import contextlib

from valkey_operator.core.clock import Clock

__all__ = ["WorkerDeadline"]


class WorkerDeadline:
    """Belongs to one worker task (create it there); `start()` before each reconcile, `finish()` after
    it, `await close()` when the worker ends."""

    def __init__(self, seconds: float, clock: Clock) -> None:
        self.seconds = seconds
        self.expired = False
        """The running reconcile was cancelled for being late (reset by `start`)."""
        self._clock = clock
        self._task = asyncio.current_task()
        self._deadline: float | None = None
        self._timer: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.expired = False
        self._deadline = self._clock.now() + self.seconds
        if self._timer is None:
            self._timer = asyncio.create_task(self._run_timer(self._deadline), name="reconcile-deadline")

    def finish(self) -> None:
        """The reconcile ended: our cancellation, raised or swallowed, is taken back from the task, so it
        never reaches the worker's next await."""
        self._deadline = None
        if self.expired and self._task is not None and self._task.cancelling():
            self._task.uncancel()

    async def close(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer

    async def _run_timer(self, armed_for: float | None) -> None:
        """Sleep to the deadline armed_for; if the reconcile it belongs to still runs when the clock says
        it has come, cancel it; if another runs, sleep on to its deadline; if none, end.
        Bounded: every pass but the last sleeps to a deadline some `start` set after the previous one."""
        try:
            while armed_for is not None:
                await self._clock.sleep(armed_for - self._clock.now())
                if self._deadline == armed_for:
                    self.expired = True
                    if self._task is not None:
                        self._task.cancel()
                    return
                armed_for = self._deadline
        finally:
            if self._timer is asyncio.current_task():
                self._timer = None
