"""The reconciler's memory of CONFIG SETs the servers refused (not pure: it outlives a pass).

A refusal is a Failure the next pass sees as a fact (`Observation.refusals`): decide() then leaves
the refused value out, or sends the directives one by one after a refusal that named none
(upkeep.set_config). A restarted operator sends once more and learns it again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from controllers.cluster.decision.actions import Action, Failure, SetConfig
from controllers.shared.observation import Refusal, Refusals


class RefusalMemory:
    def __init__(self) -> None:
        self._by_cluster: dict[str, Refusals] = {}

    def of(self, cluster: str, pods: Iterable[str]) -> Refusals:
        """What the cluster's existing pods refused (a pod that is gone refuses nothing)."""
        known = self._by_cluster.get(cluster)
        if known is None:
            return Refusals()
        live = set(pods)
        return Refusals(
            named={pod: found for pod, found in known.named.items() if pod in live},
            unnamed={pod: message for pod, message in known.unnamed.items() if pod in live},
        )

    def remember(self, cluster: str, actions: Sequence[Action], failures: Sequence[Failure]) -> None:
        """Record this pass's refusals; an unnamed one lasts until that pod is sent settings again."""
        current = self._by_cluster.get(cluster, Refusals())
        named = {pod: dict(found) for pod, found in current.named.items()}
        unnamed = dict(current.unnamed)
        for action in actions:
            if isinstance(action, SetConfig):
                unnamed.pop(action.node, None)
        for failure in failures:
            action = failure.action
            if not isinstance(action, SetConfig) or failure.refused is None:
                continue
            if failure.refused == "":
                unnamed[action.node] = failure.message
            else:
                value = dict(action.settings).get(failure.refused, "")
                named.setdefault(action.node, {})[failure.refused] = Refusal(value, failure.message)
        self._by_cluster[cluster] = Refusals(named=named, unnamed=unnamed)

    def forget(self, cluster: str) -> None:
        self._by_cluster.pop(cluster, None)
