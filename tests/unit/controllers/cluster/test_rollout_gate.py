"""maxConcurrentRollouts: slots counted from statuses and claims (fake clock), admitted by decide."""

from __future__ import annotations

from controllers.cluster.decision.decide import RolloutSlot, RolloutSlots, admit
from controllers.cluster.decision.desired import Desired
from controllers.cluster.decision.view import outdated_pods
from controllers.cluster.rollout_gate import CLAIM_TTL, RolloutGate
from controllers.shared.observation import PodObservation, PodPhase


def may_roll(gate: RolloutGate, limit: int, cluster: str, outdated: bool) -> bool:
    """One pass as the reconciler runs it: gather the holders, decide, remember the claim."""
    admitted, slot = admit(outdated, RolloutSlots(limit=limit, holders=gate.holders()), cluster)
    if slot is RolloutSlot.CLAIM:
        gate.claim(cluster)
    elif slot is RolloutSlot.RELEASE:
        gate.release(cluster)
    return admitted


def test_clusters_beyond_the_limit_wait_and_start_as_slots_free_up() -> None:
    shown: list[str] = []
    now = [0.0]
    gate = RolloutGate(lambda: shown, clock=lambda: now[0])
    assert may_roll(gate, 1, "ns/a", outdated=True)  # claims the one slot
    assert not may_roll(gate, 1, "ns/b", outdated=True)  # before a's status shows its roll
    shown.append("ns/a")
    assert may_roll(gate, 1, "ns/a", outdated=True)
    assert not may_roll(gate, 1, "ns/b", outdated=True)
    shown.remove("ns/a")
    assert may_roll(gate, 1, "ns/a", outdated=False)  # a finished: its claim is gone
    assert may_roll(gate, 1, "ns/b", outdated=True)
    assert may_roll(gate, 1, "ns/c", outdated=False)  # nothing to roll never waits


def test_no_limit_and_lapsed_claims() -> None:
    assert admit(True, RolloutSlots(limit=0, holders=frozenset({"ns/x"})), "ns/a") == (True, RolloutSlot.KEEP)
    now = [0.0]
    gate = RolloutGate(list, clock=lambda: now[0])
    assert may_roll(gate, 1, "ns/a", outdated=True)
    now[0] += CLAIM_TTL + 1  # a claim whose cluster never showed a roll lapses
    assert may_roll(gate, 1, "ns/b", outdated=True)


def pod(name: str, shard: int, template: str, phase: PodPhase = PodPhase.RUNNING) -> PodObservation:
    return PodObservation(
        name=name,
        shard=shard,
        template_hash=template,
        phase=phase,
        ready=True,
        ip=None,
        deleting=False,
        created="",
    )


def test_admission_asks_for_a_slot_only_for_pods_the_roll_replaces() -> None:
    """One definition of outdated: an ended pod of an old template (kept as evidence) and a pod of a
    shard beyond spec.shards (drained, not rolled) take no rollout slot; a live in-spec one does."""
    desired = Desired(shards=2, replicas_per_shard=0, template_hash="new", image="i")
    ended = pod("c-0-a", 0, "old", PodPhase.FAILED)
    beyond = pod("c-2-a", 2, "old")
    assert outdated_pods([ended, beyond, pod("c-1-a", 1, "new")], desired) == ()
    live = pod("c-1-b", 1, "old")
    assert outdated_pods([ended, beyond, live], desired) == (live,)
