"""What the commands share: finding the cluster, polling for the operator's answer, printing."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import time
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

from valkey_operator.api.resources import VALKEY_CLUSTERS
from valkey_operator.core.rest import ApiError
from valkey_operator.kubectl import logfilter
from valkey_operator.kubectl.kube import CommandFailed, Session, TimedOut

Obj = dict[str, Any]
POLL_INTERVAL = 1.0


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def explain(error: ApiError, what: str) -> str:
    """An API error as one line a person can act on."""
    line = f"{what}: {' '.join(filter(None, (str(error.status), error.reason)))}: {error.message}"
    if error.status in (401, 403):
        line += "; check your credentials and RBAC (kubectl auth can-i)"
    return line


def duration(text: str) -> float:
    """A --timeout: seconds (300) or a kubectl duration (90s, 5m, 1h30m)."""
    try:
        return float(text) if text.replace(".", "", 1).isdigit() else float(logfilter.seconds(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: use seconds or a duration such as 90s, 5m, 1h30m"
        ) from None


async def get_cluster(session: Session, name: str) -> Obj:
    """The ValkeyCluster, or CommandFailed naming the namespace and how to list what is there."""
    try:
        cluster: Obj = await session.kube.get(VALKEY_CLUSTERS, name, session.namespace)
    except ApiError as exc:
        if exc.not_found and (exc.body.get("details") or {}).get("name") != name:
            raise CommandFailed(
                "the ValkeyCluster API is not served by this Kubernetes cluster: install the operator "
                "(its CRDs), or check --context"
            ) from None
        if exc.not_found:
            raise CommandFailed(
                f'valkeycluster "{name}" not found in namespace "{session.namespace}" '
                f"(list them: kubectl get valkeyclusters -n {session.namespace}; -n picks another namespace)"
            ) from None
        raise CommandFailed(explain(exc, f"reading valkeycluster {session.namespace}/{name}")) from None
    return cluster


async def annotate(session: Session, name: str, patch: Obj) -> Obj:
    try:
        return await session.kube.patch(VALKEY_CLUSTERS, name, patch, session.namespace)
    except ApiError as exc:
        raise CommandFailed(explain(exc, f"annotating valkeycluster {session.namespace}/{name}")) from None


async def poll(
    check: Callable[[], Awaitable[str | None]], timeout: float, waiting_for: str, out: TextIO
) -> str:
    """Call check every second until it returns a result (not None); TimedOut after timeout seconds.
    check may print progress itself."""
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result is not None:
            return result
        if time.monotonic() >= deadline:
            raise TimedOut(
                f"timed out after {timeout:g}s waiting for {waiting_for}; "
                "the request stands and the operator may still carry it out"
            )
        await asyncio.sleep(POLL_INTERVAL)
