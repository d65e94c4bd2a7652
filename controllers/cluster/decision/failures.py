"""Pods that keep failing: stop replacing them in a tight loop, and say why (pure, read by the planner).

Pods run with restartPolicy Never, so a server that cannot start (a config the
binary rejects, a missing file, an image that is not Valkey) ends its pod at
once and the planner asks for a replacement, which fails the same way. Without
a guard that is a storm of pods. The guard reads only the world: when a shard
has FAILURE_LIMIT or more pods of the current template that were created within
FAILURE_WINDOW seconds and ended Failed, no pod is created for that shard until
the oldest of them leaves the window (a requeue, not a sleep). Failed pods are
kept as evidence, at most KEEP_FAILED per shard (older ones are pruned), and
each is told once in a Warning Event with its container's end (`failure_events`):
on real nodes an OOM kill otherwise showed only as an unreachable node.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from controllers.cluster.decision.actions import Event
from controllers.shared.observation import PodObservation, PodPhase
from controllers.shared.versions import meets_floor, parse_version
from valkey_operator.api.resources import VERSION_FLOOR_TEXT
from valkey_operator.core.events import WARNING

RESTORE_FAILURE = "container restore exited"
"""How a restoring pod's init container (the backup's download) reads in the pod's failure."""
FAILURE_LIMIT = 3
FAILURE_WINDOW = 300.0
KEEP_FAILED = FAILURE_LIMIT
POD_FAILED = "PodFailed"
"""The reason of the Warning Event that tells a pod ended Failed (its container crashed or was killed)."""


@attrs.frozen
class CrashLoops:
    blocked: dict[int, tuple[PodObservation, ...]]
    """Shards whose pods keep failing -> the failures in the window, newest first."""
    retry_after: float | None
    """Seconds until the first blocked shard may try again."""
    prune: tuple[PodObservation, ...]
    """Failed pods beyond the KEEP_FAILED newest of their shard."""

    def below_floor_version(self) -> str | None:
        """A version a failed server reported that is below the floor: it cannot run our valkey.conf."""
        for failures in self.blocked.values():
            for pod in failures:
                parsed = parse_version(pod.found_version) if pod.found_version else None
                if parsed is not None and not meets_floor(parsed):
                    return pod.found_version
        return None

    def message(self, image: str) -> str:
        if all(RESTORE_FAILURE in (pod.failure or "") for pods in self.blocked.values() for pod in pods):
            parts = [
                f"shard {shard}: {failures[0].failure}" for shard, failures in sorted(self.blocked.items())
            ]
            return (
                f"restoring pods keep failing before Valkey starts ({'; '.join(parts)}); "
                f"not creating more for now"
            )
        found = self.below_floor_version()
        if found is not None:
            return (
                f"image {image} runs Valkey {found}, below the supported floor {VERSION_FLOOR_TEXT}: "
                f"its servers exit before serving and no node joined; use an image of Valkey "
                f"{VERSION_FLOOR_TEXT} or later"
            )
        parts = [
            f"shard {shard}: {len(failures)} pods failed, last {failures[0].name} ({failures[0].failure})"
            for shard, failures in sorted(self.blocked.items())
        ]
        return (
            f"pods of image {image} keep failing before they serve ({'; '.join(parts)}); "
            f"if the image runs a Valkey below the version floor, it cannot load the operator's valkey.conf; "
            f"not creating more for now"
        )


def crash_loops(pods: Iterable[PodObservation], template_hash: str, now: float) -> CrashLoops:
    failed = sorted(
        (
            pod
            for pod in pods
            if pod.phase is PodPhase.FAILED and not pod.deleting and pod.created_at is not None
        ),
        key=lambda pod: (pod.created_at or 0.0, pod.name),
        reverse=True,
    )
    blocked: dict[int, tuple[PodObservation, ...]] = {}
    retry_after: float | None = None
    prune: list[PodObservation] = []
    by_shard: dict[int | None, list[PodObservation]] = {}
    for pod in failed:
        by_shard.setdefault(pod.shard, []).append(pod)
    for shard, group in by_shard.items():
        prune += group[KEEP_FAILED:]
        if shard is None:
            continue
        recent = [
            pod
            for pod in group
            if pod.template_hash == template_hash and now - (pod.created_at or 0.0) < FAILURE_WINDOW
        ]
        if len(recent) >= FAILURE_LIMIT:
            blocked[shard] = tuple(recent)
            wait = FAILURE_WINDOW - (now - (recent[FAILURE_LIMIT - 1].created_at or 0.0))
            retry_after = wait if retry_after is None else min(retry_after, wait)
    return CrashLoops(blocked=blocked, retry_after=retry_after, prune=tuple(prune))


def failure_events(
    pods: Iterable[PodObservation], told: frozenset[str]
) -> tuple[tuple[Event, ...], frozenset[str]]:
    """A PodFailed Warning for each Failed pod no earlier pass told (told: their names), and the
    names told once these are: the Failed pods there now, so the set never outgrows what is kept.
    A restarted operator tells the kept ones once more."""
    failed = sorted((pod for pod in pods if pod.phase is PodPhase.FAILED), key=lambda pod: pod.name)
    events = tuple(Event(WARNING, POD_FAILED, _failed_message(pod)) for pod in failed if pod.name not in told)
    return events, frozenset(pod.name for pod in failed)


def _failed_message(pod: PodObservation) -> str:
    shard = f"shard {pod.shard}" if pod.shard is not None else "no shard label"
    said = f"pod {pod.name} ({shard}) failed: {pod.failure or 'Failed'}; it stays as evidence"
    if "OOMKilled" in (pod.failure or ""):
        said += (
            "; the kernel killed Valkey at the pod's memory limit: raise the limit, or leave more of it "
            "above maxmemory (client output buffers, replication buffers and forks are not bounded by it)"
        )
    return said
