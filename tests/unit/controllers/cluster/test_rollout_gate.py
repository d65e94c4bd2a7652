"""maxConcurrentRollouts: slots counted from statuses, and claimed within the process (fake clock)."""

from __future__ import annotations

from controllers.cluster.rollout_gate import CLAIM_TTL, RolloutGate


def test_clusters_beyond_the_limit_wait_and_start_as_slots_free_up() -> None:
    shown: list[str] = []
    now = [0.0]
    gate = RolloutGate(1, lambda: shown, clock=lambda: now[0])
    assert gate.may_roll("ns/a", outdated=True)  # claims the one slot
    assert not gate.may_roll("ns/b", outdated=True)  # before a's status shows its roll
    shown.append("ns/a")
    assert gate.may_roll("ns/a", outdated=True)
    assert not gate.may_roll("ns/b", outdated=True)
    shown.remove("ns/a")
    assert gate.may_roll("ns/a", outdated=False)  # a finished: its claim is gone
    assert gate.may_roll("ns/b", outdated=True)
    assert gate.may_roll("ns/c", outdated=False)  # nothing to roll never waits


def test_no_limit_and_lapsed_claims() -> None:
    assert RolloutGate(0, list).may_roll("ns/a", outdated=True)
    now = [0.0]
    gate = RolloutGate(1, list, clock=lambda: now[0])
    assert gate.may_roll("ns/a", outdated=True)
    now[0] += CLAIM_TTL + 1  # a claim whose cluster never showed a roll lapses
    assert gate.may_roll("ns/b", outdated=True)
