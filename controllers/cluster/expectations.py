"""Pod writes of this operator that the informer cache does not show yet (client-go's expectations).

A pass plans from the cache. Right after it created a pod, the next pass may
run before the watch delivers that pod, and would see a shard still short of a
pod; right after a delete, it would still see the pod live; right after it
annotated a replica with a failover request, it would not see the request and
could ask again. Each pass
therefore reports the pods whose create or delete the cache has not caught up
with (`Observation.awaiting`), and the planner creates and deletes nothing
until it has. The record is only a guard against our own cache's lag: a
restarted operator starts from a fresh LIST, which already shows every write,
so losing it loses nothing. An expectation the cache never meets (a watch
event lost until the next relist) lapses after EXPECTATION_TTL.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping

from valkey_operator.core.rest import Obj

EXPECTATION_TTL = 30.0


class PodExpectations:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._created: dict[str, dict[str, float]] = {}
        self._deleted: dict[str, dict[str, float]] = {}
        self._annotated: dict[str, dict[str, tuple[dict[str, str], float]]] = {}

    def expect(
        self,
        cluster: str,
        *,
        created: Iterable[str] = (),
        deleted: Iterable[str] = (),
        annotated: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        deadline = self.clock() + EXPECTATION_TTL
        for name in created:
            self._created.setdefault(cluster, {})[name] = deadline
        for name in deleted:
            self._deleted.setdefault(cluster, {})[name] = deadline
        for name, wanted in (annotated or {}).items():
            self._annotated.setdefault(cluster, {})[name] = (dict(wanted), deadline)

    def awaiting(self, cluster: str, cached_pods: Iterable[Obj]) -> frozenset[str]:
        """The expected writes the cache does not show yet; met or lapsed ones are dropped."""
        now = self.clock()
        live = {}
        shown: dict[str, Mapping[str, str]] = {}
        for pod in cached_pods:
            metadata = pod["metadata"]
            live[metadata["name"]] = metadata.get("deletionTimestamp") is None
            shown[metadata["name"]] = metadata.get("annotations") or {}
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
        annotated = {
            name: (wanted, deadline)
            for name, (wanted, deadline) in self._annotated.pop(cluster, {}).items()
            if name in shown and not wanted.items() <= shown[name].items() and deadline > now
        }
        if created:
            self._created[cluster] = created
        if deleted:
            self._deleted[cluster] = deleted
        if annotated:
            self._annotated[cluster] = annotated
        return frozenset(created) | frozenset(deleted) | frozenset(annotated)

    def forget(self, cluster: str) -> None:
        self._created.pop(cluster, None)
        self._deleted.pop(cluster, None)
        self._annotated.pop(cluster, None)
