"""What the cluster planner may ask for: one small frozen class per step (pure data).

`disruptive` marks the steps SPEC 5 allows one of at a time per cluster. The
actor carries out a plan's actions in the plan's order; what failed comes
back as `Failure`s, which the report turns into status (report.finish).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import attrs

from controllers.cluster.decision.desired import OwnedObject, object_key
from controllers.cluster.render.acl import UserAcl
from controllers.shared.observation import ContainerResources
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.slots import SlotRanges


@attrs.frozen
class Event:
    """A Kubernetes Event a pass records on the cluster (type Normal or Warning, reason, message)."""

    type: str
    reason: str
    message: str


@attrs.frozen
class NewPod:
    """The planner's intent of one more pod for shard, with these extra annotations and, with
    persistence, the existing `claim` it comes back on (a node lost without being planned). Not an
    action: decide.complete turns each into a whole CreatePod, and only those reach the actor."""

    shard: int
    annotations: tuple[tuple[str, str], ...] = ()
    claim: str = ""
    disruptive: ClassVar[bool] = False


@attrs.frozen(kw_only=True)
class CreatePod:
    """Create the pod `name` of shard with its whole rendered `body` (what is sent); on a new data
    claim (persistence) `claim_body` is created first, on an existing one `claim` names it. Made
    whole at once from a NewPod (decide.complete), never completed later."""

    shard: int
    name: str
    body: Obj = attrs.field(eq=False, repr=False)
    annotations: tuple[tuple[str, str], ...] = ()
    claim: str = ""
    claim_body: Obj | None = attrs.field(default=None, eq=False, repr=False)
    disruptive: ClassVar[bool] = False


@attrs.frozen
class DeletePod:
    """Delete a pod that holds no slots and is not the last copy of its shard (that incarnation only).

    A planned removal: with persistence decide names the pod's `claim`, deleted first (the
    pvc-protection finalizer keeps it until the pod is gone), so no later pod comes back on it."""

    pod: str
    reason: str
    uid: str = ""
    claim: str = ""
    disruptive: ClassVar[bool] = True


@attrs.frozen
class DeleteClaim:
    """Delete a data claim no pod runs on that no pod will need: its shard left the spec, or the
    shard has all its pods on other claims."""

    claim: str
    uid: str
    reason: str
    disruptive: ClassVar[bool] = False


@attrs.frozen
class PatchClaim:
    """Record the node id a server on the claim reported, or grow its storage request (two separate
    patches: a growth the API server refuses must not keep the id from being recorded)."""

    claim: str
    uid: str
    annotations: tuple[tuple[str, str], ...] = ()
    storage: str | None = None
    disruptive: ClassVar[bool] = False


@attrs.frozen
class PruneFailedPod:
    """Delete an ended pod beyond the newest few of its shard (those stay as evidence)."""

    pod: str
    uid: str
    disruptive: ClassVar[bool] = False


@attrs.frozen
class CreateObject:
    """Create an owned object that must never be applied over an existing one (the internal Secret:
    its passwords are generated once); a conflict means it exists, and the next pass reads it."""

    object: OwnedObject
    disruptive: ClassVar[bool] = False


@attrs.frozen
class ApplyObject:
    """Server-side apply an owned object that is missing or differs from its rendering."""

    object: OwnedObject
    disruptive: ClassVar[bool] = False


@attrs.frozen
class DeleteObject:
    """Delete an owned object the spec no longer asks for (a switched-off NetworkPolicy): only the
    one this cluster controls, with its uid as a precondition."""

    resource: Resource
    name: str
    uid: str
    disruptive: ClassVar[bool] = False

    @property
    def key(self) -> str:
        return object_key(self.resource.kind, self.name)


@attrs.frozen
class PatchPodMetadata:
    """Merge-patch these annotations and labels onto a live pod; every other key on it stays as it is.

    With `after`, only once that action of the same pass succeeded (a TLS reload it confirms); with
    `refused`, only once the API server refused that action of the same pass (`api_refused`)."""

    pod: str
    uid: str
    annotations: tuple[tuple[str, str], ...]
    after: ReloadTls | None = None
    labels: tuple[tuple[str, str], ...] = ()
    refused: ResizePod | None = None
    disruptive: ClassVar[bool] = False


@attrs.frozen
class ResizePod:
    """Ask for these resources of a live pod's Valkey container through the pods/resize subresource
    (that incarnation only): the kubelet changes them in place, no container restarted
    (resizePolicy NotRequired, the only one restartPolicy Never allows). Paced like the roll, one
    pod at a time (rollout.plan_resize), but no data moves: not disruptive."""

    pod: str
    uid: str
    resources: ContainerResources
    disruptive: ClassVar[bool] = False


@attrs.frozen
class MarkMember:
    """Set (member) or remove the member label on a live pod: the client Service selects it."""

    pod: str
    uid: str
    member: bool
    disruptive: ClassVar[bool] = False


@attrs.frozen
class SetConfig:
    """CONFIG SET of every listed directive on the server in pod `node`, in one call."""

    node: str
    settings: tuple[tuple[str, str], ...]
    disruptive: ClassVar[bool] = False


@attrs.frozen
class ReloadTls:
    """CONFIG SET of the tls-* file directives to the paths they already have: Valkey loads the
    files again (a bad file is refused and the old certificate kept). With `confirm` (the Secret
    content hash), the kubelet has surely written the files: a refusal is the files' fault, and a
    PatchPodMetadata `after` it records the content as loaded."""

    node: str
    uid: str = ""
    confirm: str | None = None
    disruptive: ClassVar[bool] = False


@attrs.frozen
class SyncAcl:
    """ACL SETUSER of each user whose rules differ, ACL DELUSER of users nobody asked for."""

    node: str
    set_users: tuple[UserAcl, ...] = ()
    delete_users: tuple[str, ...] = ()
    disruptive: ClassVar[bool] = False


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
class Failover:
    """A coordinated CLUSTER FAILOVER (default mode) on the in-sync replica in pod `node`: its primary
    stops writes, waits until the replica has every write, and hands its slots over (planned
    rolls only; never FORCE or TAKEOVER)."""

    node: str
    disruptive: ClassVar[bool] = True


@attrs.frozen
class Promote:
    """CLUSTER FAILOVER TAKEOVER on the replica in pod `node`: its primary `departed` is gone for good,
    or (`unreachable`) answers nobody, and too few primaries survive for Valkey's own vote to
    replace it."""

    node: str
    departed: str
    unreachable: bool = False
    disruptive: ClassVar[bool] = False


TopologyAction = Meet | AssignSlots | Replicate | Forget | MigrateSlots | Promote | Failover
"""One call on one node's server (Forget: on several at once) that changes the cluster's shape."""
NodeAction = SetConfig | ReloadTls | SyncAcl | TopologyAction
"""An action carried out by talking to Valkey."""
Action = (
    CreateObject
    | ApplyObject
    | DeleteObject
    | PatchPodMetadata
    | ResizePod
    | MarkMember
    | CreatePod
    | DeletePod
    | PruneFailedPod
    | DeleteClaim
    | PatchClaim
    | SetConfig
    | ReloadTls
    | SyncAcl
    | TopologyAction
)
Planned = Action | NewPod
"""What the planner emits: actions, and the intents decide.complete turns into whole actions."""


@attrs.frozen
class Failure:
    """An action that did not happen (or only in part), and why, for the status and an Event."""

    action: Action
    message: str
    refused: str | None = None
    """Decided by refusals.classified, never by the actor. What the server refused for a reason in
    its input, not its health: a directive (SetConfig) or a username (SyncAcl). Refusals repeat
    until the input changes; other failures may not."""
    forbidden: bool = False
    """Decided by refusals.classified. The API server's authorizer refused the request (RBAC,
    stalled.rbac_denied): it repeats until a human grants the operator the permission."""
    command_error: bool = False
    """The server answered the command with an error (it was heard, and said no): refusals.py
    decides from it, the action and the message whether this is a refusal."""
    user: str = ""
    """SyncAcl: the user whose ACL SETUSER the server answered with an error."""
    http_status: int | None = None
    """The API server's HTTP status for a failed request (refusals.py reads a 403 as RBAC's)."""


def skipped(action: Action, failures: Sequence[Failure]) -> bool:
    """Whether the actor leaves action out: a PatchPodMetadata `after` an action that failed this
    pass records what did not happen (that failure is reported instead), and one recording that
    the API server `refused` an action records nothing when it did not."""
    if not isinstance(action, PatchPodMetadata):
        return False
    if action.after is not None and any(failure.action == action.after for failure in failures):
        return True
    refused = action.refused
    return refused is not None and not any(
        failure.action == refused and api_refused(failure) for failure in failures
    )


def api_refused(failure: Failure) -> bool:
    """The API server answered with an error no retry changes: the request as such (400, 403, 404,
    405, 422: a subresource it does not serve, a change it does not allow, a permission the
    operator lacks), not a conflict (409), a throttle (429) or a failure of its own (5xx)."""
    status = failure.http_status
    return status is not None and 400 <= status < 500 and status not in {409, 429}
