"""The chaos schedule is a pure function of its seed, and every change it plans changes something."""

from __future__ import annotations

from collections import Counter

from valkey_testbed.chaos import schedule
from valkey_testbed.chaos.schedule import Bounds, plan


def test_the_same_seed_plans_the_same_steps_and_another_seed_others() -> None:
    assert plan(7, 200) == plan(7, 200)
    assert plan(7, 200) != plan(8, 200)


def test_a_longer_plan_starts_with_the_shorter_one() -> None:
    """A run that lasts longer replays a shorter run's steps first: a seed and step number reproduce."""
    assert plan(11, 500)[:40] == plan(11, 40)


def test_every_fault_and_change_kind_occurs_and_settles_come_at_their_period() -> None:
    steps = plan(3, 600)
    kinds = Counter(step.kind for step in steps)
    assert set(kinds) == {*schedule.FAULTS, *schedule.CHANGES, schedule.SETTLE}
    every = Bounds().settle_every
    assert [step.index for step in steps if step.kind == schedule.SETTLE] == list(
        range(every - 1, 600, every)
    )
    assert [step.index for step in steps] == list(range(600))


def test_scale_targets_stay_in_bounds_and_always_differ_from_the_last_one() -> None:
    bounds = Bounds(shards=(2, 4), replicas=(1, 2))
    for seed in range(20):
        shards, replicas = 3, 1
        for step in plan(seed, 300, shards=shards, replicas=replicas, bounds=bounds):
            if step.kind == schedule.SCALE_SHARDS:
                assert 2 <= step.value <= 4 and step.value != shards, (seed, step)
                shards = step.value
            elif step.kind == schedule.SCALE_REPLICAS:
                assert 1 <= step.value <= 2 and step.value != replicas, (seed, step)
                replicas = step.value


def test_runtime_setting_roll_and_role_changes_always_change_the_value() -> None:
    last: dict[str, int] = {schedule.RUNTIME_SETTING: 0, schedule.ROLL: 0, schedule.ROLE_EDIT: 0}
    for step in plan(5, 400):
        if step.kind in last:
            assert step.value != last[step.kind], step
            last[step.kind] = step.value


def test_a_paused_server_stays_stopped_longer_than_the_node_timeout() -> None:
    bounds = Bounds(node_timeout=5.0)
    pauses = [step for step in plan(9, 800, bounds=bounds) if step.kind == schedule.PAUSE_VALKEY]
    assert pauses and all(step.hold > bounds.node_timeout + 1 for step in pauses)
    failures = [step for step in plan(9, 800, bounds=bounds) if step.kind == schedule.FAIL_NODE]
    assert failures and all(step.hold > 15.0 for step in failures)  # the node monitor grace period


def test_steps_describe_themselves_for_the_timeline() -> None:
    steps = {step.kind: step for step in plan(2, 300)}
    assert steps[schedule.SCALE_SHARDS].describe().startswith("shards -> ")
    assert "maxmemory-policy -> " in steps[schedule.RUNTIME_SETTING].describe()
    assert "hold" in steps[schedule.PAUSE_VALKEY].describe()
    assert steps[schedule.DELETE_POD].describe().startswith("pick ")
