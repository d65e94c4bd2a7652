"""Reading a leader-election Lease in tests: who holds it, when each holder last renewed it.

Every Lease time is written by a process on this machine (micro_time of its wall clock), so the
times of two holders, and the test's own `time.time()`, compare directly.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable

import attrs

from valkey_operator.core.client import Client
from valkey_operator.core.leaderelection import longest_handover
from valkey_operator.core.manager import LeaderElectionConfig
from valkey_operator.core.resource import LEASES
from valkey_testbed.wait import NotYet

TIMINGS = LeaderElectionConfig("unused", "unused")
"""The timings every operator process here runs with: the defaults."""
HANDOVER = longest_handover(TIMINGS.lease_duration, TIMINGS.retry_period)
"""The longest a standby takes to lead after the leader's last renewal (19.8 s)."""
REQUEST_SLACK = 1.0
"""The API requests inside a measured interval (a standby's GETs and PUT, a test's poll) on 2 busy cores."""


def epoch(micro_time: str) -> float:
    moment = datetime.datetime.strptime(micro_time, "%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.replace(tzinfo=datetime.UTC).timestamp()


@attrs.define
class LeaseRecord:
    holder: str
    acquired: float
    renewed: float


@attrs.define
class LeaseWatch:
    """Reads one Lease on every `read`, keeping the last record seen of each holder."""

    kube: Client
    name: str
    namespace: str
    last: dict[str, LeaseRecord] = attrs.field(factory=dict)

    async def read(self) -> LeaseRecord | None:
        lease = await self.kube.get_or_none(LEASES, self.name, self.namespace)
        spec = (lease or {}).get("spec") or {}
        if not spec.get("holderIdentity") or not spec.get("renewTime"):
            return None
        record = LeaseRecord(spec["holderIdentity"], epoch(spec["acquireTime"]), epoch(spec["renewTime"]))
        self.last[record.holder] = record
        return record

    async def held(self) -> LeaseRecord | NotYet:
        """The record, once someone holds the Lease (for eventually)."""
        return await self.read() or NotYet(None)

    def held_by_other_than(self, holder: str) -> Callable[[], Awaitable[LeaseRecord | NotYet]]:
        """A check for eventually: the record once another identity holds the Lease."""

        async def check() -> LeaseRecord | NotYet:
            record = await self.read()
            return record if record and record.holder != holder else NotYet(record)

        return check
