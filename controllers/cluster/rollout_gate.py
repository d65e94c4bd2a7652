"""maxConcurrentRollouts (SPEC 1.5): how many clusters may roll at once when one edit fans out to many.

A cluster rolls while its status shows `rollout` (the clusters-rolling index
on the shared cache counts them). A cluster that would start a roll may do
so when fewer than the limit are rolling; the others wait (UpdatePending,
"waiting for a rollout slot") and start as slots free up. Two passes of
different clusters may run at once, so a slot handed out here is also
remembered until that cluster's status shows its roll (at most CLAIM_TTL):
the count never overshoots within this process, which is the only one
acting (leader election). After a restart the statuses alone are the truth.
"""

from __future__ import annotations

import time
from collections.abc import Callable

CLAIM_TTL = 60.0


class RolloutGate:
    def __init__(
        self, limit: int, rolling: Callable[[], list[str]], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit = limit
        self.rolling = rolling
        self.clock = clock
        self._claims: dict[str, float] = {}

    def may_roll(self, cluster: str, outdated: bool) -> bool:
        """Whether cluster may take rollout steps now; it has outdated pods when `outdated`."""
        if not outdated:
            self._claims.pop(cluster, None)
            return True
        if self.limit <= 0:
            return True
        now = self.clock()
        shown = set(self.rolling())
        self._claims = {key: until for key, until in self._claims.items() if until > now and key not in shown}
        holders = shown | self._claims.keys()
        if cluster in holders:
            return True
        if len(holders) < self.limit:
            self._claims[cluster] = now + CLAIM_TTL
            return True
        return False

    def forget(self, cluster: str) -> None:
        self._claims.pop(cluster, None)
