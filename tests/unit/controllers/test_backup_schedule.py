"""Scheduled backups (pure decision): fire times, missed schedules, names, retention, bad schedules."""

from __future__ import annotations

import datetime
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controllers.backup_schedule import storage_reason
from controllers.backup_schedule_decision import (
    DELETED_REASON,
    INVALID_REASON,
    MAX_DELETIONS_PER_PASS,
    RETENTION_FAILED_REASON,
    SCHEDULED_REASON,
    ClusterFacts,
    InvalidSchedule,
    Phase,
    ScheduleDecision,
    ScheduleSpec,
    backup_name,
    check_schedule,
    decide,
    latest_fire,
    next_fire,
    retention,
)
from controllers.shared.backups import SCHEDULED_AT_ANNOTATION, SCHEDULED_LABEL, BackupFacts, newest_completed
from controllers.shared.names import CLUSTER_LABEL
from controllers.shared.storage import StoreUnavailable
from valkey_operator.core.events import WARNING

DESTINATION = {"endpoint": "https://127.0.0.1:9000", "bucket": "backups", "credentialsSecretName": "s3"}
DAILY = "0 3 * * *"


def at(text: str) -> float:
    """'2026-12-03 03:00:00' in UTC as seconds since the epoch."""
    return datetime.datetime.fromisoformat(text).replace(tzinfo=datetime.UTC).timestamp()


def cluster(
    schedule: str | None = DAILY,
    *,
    keep: int | None = 3,
    created: str = "2026-12-01 10:00:00",
    generation: int = 1,
    since: float | None = None,
) -> ClusterFacts:
    backup = ScheduleSpec(schedule=schedule, keep=keep, destination=DESTINATION) if schedule else None
    return ClusterFacts(
        namespace="prod",
        name="cache",
        uid="uid-1",
        created=at(created),
        generation=generation,
        backup=backup,
        since=since,
    )


def scheduled(fire: str, phase: str = Phase.COMPLETED, **kwargs: Any) -> BackupFacts:
    time = at(fire)
    return BackupFacts(
        name=backup_name("cache", time),
        phase=phase,
        created=time + 5,
        scheduled=True,
        scheduled_at=time,
        **kwargs,
    )


def manual(name: str, created: str, phase: str = Phase.COMPLETED) -> BackupFacts:
    return BackupFacts(name=name, phase=phase, created=at(created), scheduled=False)


# --- fire times and names ---


def test_fire_times_are_utc_minutes_and_the_latest_includes_now() -> None:
    assert latest_fire(DAILY, at("2026-12-03 03:00:00")) == at("2026-12-03 03:00:00")
    assert latest_fire(DAILY, at("2026-12-03 02:59:59")) == at("2026-12-02 03:00:00")
    assert next_fire(DAILY, at("2026-12-03 03:00:00")) == at("2026-12-04 03:00:00")
    assert next_fire("*/15 * * * *", at("2026-12-03 03:07:10")) == at("2026-12-03 03:15:00")
    assert latest_fire("0 4 * * mon", at("2026-12-03 12:00:00")) == at("2026-11-30 04:00:00")


def test_a_name_is_the_cluster_and_the_fire_time_in_utc() -> None:
    assert backup_name("cache", at("2026-12-03 03:00:00")) == "cache-20261203030000"


def test_a_due_backup_is_created_with_labels_and_annotation_and_no_owner() -> None:
    decision = decide(cluster(), [], at("2026-12-02 03:00:20"))
    assert decision.create is not None
    meta = decision.create["metadata"]
    assert meta["name"] == "cache-20261202030000" and meta["namespace"] == "prod"
    assert meta["labels"] == {CLUSTER_LABEL: "cache", SCHEDULED_LABEL: "true"}
    assert CLUSTER_LABEL == "valkey.gomomento.com/cluster"
    assert meta["annotations"] == {SCHEDULED_AT_ANNOTATION: "2026-12-02T03:00:00Z"}
    assert "ownerReferences" not in meta, "a deleted cluster keeps its backups: they may restore it"
    assert decision.create["kind"] == "ValkeyBackup"
    assert decision.create["spec"] == {"clusterName": "cache", "destination": DESTINATION}
    assert [event.reason for event in decision.events] == [SCHEDULED_REASON]
    assert decision.requeue_after == pytest.approx(at("2026-12-03 03:00:00") - at("2026-12-02 03:00:20"))


def test_a_scheduled_backup_takes_the_schedules_consistency() -> None:
    facts = attrs.evolve(
        cluster(),
        backup=ScheduleSpec.read(
            {"schedule": DAILY, "keep": 3, "destination": DESTINATION, "consistency": "OneInstant"}
        ),
    )
    decision = decide(facts, [], at("2026-12-02 03:00:20"))
    assert decision.create is not None
    assert decision.create["spec"] == {
        "clusterName": "cache",
        "destination": DESTINATION,
        "consistency": "OneInstant",
    }


def test_nothing_is_owed_for_fire_times_before_the_cluster_existed() -> None:
    decision = decide(cluster(created="2026-12-01 10:00:00"), [], at("2026-12-01 10:05:00"))
    assert decision.create is None
    assert decision.requeue_after == pytest.approx(at("2026-12-02 03:00:00") - at("2026-12-01 10:05:00"))


def test_fire_times_before_the_schedule_began_are_not_owed() -> None:
    """Generation 1: spec.backup was there from creation; later: it was added now, unless the
    cluster has scheduled backups (an operator restarted: the newest backup anchors)."""
    now = at("2026-12-05 12:00:00")
    from_creation = decide(cluster(generation=1), [], now)
    assert from_creation.since == at("2026-12-01 10:00:00")
    assert from_creation.create is not None  # the 5th's 03:00 is owed: the cluster had a schedule then
    added_later = decide(cluster(generation=4), [], now)
    assert added_later.since == now
    assert added_later.create is None  # adding a schedule takes no backup for a fire time already past
    remembered = decide(cluster(generation=4, since=now), [], at("2026-12-06 03:00:01"))
    assert remembered.since == now and remembered.create is not None
    restarted = decide(cluster(generation=4), [scheduled("2026-12-03 03:00:00")], now)
    assert restarted.create is not None  # the 4th and 5th were missed while down: the 5th is owed
    readded = attrs.evolve(cluster(generation=4), seen_unscheduled=True)
    assert decide(readded, [scheduled("2026-12-03 03:00:00")], now).create is None


def test_a_cluster_without_a_schedule_gets_nothing_and_is_remembered_as_such() -> None:
    decision = decide(cluster(None, since=at("2026-12-01 10:00:00")), [], at("2026-12-05 12:00:00"))
    assert decision == ScheduleDecision()
    nothing = decide(cluster(None), [scheduled("2026-12-02 03:00:00")], at("2026-12-05 12:00:00"))
    assert nothing == ScheduleDecision()


# --- missed schedules, busy clusters, idempotence ---


def test_fire_times_missed_while_the_operator_was_down_give_one_backup_the_latest() -> None:
    last = scheduled("2026-12-02 03:00:00")
    decision = decide(cluster(since=at("2026-12-01 10:00:00")), [last], at("2026-12-09 15:30:00"))
    assert decision.create is not None
    assert decision.create["metadata"]["name"] == "cache-20261209030000"
    created = BackupFacts.read({**decision.create, "metadata": {**decision.create["metadata"]}})
    again = decide(cluster(since=at("2026-12-01 10:00:00")), [last, created], at("2026-12-09 15:31:00"))
    assert again.create is None
    done = attrs.evolve(created, phase=Phase.COMPLETED)
    later = decide(cluster(since=at("2026-12-01 10:00:00")), [last, done], at("2026-12-09 23:00:00"))
    assert later.create is None  # the missed 3rd..8th are never taken afterwards


def test_no_backup_starts_while_one_of_the_cluster_is_pending_or_running() -> None:
    since = at("2026-12-01 10:00:00")
    now = at("2026-12-03 03:00:30")
    for phase in ("", Phase.PENDING, Phase.RUNNING):
        running = manual("by-hand", "2026-12-03 02:59:00", phase)
        decision = decide(cluster(since=since), [running], now)
        assert decision.create is None, phase
        assert decision.requeue_after is not None
    finished = manual("by-hand", "2026-12-03 02:59:00", Phase.COMPLETED)
    assert decide(cluster(since=since), [finished], now).create is not None


def test_a_backup_late_because_one_was_running_is_taken_once_it_finished() -> None:
    """An hourly schedule whose 00:00 backup ran 90 minutes: the 01:00 one follows at 01:30."""
    hourly = cluster("0 * * * *", since=at("2026-12-01 10:00:00"))
    running = scheduled("2026-12-03 00:00:00", Phase.RUNNING)
    assert decide(hourly, [running], at("2026-12-03 01:10:00")).create is None
    done = attrs.evolve(running, phase=Phase.COMPLETED)
    decision = decide(hourly, [done], at("2026-12-03 01:30:00"))
    assert decision.create is not None and decision.create["metadata"]["name"] == "cache-20261203010000"


def test_the_same_fire_time_never_gets_a_second_backup() -> None:
    """The name is the fire time; one that exists (any phase, even being deleted) is never made again."""
    since = at("2026-12-01 10:00:00")
    now = at("2026-12-03 03:00:30")
    first = decide(cluster(since=since), [], now)
    assert first.create is not None
    assert decide(cluster(since=since), [], now + 20).create == first.create  # same name, AlreadyExists
    for phase in (Phase.FAILED, Phase.COMPLETED):
        existing = scheduled("2026-12-03 03:00:00", phase)
        assert decide(cluster(since=since), [existing], now).create is None
        deleting = attrs.evolve(existing, deleting=True)
        assert decide(cluster(since=since), [deleting], now).create is None


def test_an_already_existing_backup_is_not_announced_again() -> None:
    decision = decide(cluster(since=at("2026-12-01 10:00:00")), [], at("2026-12-03 03:00:30"))
    assert [event.reason for event in decision.after({}, created=True)] == [SCHEDULED_REASON]
    assert decision.after({}, created=False) == ()


# --- retention ---


def test_retention_deletes_the_oldest_completed_beyond_keep_oldest_first() -> None:
    days = [scheduled(f"2026-12-0{day} 03:00:00") for day in (4, 1, 3, 5, 2)]
    assert retention(days, 2) == ("cache-20261201030000", "cache-20261202030000", "cache-20261203030000")


def test_retention_never_deletes_a_pending_or_running_backup() -> None:
    backups = [
        scheduled("2026-12-01 03:00:00", Phase.RUNNING),
        scheduled("2026-12-02 03:00:00", Phase.PENDING),
        scheduled("2026-12-03 03:00:00", ""),
        scheduled("2026-12-04 03:00:00"),
        scheduled("2026-12-05 03:00:00"),
    ]
    assert retention(backups, 1) == ("cache-20261204030000",)


def test_failed_backups_older_than_the_newest_completed_go_and_at_most_keep_newer_stay() -> None:
    backups = [
        scheduled("2026-12-01 03:00:00", Phase.FAILED),
        scheduled("2026-12-02 03:00:00"),
        scheduled("2026-12-03 03:00:00", Phase.FAILED),
        scheduled("2026-12-04 03:00:00", Phase.FAILED),
        scheduled("2026-12-05 03:00:00", Phase.FAILED),
    ]
    assert retention(backups, 2) == ("cache-20261201030000", "cache-20261203030000")
    no_completed = [b for b in backups if b.phase == Phase.FAILED]
    assert retention(no_completed, 2) == ("cache-20261201030000", "cache-20261203030000")


def test_retention_leaves_backups_made_by_hand_and_backups_a_cluster_restores_from() -> None:
    backups = [
        manual("before-upgrade", "2026-11-01 00:00:00"),
        scheduled("2026-12-01 03:00:00"),
        scheduled("2026-12-02 03:00:00"),
        scheduled("2026-12-03 03:00:00"),
    ]
    assert retention(backups, 1) == ("cache-20261201030000", "cache-20261202030000")
    assert retention(backups, 1, protected={"cache-20261201030000"}) == ("cache-20261202030000",)


def test_a_long_backlog_goes_a_few_per_pass_and_the_next_pass_comes_at_once() -> None:
    backups = [scheduled(f"2026-11-{day:02d} 03:00:00") for day in range(1, 21)]
    decision = decide(cluster(keep=2, since=at("2026-10-01 00:00:00")), backups, at("2026-11-20 12:00:00"))
    assert len(decision.delete) == MAX_DELETIONS_PER_PASS
    assert decision.delete[0] == "cache-20261101030000"
    assert decision.requeue_after == 1.0


def test_no_keep_means_no_retention() -> None:
    backups = [scheduled(f"2026-12-0{day} 03:00:00") for day in range(1, 6)]
    decision = decide(cluster(keep=None, since=at("2026-11-01 00:00:00")), backups, at("2026-12-05 12:00:00"))
    assert decision.delete == ()


def test_after_a_pass_deleted_and_kept_backups_each_get_their_event() -> None:
    backups = [scheduled(f"2026-12-0{day} 03:00:00") for day in (1, 2, 3)]
    decision = decide(cluster(keep=1, since=at("2026-11-01 00:00:00")), backups, at("2026-12-03 12:00:00"))
    events = decision.after({"cache-20261202030000": "object storage: AccessDenied"})
    assert [(event.reason, event.type) for event in events] == [
        (DELETED_REASON, "Normal"),
        (RETENTION_FAILED_REASON, WARNING),
    ]
    assert "AccessDenied" in events[1].message and "cache-20261202030000" in events[1].message


# --- bad schedules ---


@pytest.mark.parametrize(
    "schedule",
    [
        "0 3 * * * *",
        "0 3 * *",
        "H 3 * * *",
        "R 3 * * *",
        "61 * * * *",
        "*/0 * * * *",
        "0 0 31 2 *",
        "@daily",
        "",
    ],
)
def test_an_invalid_schedule_creates_nothing_and_says_why(schedule: str) -> None:
    with pytest.raises(InvalidSchedule):
        check_schedule(schedule)
    spec = ScheduleSpec(schedule=schedule, keep=1, destination=DESTINATION)
    facts = attrs.evolve(cluster(since=at("2026-12-01 10:00:00")), backup=spec)
    old = [scheduled("2026-12-01 11:00:00"), scheduled("2026-12-02 11:00:00")]
    decision = decide(facts, old, at("2026-12-03 12:00:00"))
    assert decision.create is None and decision.problem is not None
    assert [(event.type, event.reason) for event in decision.events] == [(WARNING, INVALID_REASON)]
    assert decision.requeue_after is None
    assert decision.delete == ("cache-20261201110000",)  # keep is valid: retention still runs


def test_cron_names_and_vixie_day_rules_are_accepted() -> None:
    assert check_schedule(" 0  3 * mar,apr thu ") == "0 3 * mar,apr thu"
    assert check_schedule("30 2 1 * sun") == "30 2 1 * sun"
    assert check_schedule("0 0 29 2 *") == "0 0 29 2 *"


# --- reading the cached objects ---


def test_facts_are_read_from_the_cached_objects() -> None:
    facts = ClusterFacts.read(
        {
            "metadata": {
                "name": "cache",
                "namespace": "prod",
                "uid": "u",
                "generation": 2,
                "creationTimestamp": "2026-12-01T10:00:00Z",
            },
            "spec": {"backup": {"schedule": DAILY, "keep": 0, "destination": DESTINATION}},
        }
    )
    assert facts.created == at("2026-12-01 10:00:00") and facts.generation == 2 and facts.since is None
    assert facts.backup == ScheduleSpec(schedule=DAILY, keep=1, destination=DESTINATION)
    backup = BackupFacts.read(
        {
            "metadata": {
                "name": "cache-20261202030000",
                "creationTimestamp": "2026-12-02T03:00:02Z",
                "labels": {SCHEDULED_LABEL: "true"},
                "annotations": {SCHEDULED_AT_ANNOTATION: "2026-12-02T03:00:00Z"},
                "deletionTimestamp": "2026-12-03T00:00:00Z",
            },
            "status": {"phase": "Failed"},
        }
    )
    assert backup == BackupFacts(
        name="cache-20261202030000",
        phase=Phase.FAILED,
        created=at("2026-12-02 03:00:02"),
        scheduled=True,
        scheduled_at=at("2026-12-02 03:00:00"),
        deleting=True,
    )
    unlabelled = BackupFacts.read({"metadata": {"name": "x", "creationTimestamp": "2026-12-02T03:00:02Z"}})
    assert not unlabelled.scheduled and unlabelled.phase == "" and unlabelled.in_flight


def test_the_last_backup_is_the_newest_completed_scheduled_one() -> None:
    backups = [
        scheduled("2026-12-01 03:00:00"),
        manual("by-hand", "2026-12-02 09:00:00"),
        scheduled("2026-12-03 03:00:00", Phase.FAILED),
    ]
    newest = newest_completed(backups)
    assert newest is not None and newest.name == "cache-20261201030000"  # the schedule's, not by hand
    assert newest_completed([]) is None


def test_storage_problems_are_named_by_the_store_never_by_a_signed_url() -> None:
    assert (
        storage_reason(StoreUnavailable("BucketMissing", "bucket b is missing"))
        == "object storage: BucketMissing: bucket b is missing"
    )
    assert storage_reason(TimeoutError()) == "object storage did not answer within 60 s"
    assert "secret" not in storage_reason(OSError("https://x/?X-Amz-Signature=secret"))


# --- properties ---

PHASES = st.sampled_from([Phase.COMPLETED, Phase.FAILED, Phase.RUNNING, Phase.PENDING, ""])


@st.composite
def backup_sets(draw: st.DrawFn) -> list[BackupFacts]:
    hours = draw(st.lists(st.integers(0, 500), min_size=0, max_size=25, unique=True))
    found = []
    for hour in hours:
        time = at("2026-11-01 00:00:00") + hour * 3600
        kind = draw(st.sampled_from(["scheduled", "scheduled", "manual"]))
        found.append(
            BackupFacts(
                name=backup_name("cache", time) if kind == "scheduled" else f"manual-{hour}",
                phase=draw(PHASES),
                created=time + 1,
                scheduled=kind == "scheduled",
                scheduled_at=time if kind == "scheduled" else None,
            )
        )
    return found


@given(backup_sets(), st.integers(1, 6), st.sets(st.integers(0, 500), max_size=3))
def test_retention_keeps_keep_completed_never_touches_running_manual_or_protected(
    backups: list[BackupFacts], keep: int, protected_hours: set[int]
) -> None:
    protected = {backup_name("cache", at("2026-11-01 00:00:00") + hour * 3600) for hour in protected_hours}
    doomed = set(retention(backups, keep, protected))
    by_name = {backup.name: backup for backup in backups}
    assert all(by_name[name].scheduled and not by_name[name].in_flight for name in doomed)
    assert not doomed & protected
    counted = [b for b in backups if b.scheduled and b.name not in protected]
    completed = [b for b in counted if b.phase == Phase.COMPLETED]
    kept_completed = [b for b in completed if b.name not in doomed]
    assert len(kept_completed) == min(keep, len(completed))
    assert all(b.time >= d.time for b in kept_completed for d in completed if d.name in doomed)
    kept_failed = [b for b in counted if b.phase == Phase.FAILED and b.name not in doomed]
    assert len(kept_failed) <= keep
    if counted:
        newest = max(counted, key=lambda b: (b.time, b.name))
        assert newest.name not in doomed  # the anchor never moves back


SCHEDULES = st.sampled_from(["0 3 * * *", "*/30 * * * *", "15 */6 * * *", "0 4 * * mon", "0 0 1 * *"])


@settings(max_examples=60, deadline=None)
@given(
    SCHEDULES,
    st.lists(st.tuples(st.integers(1, 3 * 86400), st.integers(0, 5 * 3600), st.booleans()), max_size=30),
)
def test_passes_at_any_times_never_burst_never_repeat_never_overlap(
    schedule: str, steps: list[tuple[int, int, bool]]
) -> None:
    """Passes at random gaps (operator downtime included); each created backup runs for a random
    time and completes or fails. Every creation is the latest fire time at that moment, strictly
    newer than every earlier one, and none starts while another is running."""
    facts = cluster(schedule, keep=2, since=at("2026-11-01 00:00:00"))
    now = at("2026-11-01 00:00:00")
    backups: dict[str, BackupFacts] = {}
    finishes: dict[str, float] = {}
    created_fires: list[float] = []
    for gap, duration, succeeds in steps:
        now += gap
        for name, finish in finishes.items():
            if finish <= now and name in backups and backups[name].in_flight:
                phase = Phase.COMPLETED if succeeds else Phase.FAILED
                backups[name] = attrs.evolve(backups[name], phase=phase)
        decision = decide(facts, list(backups.values()), now)
        for name in decision.delete:
            del backups[name]
        if decision.create is not None:
            created = BackupFacts.read({**decision.create, "status": {"phase": Phase.PENDING}})
            assert created.name not in backups
            assert not any(backup.in_flight for backup in backups.values())
            assert created.scheduled_at == latest_fire(schedule, now) <= now
            assert all(created.time > earlier for earlier in created_fires)
            created_fires.append(created.time)
            backups[created.name] = created
            finishes[created.name] = now + duration
        assert decision.requeue_after is not None and decision.requeue_after > 0
        assert len([b for b in backups.values() if b.phase == Phase.COMPLETED]) <= 2
