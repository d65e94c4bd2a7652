"""The seeded schedule of a chaos run: which fault or spec change comes next, and how long it lasts.

Pure: `plan(seed, count)` returns the same steps for the same seed, so a
violation report's seed and step number reproduce the sequence. Targets (which
pod, which node) are not chosen here, since pods change names as the run goes:
each step carries a `pick`, and the runner takes candidate number
`pick % len(candidates)` among the live ones, sorted by name.

Invariants of a plan:
- a change always changes something: shard and replica targets stay within
  their bounds and differ from the previous target;
- every `settle_every`-th step is a settle (wait for Active, check the status
  against the nodes), so faults do not pile up without the cluster ever healing;
- a fault's `hold` is how long it lasts before it is undone (a paused server
  stays stopped longer than the cluster-node-timeout; a failed node longer
  than the node monitor grace period).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import attrs

DELETE_POD = "delete-pod"
KILL_VALKEY = "kill-valkey"
PAUSE_VALKEY = "pause-valkey"
FAIL_NODE = "fail-node"
KILL_OPERATOR = "kill-operator"
CUT_OPERATOR = "cut-operator"
ROTATE_TLS = "rotate-tls"
FAULTS = (DELETE_POD, KILL_VALKEY, PAUSE_VALKEY, FAIL_NODE, KILL_OPERATOR, CUT_OPERATOR, ROTATE_TLS)
DATA_FAULTS = frozenset({DELETE_POD, KILL_VALKEY, PAUSE_VALKEY, FAIL_NODE})
"""Faults that take a copy of some shard's data away: run only while every shard has an in-sync replica."""

SCALE_SHARDS = "scale-shards"
SCALE_REPLICAS = "scale-replicas"
RUNTIME_SETTING = "runtime-setting"
ROLL = "roll"
ROLE_EDIT = "role-edit"
CHANGES = (SCALE_SHARDS, SCALE_REPLICAS, RUNTIME_SETTING, ROLL, ROLE_EDIT)

SETTLE = "settle"

# maxmemory-policy values the runtime-setting change cycles through (applied with CONFIG SET).
POLICIES = ("allkeys-lru", "volatile-lru", "allkeys-lfu", "noeviction")


@attrs.frozen
class Bounds:
    """What the schedule may ask of the cluster, and how long faults last (seconds)."""

    shards: tuple[int, int] = (2, 4)
    replicas: tuple[int, int] = (1, 2)
    node_timeout: float = 5.0
    gap: tuple[float, float] = (3.0, 12.0)
    fault_share: float = 0.6
    settle_every: int = 6


@attrs.frozen
class Step:
    """One step: `kind` is a fault, a change or a settle; fields a kind does not use are 0."""

    index: int
    kind: str
    gap: float
    """Seconds to wait before the step starts."""
    pick: int = 0
    hold: float = 0.0
    value: int = 0
    """A change's new value: shards, replicas, an index into POLICIES, a roll's variant, a role's variant."""

    def describe(self) -> str:
        details = {
            SCALE_SHARDS: f"shards -> {self.value}",
            SCALE_REPLICAS: f"replicasPerShard -> {self.value}",
            RUNTIME_SETTING: f"maxmemory-policy -> {POLICIES[self.value % len(POLICIES)]}",
            ROLL: f"roll to variant {self.value}",
            ROLE_EDIT: f"role variant {self.value}",
        }
        if self.kind in details:
            return details[self.kind]
        if self.hold:
            return f"pick {self.pick}, hold {self.hold:.1f}s"
        return f"pick {self.pick}" if self.kind in FAULTS else ""


@attrs.define
class _Desired:
    shards: int
    replicas: int
    policy: int = 0
    roll: int = 0
    role: int = 0


def plan(
    seed: int, count: int, *, shards: int = 3, replicas: int = 1, bounds: Bounds = Bounds()
) -> list[Step]:
    """The first `count` steps of the run seeded `seed`, from a cluster of shards x replicas."""
    steps = steps_of(seed, shards=shards, replicas=replicas, bounds=bounds)
    return [next(steps) for _ in range(count)]


def steps_of(seed: int, *, shards: int = 3, replicas: int = 1, bounds: Bounds = Bounds()) -> Iterator[Step]:
    """Every step of the run seeded `seed`, without end (the runner stops at its deadline)."""
    rng = random.Random(seed)
    desired = _Desired(shards, replicas)
    index = 0
    while True:
        gap = round(rng.uniform(*bounds.gap), 1)
        if (index + 1) % bounds.settle_every == 0:
            yield Step(index, SETTLE, gap)
        elif rng.random() < bounds.fault_share:
            kind = rng.choice(FAULTS)
            yield Step(index, kind, gap, pick=rng.randrange(1 << 16), hold=_hold(rng, kind, bounds))
        else:
            kind = rng.choice(CHANGES)
            yield Step(index, kind, gap, value=_change(rng, kind, desired, bounds))
        index += 1


def _hold(rng: random.Random, kind: str, bounds: Bounds) -> float:
    if kind == PAUSE_VALKEY:  # longer than the node timeout: the cluster must notice
        return round(bounds.node_timeout + rng.uniform(2.0, 8.0), 1)
    if kind == FAIL_NODE:  # past the 15 s node monitor grace period: Kubernetes notices too
        return round(rng.uniform(20.0, 40.0), 1)
    if kind == KILL_OPERATOR:
        return round(rng.uniform(1.0, 10.0), 1)
    if kind == CUT_OPERATOR:
        return round(rng.uniform(5.0, 30.0), 1)
    return 0.0


def _change(rng: random.Random, kind: str, desired: _Desired, bounds: Bounds) -> int:
    if kind == SCALE_SHARDS:
        desired.shards = _other(rng, desired.shards, bounds.shards)
        return desired.shards
    if kind == SCALE_REPLICAS:
        desired.replicas = _other(rng, desired.replicas, bounds.replicas)
        return desired.replicas
    if kind == RUNTIME_SETTING:
        desired.policy = (desired.policy + rng.randrange(1, len(POLICIES))) % len(POLICIES)
        return desired.policy
    if kind == ROLL:
        desired.roll = 1 - desired.roll
        return desired.roll
    desired.role = 1 - desired.role
    return desired.role


def _other(rng: random.Random, current: int, bounds: tuple[int, int]) -> int:
    low, high = bounds
    return rng.choice([value for value in range(low, high + 1) if value != current])
