"""Whether each primary handed its slots over before it was told to stop, read from its own log.

A roll that just deletes primaries looks fine from outside on Valkey 8+: with
`shutdown-on-sigterm failover` a primary that gets SIGTERM hands its slots to
a replica itself. What a coordinated roll promises is the other order: the
operator's CLUSTER FAILOVER turns the primary into a replica first, and only
then is its pod deleted. The server's log says which came first, in one file
on one clock, so no cross-process timestamps are compared.

The kubelet removes a pod's directory (and its log) once the pod is gone, so
each log is opened while its pod runs and read through the open descriptor.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Iterable
from typing import IO

import attrs

from valkey_operator.core.rest import Obj
from valkey_testbed.kubelet import KubeletControl

BECAME_REPLICA = re.compile(r"Configuration change detected\. Reconfiguring myself as a replica of node")
"""What a Valkey primary logs when a replica of its shard took its slots and it now follows that
replica (cluster_legacy.c)."""
STOP_SIGNAL = re.compile(r"Received SIGTERM")
CONTAINER = "valkey"


@attrs.frozen
class Handover:
    """One starting primary's log, in the order things happened to it."""

    pod: str
    became_replica_line: int | None
    sigterm_line: int | None

    @property
    def coordinated(self) -> bool:
        """Its slots moved before it was asked to stop (and it was asked: the pod was replaced)."""
        return (
            self.became_replica_line is not None
            and self.sigterm_line is not None
            and self.became_replica_line < self.sigterm_line
        )


def handover_of(pod: str, lines: Iterable[str]) -> Handover:
    became = sigterm = None
    for number, line in enumerate(lines):
        if became is None and BECAME_REPLICA.search(line):
            became = number
        if sigterm is None and STOP_SIGNAL.search(line):
            sigterm = number
    return Handover(pod, became, sigterm)


class PrimaryLogs:
    """The container logs of a cluster's primaries, held open from before the roll until after it.

    Only what is logged after opening counts: a pod that was a replica once (before a spread move
    made it primary) logged the same line back then.
    """

    def __init__(self, files: dict[str, IO[str]]) -> None:
        self._files = files
        self._starts = {pod: file.seek(0, 2) for pod, file in files.items()}

    def handovers(self) -> list[Handover]:
        """Each primary's handover as its log tells it since opening."""
        found = []
        for pod, file in sorted(self._files.items()):
            file.seek(self._starts[pod])
            found.append(handover_of(pod, file))
        return found


@contextlib.asynccontextmanager
async def primary_logs(kubelet: KubeletControl, namespace: str, status: Obj) -> AsyncIterator[PrimaryLogs]:
    """Open the log of every primary the status names; closed on exit."""
    paths: dict[str, str] = {}
    for node in status["nodes"]:
        if node.get("role") != "primary":
            continue
        pod = await kubelet.pod(namespace, node["pod"])
        assert pod is not None, f"the kubelet runs no pod {node['pod']}"
        (container,) = [c for c in pod["containers"] if c["name"] == CONTAINER]
        paths[node["pod"]] = container["log"]
    assert paths, "no primary in the status"
    with contextlib.ExitStack() as stack:
        yield PrimaryLogs({pod: stack.enter_context(_open_log(path)) for pod, path in paths.items()})


def _open_log(path: str) -> IO[str]:
    return open(path, encoding="utf-8", errors="replace")
