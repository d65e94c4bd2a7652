"""This operator's own status writes that the informer cache does not show yet.

A pass reads the cluster's recorded status (state, rollout progress,
conditions) from the cache, and its Events and counters are the difference
between that and the status it writes: a rollout finishes when the recorded
status had one and the new one has none. A pass queued by a pod event can run
after a status patch but before the watch delivers the patched cluster; it
would read the status from before the patch and report the same finish again
(two RolloutFinished Events, the finished counter counted twice). While the
cache still holds exactly the resourceVersion a write was based on, the status
that write stored is the recorded one. Versions are only compared for
equality, never ordered (API conventions: they are opaque). A restarted
operator starts from a fresh LIST, which shows every write, so losing this
record loses nothing.
"""

from __future__ import annotations

from valkey_operator.core.rest import Obj


class WrittenStatuses:
    def __init__(self) -> None:
        self._written: dict[str, tuple[str, Obj]] = {}

    def ours(self, key: str, cached: Obj) -> Obj | None:
        """The status our last write stored while the cache still lags it (None: the cache's is the
        recorded one, so the reconciler reuses the status parsed with the cached cluster)."""
        entry = self._written.get(key)
        if entry is None:
            return None
        based_on, ours = entry
        if cached["metadata"].get("resourceVersion") == based_on:
            return ours
        del self._written[key]  # the cache shows our write, or something newer
        return None

    def wrote(self, key: str, based_on: Obj, stored: Obj) -> None:
        """A status patch on the cached object based_on succeeded; stored is the server's answer."""
        version = based_on["metadata"].get("resourceVersion")
        if version:
            self._written[key] = (version, stored.get("status") or {})

    def forget(self, key: str) -> None:
        self._written.pop(key, None)
