"""The probe's version-floor shortcut is observation policy: it changes what is read, never an action.

A node below the floor is asked only its version (shared/probe.py). The rule that such a node never
joins is the View's (`View.rejected`, versions.meets_floor), applied to whatever the probe read; so
planning from the probe's short report or from a full one must give the same actions, requeue, state
and rejected pods. Only what the status can show about that node differs (its node id, which the
short report does not read).
"""

from __future__ import annotations

import attrs
import pytest
from planner_harness import Chaos, Run, one_pass
from simulate import SimSettings, SimulatedCluster

from controllers.cluster.decision.desired import Desired
from controllers.cluster.decision.plan import plan
from controllers.shared.observation import NodeObservation, Observation
from controllers.shared.versions import Version, meets_floor


def as_probed(observation: Observation) -> Observation:
    """What the probe reports: a reachable node below the floor carries its version and nothing else."""
    return attrs.evolve(
        observation,
        nodes={
            name: NodeObservation(
                reachable=True, version=node.version, version_text=node.version_text, served=node.served
            )
            if node.reachable and not meets_floor(node.version)
            else node
            for name, node in observation.nodes.items()
        },
    )


@pytest.mark.parametrize(
    "overrides",
    [{1: (7, 2, 4)}, {0: None}, {3: (8, 1, 0), 2: (9, 0, 0)}],
    ids=["an old replica", "a Redis primary", "two old nodes"],
)
def test_a_node_below_the_floor_is_decided_the_same_from_its_version_alone(
    overrides: dict[int, Version | None],
) -> None:
    sim = SimulatedCluster(SimSettings(version_overrides=overrides, ready_delays=(1, 2, 3)))
    result = Run(
        sim, Desired(shards=2, replicas_per_shard=1, template_hash="t1", image="valkey/valkey:9.1.0")
    )
    compared = 0
    for index in range(15):
        observation, context = sim.observe(), sim.context(recorded_state=result.recorded)
        full = plan(observation, result.desired, context)
        short = plan(as_probed(observation), result.desired, context)
        assert short.actions == full.actions, index
        assert short.requeue_after == full.requeue_after, index
        assert short.status.state is full.status.state, index
        assert [n.pod.name for n in short.view.rejected] == [n.pod.name for n in full.view.rejected], index
        compared += bool(full.view.rejected)
        one_pass(result, index, Chaos())
    assert compared >= 10, "the old nodes never answered: nothing was compared"
    assert result.last.status.state.value == "Failed"
