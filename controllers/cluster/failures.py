"""Pods that keep failing: stop replacing them in a tight loop, and say why (pure).

Pods run with restartPolicy Never, so a server that cannot start (a config the
binary rejects, a missing file, an image that is not Valkey) ends its pod at
once and the planner asks for a replacement, which fails the same way. Without
a guard that is a storm of pods. The guard reads only the world: when a shard
has FAILURE_LIMIT or more pods of the current template that were created within
FAILURE_WINDOW seconds and ended Failed, no pod is created for that shard until
the oldest of them leaves the window (a requeue, not a sleep). Failed pods are
kept as evidence, at most KEEP_FAILED per shard (older ones are deleted).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Sequence

import attrs

from controllers.cluster.observe import meets_floor, parse_version
from controllers.cluster.render import names
from valkey_operator.api.resources import VERSION_FLOOR_TEXT
from valkey_operator.core.rest import Obj

FAILURE_LIMIT = 3
FAILURE_WINDOW = 300.0
KEEP_FAILED = FAILURE_LIMIT


@attrs.frozen
class FailedPod:
    name: str
    uid: str
    shard: int | None
    template_hash: str | None
    created: datetime.datetime
    detail: str
    found_version: str | None = None
    """The Valkey version the server printed before exiting (its termination message), if any."""


@attrs.frozen
class CrashLoops:
    blocked: dict[int, tuple[FailedPod, ...]]
    """Shards whose pods keep failing -> the failures in the window, newest first."""
    retry_after: float | None
    """Seconds until the first blocked shard may try again."""
    prune: tuple[FailedPod, ...]
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
        found = self.below_floor_version()
        if found is not None:
            return (
                f"image {image} runs Valkey {found}, below the supported floor {VERSION_FLOOR_TEXT}: "
                f"its servers exit before serving and no node joined; use an image of Valkey "
                f"{VERSION_FLOOR_TEXT} or later"
            )
        parts = []
        for shard, failures in sorted(self.blocked.items()):
            parts.append(
                f"shard {shard}: {len(failures)} pods failed, last {failures[0].name} ({failures[0].detail})"
            )
        return (
            f"pods of image {image} keep failing before they serve ({'; '.join(parts)}); "
            f"if the image runs a Valkey below the version floor, it cannot load the operator's valkey.conf; "
            f"not creating more for now"
        )


def _parse_time(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


_VERSION_IN_LOG = re.compile(r"\(Version (\d+\.\d+\.\d+)\)|Valkey version=(\d+\.\d+\.\d+)")


def _found_version(pod: Obj) -> str | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        message = ((status.get("state") or {}).get("terminated") or {}).get("message") or ""
        match = _VERSION_IN_LOG.search(message)
        if match:
            return match.group(1) or match.group(2)
    return None


def _detail(pod: Obj) -> str:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated") or {}
        if terminated:
            reason = terminated.get("reason") or "terminated"
            text = f"container {status.get('name')} exited with code {terminated.get('exitCode')} ({reason})"
            message = (terminated.get("message") or "").strip()
            return f"{text}: {message[:200]}" if message else text
    return (pod.get("status") or {}).get("reason") or "Failed"


def failed_pods(pods: Iterable[Obj]) -> list[FailedPod]:
    found = []
    for pod in pods:
        metadata = pod["metadata"]
        if (pod.get("status") or {}).get("phase") != "Failed" or metadata.get("deletionTimestamp"):
            continue
        created = _parse_time(metadata.get("creationTimestamp"))
        if created is None:
            continue
        labels = metadata.get("labels") or {}
        found.append(
            FailedPod(
                name=metadata["name"],
                uid=metadata.get("uid", ""),
                shard=names.shard_of(labels),
                template_hash=labels.get(names.TEMPLATE_HASH_LABEL),
                created=created,
                detail=_detail(pod),
                found_version=_found_version(pod),
            )
        )
    return found


def crash_loops(pods: Sequence[Obj], template_hash: str, now: datetime.datetime) -> CrashLoops:
    failed = sorted(failed_pods(pods), key=lambda pod: (pod.created, pod.name), reverse=True)
    blocked: dict[int, tuple[FailedPod, ...]] = {}
    retry_after: float | None = None
    prune: list[FailedPod] = []
    by_shard: dict[int | None, list[FailedPod]] = {}
    for pod in failed:
        by_shard.setdefault(pod.shard, []).append(pod)
    for shard, group in by_shard.items():
        prune += group[KEEP_FAILED:]
        if shard is None:
            continue
        recent = [
            pod
            for pod in group
            if pod.template_hash == template_hash and (now - pod.created).total_seconds() < FAILURE_WINDOW
        ]
        if len(recent) >= FAILURE_LIMIT:
            blocked[shard] = tuple(recent)
            wait = FAILURE_WINDOW - (now - recent[FAILURE_LIMIT - 1].created).total_seconds()
            retry_after = wait if retry_after is None else min(retry_after, wait)
    return CrashLoops(blocked=blocked, retry_after=retry_after, prune=tuple(prune))
