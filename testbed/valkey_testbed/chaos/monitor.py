"""The chaos run's watchdog: between and during steps, once a second, it checks what must always hold.

- the operator process is alive unless the schedule killed it (invariant 2);
- the load loops are running (a crashed loop is a bug of the run, reported);
- the status, while it says Active for the current generation, agrees with the
  nodes; a disagreement is tolerated for CLAIM_GRACE seconds (invariant 4);
- the pod IPs the load's clients seed from are kept current.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from valkey_operator.api.resources import VALKEY_CLUSTERS
from valkey_operator.core.rest import ApiError
from valkey_testbed.chaos import invariants
from valkey_testbed.chaos.faults import World
from valkey_testbed.chaos.invariants import CLAIM_GRACE, Violations
from valkey_testbed.chaos.nodes import probe
from valkey_testbed.chaos.schedule import POLICIES

CLAIMS_EVERY = 5.0
"""Seconds between two comparisons of the status with the nodes."""


class Monitor:
    def __init__(
        self,
        world: World,
        violations: Violations,
        step: Callable[[], int],
        clock: Callable[[], float],
        load_failed: Callable[[], str | None],
    ) -> None:
        self.world = world
        self.violations = violations
        self.step = step
        self.clock = clock
        self.load_failed = load_failed
        self.ips: list[str] = []
        self.policy = 0
        """Index into POLICIES of the runtime setting the config asks for (the runner keeps it current)."""
        self.claims_checked = 0
        self.error: str | None = None
        self._false_since: float | None = None
        self._task: asyncio.Task[None] | None = None
        self.stopped = asyncio.Event()

    async def start(self) -> None:
        self.ips = await self.world.pod_ips()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        self.stopped.set()
        if self._task is not None:
            await self._task

    def seeds(self) -> list[str]:
        return list(self.ips)

    async def _run(self) -> None:
        last_claims = 0.0
        while not self.stopped.is_set():
            code = self.world.operator.exited()
            if code is not None:
                tail = self.world.operator.tail()
                self.violations.add(
                    invariants.OPERATOR,
                    self.step(),
                    self.clock(),
                    f"the operator exited with status {code} without being killed; log tail:\n{tail}",
                )
                self.world.operator.spawn()  # keep the run going; the violation stands
            failed = self.load_failed()
            if failed is not None and self.error is None:
                self.error = f"a load loop crashed: {failed}"
            with contextlib.suppress(ApiError, OSError, TimeoutError):
                self.ips = await self.world.pod_ips() or self.ips
                if time.monotonic() - last_claims >= CLAIMS_EVERY:
                    last_claims = time.monotonic()
                    await self._claims()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopped.wait(), 1.0)

    async def _claims(self) -> None:
        names = self.world.objects.names
        cluster = await self.world.kube.get(VALKEY_CLUSTERS, names.cluster, names.namespace)
        if not invariants.current_and_active(cluster):
            self._false_since = None
            return
        facts = await probe(self.world.admin, self.ips)
        false = invariants.status_claims(cluster, facts, POLICIES[self.policy])
        self.claims_checked += 1
        if not false:
            self._false_since = None
            return
        now = time.monotonic()
        if self._false_since is None:
            self._false_since = now
        elif now - self._false_since > CLAIM_GRACE:
            self.violations.add(
                invariants.STATUS,
                self.step(),
                self.clock(),
                f"for {now - self._false_since:.0f}s the status claimed what the nodes do not run: "
                + "; ".join(false[:6]),
            )
            self._false_since = None
