"""maxConcurrentRollouts: slots counted from statuses and the claims in each Memory, admitted by decide."""

from __future__ import annotations

import attrs
import observed

from controllers.cluster.decision.decide import RolloutSlot, RolloutSlots, admit
from controllers.cluster.decision.desired import Desired
from controllers.cluster.decision.memory import CLAIM_TTL, Memory, slot_holders
from controllers.cluster.decision.view import outdated_pods
from controllers.shared.observation import PodObservation, PodPhase


def may_roll(
    memories: dict[str, Memory], shown: list[str], now: float, limit: int, cluster: str, outdated: bool
) -> bool:
    """One pass as the reconciler runs it: the holders from the statuses and every cluster's memory,
    the admission, and the claim remembered in the cluster's memory."""
    holders = slot_holders(shown, memories, now)
    admitted, slot = admit(outdated, RolloutSlots(limit=limit, holders=holders), cluster)
    memory = memories.get(cluster, Memory())
    if slot is RolloutSlot.CLAIM:
        memory = attrs.evolve(memory, claim_until=now + CLAIM_TTL)
    elif slot is RolloutSlot.RELEASE:
        memory = attrs.evolve(memory, claim_until=None)
    memories[cluster] = memory
    return admitted


def test_clusters_beyond_the_limit_wait_and_start_as_slots_free_up() -> None:
    shown: list[str] = []
    memories: dict[str, Memory] = {}
    assert may_roll(memories, shown, 0.0, 1, "ns/a", outdated=True)  # claims the one slot
    assert not may_roll(memories, shown, 1.0, 1, "ns/b", outdated=True)  # before a's status shows its roll
    shown.append("ns/a")
    assert may_roll(memories, shown, 2.0, 1, "ns/a", outdated=True)
    assert not may_roll(memories, shown, 3.0, 1, "ns/b", outdated=True)
    shown.remove("ns/a")
    assert may_roll(memories, shown, 4.0, 1, "ns/a", outdated=False)  # a finished: its claim is gone
    assert may_roll(memories, shown, 5.0, 1, "ns/b", outdated=True)
    assert may_roll(memories, shown, 6.0, 1, "ns/c", outdated=False)  # nothing to roll never waits


def test_no_limit_and_lapsed_claims() -> None:
    assert admit(True, RolloutSlots(limit=0, holders=frozenset({"ns/x"})), "ns/a") == (True, RolloutSlot.KEEP)
    memories: dict[str, Memory] = {}
    assert may_roll(memories, [], 0.0, 1, "ns/a", outdated=True)
    # a claim whose cluster never showed a roll lapses
    assert may_roll(memories, [], CLAIM_TTL + 1, 1, "ns/b", outdated=True)


def pod(name: str, shard: int, template: str, phase: PodPhase = PodPhase.RUNNING) -> PodObservation:
    return observed.pod(name, shard, template=template, phase=phase)


def test_admission_asks_for_a_slot_only_for_pods_the_roll_replaces() -> None:
    """One definition of outdated: an ended pod of an old template (kept as evidence) and a pod of a
    shard beyond spec.shards (drained, not rolled) take no rollout slot; a live in-spec one does."""
    desired = Desired(shards=2, replicas_per_shard=0, template_hash="new", image="i")
    ended = pod("c-0-a", 0, "old", PodPhase.FAILED)
    beyond = pod("c-2-a", 2, "old")
    assert outdated_pods([ended, beyond, pod("c-1-a", 1, "new")], desired) == ()
    live = pod("c-1-b", 1, "old")
    assert outdated_pods([ended, beyond, live], desired) == (live,)
