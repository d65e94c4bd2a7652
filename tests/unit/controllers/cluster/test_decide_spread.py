"""The reconciler's decision while the primary spread moves: one failover per pass, and a requeue within
REQUEUE_MOVING while it is under way (the next move is due once the replica reports itself primary, which
no watch event announces), back to the usual cadence once Valkey would have given the failover up."""

from __future__ import annotations

from decide_harness import NAME, World, run, world
from simulate import SimSettings

from controllers.cluster.decision import spread
from controllers.cluster.decision.actions import Failover
from controllers.cluster.decision.decide import Decision
from controllers.cluster.decision.plan import REQUEUE_STEADY, REQUEUE_WAITING

# Pods are bound round robin over this list in creation order: each shard's first pod on n1. The
# others start after PRIMARY_CHOICE_WAIT_S (LATE), so the bootstrap leaves all three primaries on n1
# (as slow nodes, or a node failure afterwards, would); two moves are needed (one to n2, one to n3).
STACKED = (("n1", "z1"), ("n1", "z1"), ("n1", "z1"), ("n2", "z2"), ("n3", "z3"), ("n2", "z2"))
LATE = (1, 1, 1, 5, 5, 5)


def failovers(decision: Decision) -> list[Failover]:
    return [action for action in decision.actions if isinstance(action, Failover)]


def settled(found: World) -> bool:
    """Active and past the spread: the pass looked again at the steady cadence."""
    return found.state == "Active" and found.decisions[-1].requeue_after >= REQUEUE_STEADY


def test_the_second_move_follows_the_first_in_the_next_pass_each_requeued_fast() -> None:
    settings = SimSettings(cluster=NAME, k8s_nodes=STACKED, ready_delays=LATE)
    found = run(world(3, 1, settings=settings), passes=120, until=settled)
    assert settled(found), found.status
    moving = [index for index, decision in enumerate(found.decisions) if failovers(decision)]
    assert [len(failovers(found.decisions[index])) for index in moving] == [1, 1]
    assert moving[1] == moving[0] + 1, moving  # the next pass, as soon as the first had happened
    assert all(found.decisions[index].requeue_after <= spread.REQUEUE_MOVING for index in moving)
    assert found.decisions[-1].status.max_primaries_per_node == 1


def test_a_failover_in_flight_requeues_fast_sends_nothing_more_then_slows_down() -> None:
    settings = SimSettings(
        cluster=NAME, k8s_nodes=STACKED, failing_failovers=frozenset({0}), ready_delays=LATE
    )
    found = run(world(3, 1, settings=settings), passes=120, until=settled)
    assert settled(found), found.status
    moving = [index for index, decision in enumerate(found.decisions) if failovers(decision)]
    sent, retried = moving[0], moving[1]
    waiting = found.decisions[sent + 1 : retried]
    assert waiting and not any(failovers(decision) for decision in waiting)
    requeues = [decision.requeue_after for decision in waiting]
    # One simulated pass is one second: fast within MOVING_WINDOW_S of the request, then the usual 2 s.
    window = int(spread.MOVING_WINDOW_S)
    assert all(requeue <= spread.REQUEUE_MOVING for requeue in requeues[: window - 1]), requeues
    assert all(requeue >= REQUEUE_WAITING for requeue in requeues[window + 1 :]), requeues
