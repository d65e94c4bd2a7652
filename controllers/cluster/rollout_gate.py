"""maxConcurrentRollouts (SPEC 1.5): the rollout slots held, remembered between passes (not pure).

A cluster rolls while its status shows `rollout` (the clusters-rolling index on the shared cache
counts them). decide() admits a cluster with outdated pods when it holds a slot or fewer than the
limit are held (`admit` in decide.py); the others wait (UpdatePending, "waiting for a rollout
slot") and start as slots free up. Two passes of different clusters may run at once, so a slot
decide() hands out is also remembered here until that cluster's status shows its roll (at most
CLAIM_TTL): the count never overshoots within this process, which is the only one acting (leader
election). After a restart the statuses alone are the truth.
"""

from __future__ import annotations

import time
from collections.abc import Callable

CLAIM_TTL = 60.0


class RolloutGate:
    def __init__(self, rolling: Callable[[], list[str]], clock: Callable[[], float] = time.monotonic) -> None:
        self.rolling = rolling
        self.clock = clock
        self._claims: dict[str, float] = {}

    def holders(self) -> frozenset[str]:
        """Clusters holding a slot: their status shows a roll, or a claim made lately has not lapsed."""
        now = self.clock()
        shown = set(self.rolling())
        self._claims = {key: until for key, until in self._claims.items() if until > now and key not in shown}
        return frozenset(shown | self._claims.keys())

    def claim(self, cluster: str) -> None:
        self._claims[cluster] = self.clock() + CLAIM_TTL

    def release(self, cluster: str) -> None:
        self._claims.pop(cluster, None)
