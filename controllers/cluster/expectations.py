"""Pod writes of this operator that the informer cache does not show yet (client-go's expectations).

A pass plans from the cache. Right after it created a pod, the next pass may
run before the watch delivers that pod, and would see a shard still short of a
pod; right after a delete, it would still see the pod live. Each pass
therefore reports the pods whose create or delete the cache has not caught up
with (`Observation.awaiting`), and the planner creates and deletes nothing
until it has. The record is only a guard against our own cache's lag: a
restarted operator starts from a fresh LIST, which already shows every write,
so losing it loses nothing. An expectation the cache never meets (a watch
event lost until the next relist) lapses after EXPECTATION_TTL.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from valkey_operator.core.rest import Obj

EXPECTATION_TTL = 30.0


class PodExpectations:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._created: dict[str, dict[str, float]] = {}
        self._deleted: dict[str, dict[str, float]] = {}

    def expect(self, cluster: str, *, created: Iterable[str] = (), deleted: Iterable[str] = ()) -> None:
        deadline = self.clock() + EXPECTATION_TTL
        for name in created:
            self._created.setdefault(cluster, {})[name] = deadline
        for name in deleted:
            self._deleted.setdefault(cluster, {})[name] = deadline

    def awaiting(self, cluster: str, cached_pods: Iterable[Obj]) -> frozenset[str]:
        """The expected writes the cache does not show yet; met or lapsed ones are dropped."""
        now = self.clock()
        live = {}
        for pod in cached_pods:
            metadata = pod["metadata"]
            live[metadata["name"]] = metadata.get("deletionTimestamp") is None
        created = {
            name: deadline
            for name, deadline in self._created.pop(cluster, {}).items()
            if name not in live and deadline > now
        }
        deleted = {
            name: deadline
            for name, deadline in self._deleted.pop(cluster, {}).items()
            if live.get(name) and deadline > now
        }
        if created:
            self._created[cluster] = created
        if deleted:
            self._deleted[cluster] = deleted
        return frozenset(created) | frozenset(deleted)

    def forget(self, cluster: str) -> None:
        self._created.pop(cluster, None)
        self._deleted.pop(cluster, None)
