"""Leader-election timing with an injected clock (no server: the lease store is in memory)."""

from __future__ import annotations

import asyncio

import attrs
import pytest

from valkey_operator.core.clock import FakeClock
from valkey_operator.core.leaderelection import (
    LeaderElectionRecord,
    LeaderElector,
    LeadershipLost,
    ObservedLease,
    can_acquire,
    next_record,
    renew_deadline_passed,
)
from valkey_operator.core.rest import ApiError, TransportError


def record(holder: str, transitions: int = 0) -> LeaderElectionRecord:
    return LeaderElectionRecord(holder, 15, "t0", "t0", transitions)


def test_free_own_or_missing_lease_can_be_acquired() -> None:
    assert can_acquire(None, 0.0, 0.0, "me", 15)
    assert can_acquire(record(""), 0.0, 0.0, "me", 15)
    assert can_acquire(record("me"), 0.0, 0.0, "me", 15)


def test_someone_elses_lease_is_taken_only_after_a_full_unchanged_duration() -> None:
    assert not can_acquire(record("other"), 100.0, 114.9, "me", 15)
    assert can_acquire(record("other"), 100.0, 115.0, "me", 15)


def test_renew_deadline() -> None:
    assert not renew_deadline_passed(50.0, 59.9, 10)
    assert renew_deadline_passed(50.0, 60.0, 10)


def test_next_record_counts_transitions_only_on_holder_change() -> None:
    renewed = next_record(record("me", 3), "me", 15, "t1")
    assert (renewed.holder, renewed.transitions, renewed.acquire_time, renewed.renew_time) == (
        "me",
        3,
        "t0",
        "t1",
    )
    taken = next_record(record("other", 3), "me", 15, "t1")
    assert (taken.holder, taken.transitions, taken.acquire_time) == ("me", 4, "t1")
    assert next_record(None, "me", 15, "t1").transitions == 0


@attrs.define
class InMemoryLease:
    """A lease store with the API server's optimistic concurrency, for timing tests."""

    current: ObservedLease | None = None
    version: int = 0
    reachable: bool = True
    failure: Exception = attrs.field(factory=lambda: ApiError(503, b'{"reason": "ServiceUnavailable"}'))

    def _check(self) -> None:
        if not self.reachable:
            raise self.failure

    async def get(self) -> ObservedLease | None:
        self._check()
        return self.current

    async def create(self, rec: LeaderElectionRecord) -> ObservedLease:
        self._check()
        if self.current is not None:
            raise ApiError(409, b'{"reason": "AlreadyExists", "message": "exists"}')
        return self._store(rec)

    async def update(self, rec: LeaderElectionRecord, resource_version: str) -> ObservedLease:
        self._check()
        if self.current is None or self.current.resource_version != resource_version:
            raise ApiError(409, b'{"reason": "Conflict", "message": "stale"}')
        return self._store(rec)

    def _store(self, rec: LeaderElectionRecord) -> ObservedLease:
        self.version += 1
        self.current = ObservedLease(rec, str(self.version))
        return self.current


def elector(lease: InMemoryLease, identity: str, clock: FakeClock) -> LeaderElector:
    return LeaderElector(lease, identity, clock=clock)


async def test_standby_takes_over_only_after_lease_duration_of_silence() -> None:
    clock = FakeClock()
    lease = InMemoryLease()
    leader, standby = elector(lease, "a", clock), elector(lease, "b", clock)
    await leader.acquire()
    assert lease.current is not None and lease.current.record.holder == "a"

    waiting = asyncio.create_task(standby.acquire())
    await clock.wait_for_waiters()
    # The leader dies now (no more renewals). The standby first observes the record at t=0.
    while not waiting.done():
        deadline = clock.next_deadline()
        assert deadline is not None
        clock.set_time(deadline)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        if not waiting.done():
            await clock.wait_for_waiters()
    await waiting
    assert lease.current.record.holder == "b"
    assert lease.current.record.transitions == 1
    # Not before lease_duration, and within lease_duration + one jittered retry period.
    assert 15.0 <= clock.now() <= 15.0 + 2.0 * 1.2


UNREACHABLE = {
    "503": ApiError(503, b'{"reason": "ServiceUnavailable", "message": "down"}'),
    "connection refused": TransportError("PUT /leases/x: ClientConnectorError: Connection refused"),
}


async def retry_sleep(clock: FakeClock, task: asyncio.Task[None] | None = None) -> None:
    """Until the elector sleeps its 2 s retry period (an attempt's own deadline timer is longer)."""
    while clock.next_deadline() != clock.now() + 2.0 and not (task and task.done()):
        await asyncio.sleep(0)


@pytest.mark.parametrize("failure", UNREACHABLE.values(), ids=UNREACHABLE.keys())
async def test_leader_that_cannot_renew_gives_up_at_the_renew_deadline(failure: Exception) -> None:
    clock = FakeClock()
    lease = InMemoryLease(failure=failure)
    leader = elector(lease, "a", clock)
    await leader.acquire()
    renewing = asyncio.create_task(leader.keep_renewing())
    for _ in range(3):  # healthy renewals every retry period
        await retry_sleep(clock)
        clock.step(2.0)
    await retry_sleep(clock)
    last_renewal = clock.now()
    lease.reachable = False
    while not renewing.done():
        await retry_sleep(clock, renewing)
        clock.step(2.0)
        await asyncio.sleep(0)
    with pytest.raises(LeadershipLost):
        await renewing
    assert not leader.is_leader
    assert 10.0 <= clock.now() - last_renewal <= 12.0


async def test_release_lets_a_standby_acquire_at_once() -> None:
    clock = FakeClock()
    lease = InMemoryLease()
    leader, standby = elector(lease, "a", clock), elector(lease, "b", clock)
    await leader.acquire()
    assert not await standby.try_acquire_or_renew()
    await leader.release()
    assert lease.current is not None and lease.current.record.holder == ""
    assert await standby.try_acquire_or_renew()
    assert lease.current.record.holder == "b"


def test_timing_must_be_ordered() -> None:
    with pytest.raises(ValueError):
        LeaderElector(InMemoryLease(), "a", lease_duration=10, renew_deadline=10)


async def test_a_standby_keeps_trying_through_connection_errors() -> None:
    clock = FakeClock()
    lease = InMemoryLease(reachable=False, failure=UNREACHABLE["connection refused"])
    standby = elector(lease, "b", clock)
    waiting = asyncio.create_task(standby.acquire())
    for _ in range(5):  # each attempt fails as a failed attempt, never as an exception
        await clock.wait_for_waiters()
        clock.step(3.0)
    assert not waiting.done()
    lease.reachable = True
    for _ in range(100):  # the next attempt succeeds
        if waiting.done():
            break
        clock.step(3.0)
        await asyncio.sleep(0)
    await waiting
    assert lease.current is not None and lease.current.record.holder == "b"
