"""What a cluster's passes remember between them: one frozen value, in Facts and out in Decision.

A pass reads the world from caches and probes; a few things it cannot read there
it remembers from the passes before (client-go keeps the same in expectations
and the like). All of them live in one `Memory` per cluster: it enters a pass in
`Facts.memory`, decide() returns the next one in `Decision.memory` (the actor's
outcome folded in by `Decision.after`), and the reconciler stores what it gets
back, nothing else. Every field only guards against this process's own lag or
repeats, so a restarted operator that starts with an empty Memory loses nothing
the API server and the nodes do not show again:
- `expected`: pod creates, deletes and annotations this operator made that the
  informer cache does not show yet; the planner creates and deletes nothing
  until it does (`Context.awaiting`, context.py). One the cache never shows lapses
  after EXPECTATION_TTL (a lost watch event cannot block a cluster forever).
- `refusals`: CONFIG SETs the servers refused (`Context.refusals`): the
  refused value is not sent again; a refusal that named no directive lasts until
  that pod is sent settings again.
- `claim_until`: a rollout slot (maxConcurrentRollouts) decide() handed out,
  held until the cluster's status shows its roll (at most CLAIM_TTL): two
  clusters' passes may run at once, so the count must not overshoot before the
  statuses show it (`slot_holders`).
- `quiet`: what the last pass left when it was quiet (cadence.py).
- `failed_jobs`: the failed slot migration jobs the logs showed, each counted
  once in the failures metric (migration_counts.py).
- `failed_pods`: the Failed pods a PodFailed Event told already, each told once
  (failures.failure_events).
- `written`: the status our last write stored, while the cache still holds a
  resourceVersion from before it (`recorded_status`): a pass queued by a pod
  event between the patch and its watch event reads that status, not the one
  before it, so a finished rollout is not reported twice. Before it means a
  version one of our writes was based on or produced while the cache lagged:
  two writes can land before the cache shows the first, and the first one's
  version is then as stale as the one it was based on. Versions are compared
  for equality only (API conventions: opaque).
Times are the pass's `now` (unix seconds), so every step here is pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from controllers.cluster.decision.actions import Action, Failure, SetConfig
from controllers.cluster.decision.cadence import Quiet
from controllers.shared.observation import PodObservation
from valkey_operator.core.rest import Obj

EXPECTATION_TTL = 30.0
"""Seconds a pod write the cache does not show is waited for."""
CLAIM_TTL = 60.0
"""Seconds a rollout slot claim holds without the cluster's status showing its roll."""


@attrs.frozen
class Refusal:
    """A CONFIG SET a server refused in an earlier pass: the value sent, and Valkey's words."""

    value: str
    message: str


@attrs.frozen(kw_only=True)
class Refusals:
    """What the servers refused before (Decision.after remembers the actor's failures): refused
    values are not sent again, and a refusal that named no directive has its directives sent one
    by one, so the others still apply and the refused one is named."""

    named: Mapping[str, Mapping[str, Refusal]] = attrs.field(factory=dict)
    """Pod -> directive -> the value it refused."""
    unnamed: Mapping[str, str] = attrs.field(factory=dict)
    """Pod -> Valkey's words, for a CONFIG SET of several directives refused without naming one."""

    def of(self, pod: str, directive: str, value: str) -> Refusal | None:
        found = self.named.get(pod, {}).get(directive)
        return found if found is not None and found.value == value else None


@attrs.frozen(kw_only=True)
class Expected:
    """Pod writes of this operator the cache has not shown yet, each with the time it lapses."""

    created: Mapping[str, float] = attrs.field(factory=dict)
    deleted: Mapping[str, float] = attrs.field(factory=dict)
    annotated: Mapping[str, tuple[Mapping[str, str], float]] = attrs.field(factory=dict)
    """Pod -> the annotations patched onto it, and when the expectation lapses."""

    def met(self, pods: Iterable[PodObservation], now: float) -> Expected:
        """What is still awaited once the cache shows pods: met and lapsed expectations dropped."""
        cached = tuple(pods)
        live = {pod.name: not pod.deleting for pod in cached}
        shown = {pod.name: pod.annotations for pod in cached}
        return Expected(
            created={name: t for name, t in self.created.items() if name not in live and t > now},
            deleted={name: t for name, t in self.deleted.items() if live.get(name) and t > now},
            annotated={
                name: (wanted, t)
                for name, (wanted, t) in self.annotated.items()
                if name in shown and not wanted.items() <= shown[name].items() and t > now
            },
        )

    def names(self) -> frozenset[str]:
        return frozenset(self.created) | frozenset(self.deleted) | frozenset(self.annotated)

    def expect(
        self,
        now: float,
        created: Iterable[str] = (),
        deleted: Iterable[str] = (),
        annotated: Mapping[str, Mapping[str, str]] | None = None,
    ) -> Expected:
        deadline = now + EXPECTATION_TTL
        return Expected(
            created={**self.created, **{name: deadline for name in created}},
            deleted={**self.deleted, **{name: deadline for name in deleted}},
            annotated={
                **self.annotated,
                **{name: (dict(wanted), deadline) for name, wanted in (annotated or {}).items()},
            },
        )


@attrs.frozen(kw_only=True)
class WrittenStatus:
    """Our last status patch that succeeded: what it stored, and the resourceVersions known to be
    older than its own (those our writes were based on or produced since the cache last caught up)."""

    older: frozenset[str]
    status: Obj = attrs.field(eq=False)
    version: str = ""
    """The resourceVersion the patch produced (empty: the server's answer had none)."""


@attrs.frozen(kw_only=True)
class Memory:
    """Everything one cluster's passes remember (see the module docstring for each field)."""

    expected: Expected = attrs.field(factory=Expected)
    refusals: Refusals = attrs.field(factory=Refusals)
    claim_until: float | None = None
    quiet: Quiet | None = None
    written: WrittenStatus | None = None
    failed_jobs: frozenset[str] = frozenset()
    failed_pods: frozenset[str] = frozenset()

    def claims_slot(self, now: float) -> bool:
        return self.claim_until is not None and self.claim_until > now

    def wrote(self, based_on: str | None, stored: Obj) -> Memory:
        """A status patch on the cached version based_on succeeded; stored is the server's answer."""
        if not based_on:
            return self
        older = frozenset({based_on})
        previous = self.written
        if previous is not None and based_on in previous.older:  # the cache still lags our last write
            older |= previous.older | ({previous.version} if previous.version else set())
        version = str((stored.get("metadata") or {}).get("resourceVersion") or "")
        return attrs.evolve(
            self, written=WrittenStatus(older=older, status=stored.get("status") or {}, version=version)
        )


def recorded_status(memory: Memory | None, cached_version: str | None) -> Obj | None:
    """The status our last write stored while the cache still holds a version from before it
    (None: the cached status is the recorded one)."""
    written = memory.written if memory is not None else None
    if written is None or cached_version not in written.older:
        return None
    return written.status


def slot_holders(rolling: Iterable[str], memories: Mapping[str, Memory], now: float) -> frozenset[str]:
    """Clusters holding a rollout slot: their status shows a roll, or a claim that has not lapsed."""
    return frozenset(rolling) | {key for key, memory in memories.items() if memory.claims_slot(now)}


def live_refusals(refusals: Refusals, pods: Iterable[str]) -> Refusals:
    """What the cluster's existing pods refused (a pod that is gone refuses nothing)."""
    live = set(pods)
    return Refusals(
        named={pod: found for pod, found in refusals.named.items() if pod in live},
        unnamed={pod: message for pod, message in refusals.unnamed.items() if pod in live},
    )


def remember_refusals(refusals: Refusals, actions: Sequence[Action], failures: Sequence[Failure]) -> Refusals:
    """This pass's refusals added; an unnamed one lasts until that pod is sent settings again."""
    named = {pod: dict(found) for pod, found in refusals.named.items()}
    unnamed = dict(refusals.unnamed)
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
    return Refusals(named=named, unnamed=unnamed)
