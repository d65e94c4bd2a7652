"""Lease-based leader election with client-go's semantics.

Timing (defaults 15 s / 10 s / 2 s): a candidate may take a lease whose
record it has watched stay unchanged for `lease_duration` on its own clock
(never comparing clocks across machines); the leader renews every
`retry_period`, and if it cannot renew within `renew_deadline` it must stop
acting, because a standby may take over once `lease_duration` has passed.
On a clean stop the leader releases the lease so a standby takes over at once.

The decisions are pure functions of (observed record, when we observed it,
now); `LeaderElector` only loops, reads and writes the Lease.
"""

from __future__ import annotations

import contextlib
import random
from typing import Protocol

import attrs
import structlog

from valkey_operator.core.client import Client
from valkey_operator.core.clock import Clock, RealClock, micro_time, within
from valkey_operator.core.resource import LEASES
from valkey_operator.core.rest import ApiError, Obj, TransportError

log = structlog.get_logger(__name__)

JITTER_FACTOR = 1.2


@attrs.frozen
class LeaderElectionRecord:
    """The fields of a Lease spec that election reads and writes."""

    holder: str
    lease_duration_seconds: int
    acquire_time: str | None
    renew_time: str | None
    transitions: int


@attrs.frozen
class ObservedLease:
    record: LeaderElectionRecord
    resource_version: str


def can_acquire(
    observed: LeaderElectionRecord | None,
    observed_at: float,
    now: float,
    identity: str,
    lease_duration: float,
) -> bool:
    """May identity write itself as holder? Yes if free, ours, or unchanged for a full lease duration."""
    if observed is None or not observed.holder or observed.holder == identity:
        return True
    return observed_at + lease_duration <= now


def renew_deadline_passed(last_renewed_at: float, now: float, renew_deadline: float) -> bool:
    """A leader that has not renewed for renew_deadline must stop: a standby may soon take over."""
    return now - last_renewed_at >= renew_deadline


def longest_handover(lease_duration: float, retry_period: float) -> float:
    """The longest a standby can take to lead after the leader's last renewal, in seconds: up to one
    jittered retry period until it sees that renewal (a changed record restarts its wait), the lease
    duration it then waits, and up to one more jittered retry period until its next attempt. Never
    less than lease_duration. Docs and tests quote this number, not a copy of it."""
    return lease_duration + 2 * JITTER_FACTOR * retry_period


def next_record(
    observed: LeaderElectionRecord | None, identity: str, lease_duration: float, wall_now: str
) -> LeaderElectionRecord:
    """The record to write when acquiring or renewing; transitions count holder changes."""
    if observed is not None and observed.holder == identity:
        return attrs.evolve(observed, renew_time=wall_now, lease_duration_seconds=int(lease_duration))
    transitions = observed.transitions + 1 if observed is not None else 0
    return LeaderElectionRecord(identity, int(lease_duration), wall_now, wall_now, transitions)


class LeaseLock(Protocol):
    """Where the record lives; `update` fails with a conflict if resource_version is stale."""

    async def get(self) -> ObservedLease | None: ...

    async def create(self, record: LeaderElectionRecord) -> ObservedLease: ...

    async def update(self, record: LeaderElectionRecord, resource_version: str) -> ObservedLease: ...


def _record_from(lease: Obj) -> ObservedLease:
    spec = lease.get("spec", {})
    record = LeaderElectionRecord(
        holder=spec.get("holderIdentity") or "",
        lease_duration_seconds=spec.get("leaseDurationSeconds") or 0,
        acquire_time=spec.get("acquireTime"),
        renew_time=spec.get("renewTime"),
        transitions=spec.get("leaseTransitions") or 0,
    )
    return ObservedLease(record, lease["metadata"]["resourceVersion"])


class KubernetesLeaseLock:
    """A coordination.k8s.io/v1 Lease."""

    def __init__(self, client: Client, namespace: str, name: str) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name

    def _body(self, record: LeaderElectionRecord, resource_version: str | None) -> Obj:
        metadata: Obj = {"name": self.name, "namespace": self.namespace}
        if resource_version:
            metadata["resourceVersion"] = resource_version
        return {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": metadata,
            "spec": {
                "holderIdentity": record.holder,
                "leaseDurationSeconds": record.lease_duration_seconds,
                "acquireTime": record.acquire_time,
                "renewTime": record.renew_time,
                "leaseTransitions": record.transitions,
            },
        }

    async def get(self) -> ObservedLease | None:
        lease = await self.client.get_or_none(LEASES, self.name, self.namespace)
        return _record_from(lease) if lease is not None else None

    async def create(self, record: LeaderElectionRecord) -> ObservedLease:
        return _record_from(await self.client.create(LEASES, self._body(record, None)))

    async def update(self, record: LeaderElectionRecord, resource_version: str) -> ObservedLease:
        return _record_from(await self.client.replace(LEASES, self._body(record, resource_version)))


class LeadershipLost(Exception):
    """The renew deadline passed: this process must stop acting now."""


@attrs.define
class LeaderElector:
    """Acquire, renew and release one lease as `identity`."""

    lock: LeaseLock
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    clock: Clock = attrs.field(factory=RealClock)
    _observed: ObservedLease | None = attrs.field(default=None, init=False)
    _observed_at: float = attrs.field(default=0.0, init=False)
    _last_renewed_at: float | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > JITTER_FACTOR * self.retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > 1.2 * retry_period > 0")

    @property
    def is_leader(self) -> bool:
        return self._last_renewed_at is not None

    def _observe(self, observed: ObservedLease | None) -> None:
        if observed is None or self._observed is None or observed.record != self._observed.record:
            self._observed_at = self.clock.now()
        self._observed = observed

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when we hold the lease afterwards."""
        try:
            current = await self.lock.get()
            self._observe(current)
            record = current.record if current else None
            if not can_acquire(
                record, self._observed_at, self.clock.now(), self.identity, self.lease_duration
            ):
                return False
            wanted = next_record(record, self.identity, self.lease_duration, micro_time(self.clock))
            written = (
                await self.lock.update(wanted, current.resource_version)
                if current is not None
                else await self.lock.create(wanted)
            )
        except (ApiError, TransportError) as exc:  # a failed attempt: keep trying until the deadline
            log.info("lease attempt failed", identity=self.identity, error=str(exc))
            return False
        self._observe(written)
        self._last_renewed_at = self.clock.now()
        return True

    async def acquire(self) -> None:
        """Return once we are the leader, retrying every retry_period (jittered)."""
        while not await self.try_acquire_or_renew():
            await self.clock.sleep(self.retry_period * (1 + random.random() * (JITTER_FACTOR - 1)))
        log.info("became leader", identity=self.identity)

    async def keep_renewing(self) -> None:
        """Renew every retry_period; raise LeadershipLost once the renew deadline has passed."""
        while True:
            assert self._last_renewed_at is not None, "keep_renewing() before acquire()"
            started = self.clock.now()
            remaining = self.renew_deadline - (started - self._last_renewed_at)
            if remaining > 0:
                with contextlib.suppress(TimeoutError):
                    await within(self.clock, remaining, self.try_acquire_or_renew())
            if renew_deadline_passed(self._last_renewed_at, self.clock.now(), self.renew_deadline):
                self._last_renewed_at = None
                raise LeadershipLost(f"{self.identity} failed to renew within {self.renew_deadline}s")
            await self.clock.sleep(self.retry_period)

    async def release(self) -> None:
        """Hand the lease back (holder cleared, 1 s duration) so a standby takes over at once."""
        if self._observed is None or self._last_renewed_at is None:
            return
        self._last_renewed_at = None
        now = micro_time(self.clock)
        released = LeaderElectionRecord("", 1, now, now, self._observed.record.transitions)
        try:
            await self.lock.update(released, self._observed.resource_version)
            log.info("released lease", identity=self.identity)
        except (ApiError, TransportError) as exc:
            log.warning("lease release failed", identity=self.identity, error=str(exc))
