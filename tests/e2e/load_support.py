"""Load beside a disruption, for the end-to-end tests: two continuous writers through the data checker.

The durable writer (WAIT 1 on the writing connection: its acknowledged keys
are verified afterwards) and a WAIT 0 probe that shows how long each shard
took no writes at all. Each is bounded by keys and time.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from types import TracebackType

import attrs
from cluster_support import SUPERUSER, SUPERUSER_PASSWORD

from valkey_operator.core.rest import Obj
from valkey_operator.valkey.admin import AdminClient
from valkey_testbed.datachecker import DataChecker, WriterReport, key_slot
from valkey_testbed.wait import NotYet, eventually

WRITE_INTERVAL = 0.01
"""Each continuous writer's pause between keys: ~100 keys/s each leaves the 2 cores to the cluster."""
MAX_WRITER_KEYS = 20000
SHARD_GAP_LIMIT = 1.0
"""The longest a shard may take no writes while the operator moves its primary by a coordinated
CLUSTER FAILOVER: 0.1 to 0.4 s on the test bed, idle or loaded (docs/performance.md). A primary
deleted and handed over by Valkey at shutdown, or elected after, pauses for seconds (a
StatefulSet-style roll's worst shard: 7.8 to 8.4 s), so this bound tells the two apart."""


def checker_for(status: Obj, admin: AdminClient, replicas: int, prefix: str = "datachecker") -> DataChecker:
    """Seeded with every node, primaries first: any of them may be the one left answering."""
    nodes = sorted(status["nodes"], key=lambda node: node.get("role") != "primary")
    return DataChecker(
        [(node["ip"], 6379) for node in nodes if node.get("ip")],
        replicas=replicas,
        username=SUPERUSER,
        password=SUPERUSER_PASSWORD,
        prefix=prefix,
    )


@attrs.frozen
class LoadReport:
    durable: WriterReport
    """WAIT 1 writes: every acknowledged one must survive. A shard acknowledges none while it has no
    replica in sync, so its gap lasts until a replica is back, not merely until a new primary serves."""
    probe: WriterReport
    """WAIT 0 writes (never verified): a shard's gap here is how long it took no writes at all."""

    def gaps(self, primary: Obj) -> tuple[float, float]:
        """(probe gap, durable gap) of primary's slots, the writers' shards named by their slot ranges."""
        label = primary["slots"]
        probe, durable = self.probe.gaps_by_slots, self.durable.gaps_by_slots
        assert label in probe and label in durable, (label, probe, durable)
        return probe[label], durable[label]

    def __str__(self) -> str:
        def brief(report: WriterReport) -> str:
            gaps = {label: round(gap, 2) for label, gap in report.gaps_by_slots.items()}
            return (
                f"{report.acknowledged}/{report.attempted} acknowledged ({report.unacknowledged} unacked, "
                f"{report.failed} failed) in {report.seconds:.1f}s, gaps {gaps}, errors {dict(report.errors)}"
            )

        return f"durable writer: {brief(self.durable)}; probe writer: {brief(self.probe)}"


class Load:
    """Two continuous writers beside the disruption, each bounded by keys and time: the durable one
    (the checker whose keys are verified) and a WAIT 0 probe that measures when each shard takes writes."""

    def __init__(self, durable: DataChecker, probe: DataChecker, *, duration: float = 150.0) -> None:
        self.checkers = (durable, probe)
        self.duration = duration
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task[WriterReport]] = []

    async def __aenter__(self) -> Load:
        before = [len(checker.acknowledged) for checker in self.checkers]
        for checker in self.checkers:
            writer = checker.run_writer(
                max_keys=MAX_WRITER_KEYS, duration=self.duration, interval=WRITE_INTERVAL, stop=self.stop
            )
            self.tasks.append(asyncio.create_task(writer))

        def baseline() -> bool | NotYet:
            for task in self.tasks:
                if task.done():  # a writer that stopped already: its error now, not a timeout later
                    raise AssertionError(f"a writer stopped before the disruption: {task.result()}")
            missing = {
                checker.prefix: sorted(set(checker.primaries) - shards_written(checker, since))
                for checker, since in zip(self.checkers, before, strict=True)
            }
            return not any(missing.values()) or NotYet(f"primaries without a new acknowledged key: {missing}")

        # Both writers acknowledged writes on every shard before anything is disrupted.
        await eventually(baseline, "a baseline of acknowledged writes on every shard", 30)
        return self

    async def finish(self) -> LoadReport:
        self.stop.set()
        durable, probe = await asyncio.gather(*self.tasks)
        return LoadReport(durable=durable, probe=probe)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for task in self.tasks:  # still running only when the test failed: keep its error, not ours
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task


def shards_written(checker: DataChecker, since: int) -> set[tuple[str, int]]:
    """The primaries holding a key the checker acknowledged after its first `since` ones."""
    ranges = checker.slot_ranges()
    written: set[tuple[str, int]] = set()
    for key in itertools.islice(checker.acknowledged, since, None):
        slot = key_slot(key)
        written.update(owner for owner, spans in ranges.items() if any(a <= slot <= b for a, b in spans))
    return written
