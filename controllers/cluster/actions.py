"""What the cluster planner may ask for: one small frozen class per step (pure data).

`disruptive` marks the steps SPEC 5 allows one of at a time per cluster.
"""

from __future__ import annotations

from typing import ClassVar

import attrs

from controllers.cluster.observe import SlotRanges


@attrs.frozen
class CreatePod:
    """Create one pod for shard (the renderer names it uniquely)."""

    shard: int
    disruptive: ClassVar[bool] = False


@attrs.frozen
class DeletePod:
    """Delete a pod that holds no slots and is not the last copy of its shard."""

    pod: str
    reason: str
    disruptive: ClassVar[bool] = True


@attrs.frozen
class Meet:
    """CLUSTER MEET peer_ip, sent to the server in pod `node` (the seed) to introduce `peer`."""

    node: str
    peer: str
    peer_ip: str
    disruptive: ClassVar[bool] = False


@attrs.frozen
class AssignSlots:
    """CLUSTER ADDSLOTSRANGE on an empty primary: slots nobody owns yet."""

    node: str
    slots: SlotRanges
    disruptive: ClassVar[bool] = False


@attrs.frozen
class Replicate:
    """CLUSTER REPLICATE primary_id on the (empty, slotless) server in pod `node`."""

    node: str
    primary_id: str
    disruptive: ClassVar[bool] = False


@attrs.frozen
class Forget:
    """CLUSTER FORGET node_id on every listed pod's server, together, within the forget window.

    `lost` are slots the departed node still owned with no copy left anywhere
    (replicasPerShard 0): forgetting it lets them be served again, empty.
    """

    node_id: str
    on: tuple[str, ...]
    lost: SlotRanges = ()
    disruptive: ClassVar[bool] = False


@attrs.frozen
class MigrateSlots:
    """CLUSTER MIGRATESLOTS on the source primary in pod `node`: one atomic job moving slots to target_id."""

    node: str
    target_id: str
    slots: SlotRanges
    disruptive: ClassVar[bool] = False


@attrs.frozen
class Promote:
    """CLUSTER FAILOVER TAKEOVER on the replica in pod `node`: its primary `departed` is gone for good
    and too few primaries survive for Valkey's own vote to replace it."""

    node: str
    departed: str
    disruptive: ClassVar[bool] = False


Action = CreatePod | DeletePod | Meet | AssignSlots | Replicate | Forget | MigrateSlots | Promote
TopologyAction = Meet | AssignSlots | Replicate | Forget | MigrateSlots | Promote
