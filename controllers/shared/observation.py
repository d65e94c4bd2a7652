"""What one reconcile pass of a ValkeyCluster observed (pure data).

The cluster planner decides only from this model (SPEC 5): the owned pods and
owned objects as the informer cache shows them and, per pod whose server was
probed, what that Valkey node reported about itself and about the cluster as
it sees it. A probe that failed is recorded as
`NodeObservation(reachable=False)`: a fact the planner plans around, never an
exception that aborts the pass; a single read that failed leaves its field
None (unknown), never empty. Nothing in here remembers an earlier pass, so an
operator restart loses nothing. What the pass wants is desired.py; the slot
arithmetic is valkey/slots.py, the reply models valkey/replies.py.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from typing import Self

import attrs

from controllers.shared import layout
from controllers.shared.names import (
    DATA_VOLUME,
    MEMBER,
    MEMBER_LABEL,
    MODE_ANNOTATION,
    NODE_ID_ANNOTATION,
    POD_NAME_LABEL,
    SHAPE_HASH_LABEL,
    TEMPLATE_HASH_LABEL,
    shard_of,
)
from controllers.shared.tls import Certificate
from controllers.shared.versions import Version
from valkey_operator.api.cluster import NodeRole
from valkey_operator.api.quantity import parse_quantity, quantity_bytes
from valkey_operator.core.clock import parse_rfc3339
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.acl import UserRules
from valkey_operator.valkey.replies import KnownNode, SlotMigration
from valkey_operator.valkey.slots import SlotRanges

PULL_ERRORS = frozenset({"ErrImagePull", "ImagePullBackOff"})
"""Waiting reasons of a pull the kubelet retries: human-only after IMAGE_PULL_BOUND (stalled.py)."""
PULL_NEVER = frozenset({"InvalidImageName", "ErrImageNeverPull"})
"""Waiting reasons no retry can change (a reference that does not parse, imagePullPolicy Never with
the image absent): human-only at once."""


@attrs.frozen(kw_only=True)
class NodeObservation:
    """What the Valkey server in one pod reported in this pass; every field but `reachable` may be unknown.

    Built by the observer from INFO server/replication, CLUSTER INFO, CLUSTER
    MYID, CLUSTER MYSHARDID, CLUSTER NODES and CLUSTER GETSLOTMIGRATIONS, each
    call with a bounded timeout. When the server could not be asked,
    `reachable` is False and `error` says why.
    """

    reachable: bool
    error: str | None = None
    version: Version | None = None
    """valkey_version from INFO server; None means not Valkey, or one too old to report it."""
    version_text: str | None = None
    """What the server reported, verbatim, for messages (e.g. 'redis_version 7.2.4')."""
    node_id: str | None = None
    role: NodeRole | None = None
    primary_id: str | None = None
    """For a replica: the node id of the primary it replicates (Valkey's view, not a label)."""
    shard_id: str | None = None
    """CLUSTER MYSHARDID: shared by a primary and its replicas."""
    slots: SlotRanges = ()
    """Slots this node serves as a primary, from its own CLUSTER NODES 'myself' line."""
    repl_offset: int = 0
    """master_repl_offset on a primary; the offset processed so far on a replica."""
    link_up: bool | None = None
    """master_link_status on a replica (None on a primary)."""
    link_down_seconds: int | None = None
    """master_link_down_since_seconds on a replica whose link is down: how long ago it dropped, -1
    when it never had one since the server started (None otherwise)."""
    cluster_ok: bool | None = None
    """cluster_state from CLUSTER INFO."""
    known_nodes: tuple[KnownNode, ...] = ()
    """CLUSTER NODES as this node sees the cluster, its own line included."""
    migrations: tuple[SlotMigration, ...] | None = ()
    """CLUSTER GETSLOTMIGRATIONS; None when the read failed (unknown: a job may be under way)."""
    config: Mapping[str, str] | None = None
    """CONFIG GET of every runtime tunable; None when not read (unknown, never "empty")."""
    acl: Mapping[str, UserRules] | None = None
    """ACL LIST in Valkey's normal form, by username; None when not read."""
    commands: Mapping[str, bool] | None = None
    """Whether the server knows each command the cluster's roles name; None when not read."""
    served: Certificate | None = None
    """TLS clusters: the certificate the node presented in the probe's own handshake."""
    loaded_keys: int | None = None
    """Keys the server read from its RDB at start (loaded plus already expired, INFO persistence);
    None while it is still loading or when not read. A restore compares it with the manifest."""
    keys: int | None = None
    """Keys the server holds (INFO keyspace, db0); None while it is still loading or when not read.
    A restore to a moment reports it per shard."""
    loading: bool = False
    """INFO persistence `loading:1`: still reading its RDB or AOF (a restored node does for seconds).
    It answers INFO and CLUSTER NODES but refuses CLUSTER MEET and most commands until it is done."""

    @classmethod
    def unreachable(cls, error: str) -> Self:
        return cls(reachable=False, error=error)

    @property
    def jobs(self) -> tuple[SlotMigration, ...]:
        """The migration jobs read (none when the read failed: ask `migrations is None` for that)."""
        return self.migrations or ()

    def knows(self, node_id: str) -> KnownNode | None:
        """This node's line about node_id, if it has one that is not a handshake placeholder."""
        for known in self.known_nodes:
            if known.node_id == node_id and not known.in_handshake:
                return known
        return None

    def handshaking_with(self, ip: str) -> bool:
        return any(known.in_handshake and known.ip == ip for known in self.known_nodes)

    @property
    def peers(self) -> tuple[KnownNode, ...]:
        """The other nodes this node knows (handshakes excluded)."""
        return tuple(
            known
            for known in self.known_nodes
            if not known.in_handshake and not known.myself and known.node_id != self.node_id
        )


# --- pods ----------------------------------------------------------------------------------------

MEMORY_SLACK_BYTES = 64 * 1024
"""Memory quantities this close are the same: the kernel keeps a cgroup's memory limit in whole
pages, so a runtime can report a limit that is not a multiple of the page size rounded down."""
CPU_SLACK = parse_quantity("10m")
"""CPU quantities this close are the same: a runtime reports cpu as shares and quota, which the
kubelet converts back with rounding."""


def same_quantity(resource: str, left: str | None, right: str | None) -> bool:
    """Two quantities of resource are the same (both absent counts; one that does not parse never)."""
    if left is None or right is None:
        return left is None and right is None
    try:
        difference = abs(parse_quantity(left) - parse_quantity(right))
    except ValueError:
        return False
    return difference < (MEMORY_SLACK_BYTES if resource == "memory" else CPU_SLACK)


@attrs.frozen(kw_only=True)
class ContainerResources:
    """One container's requests and limits (resource name -> quantity as written). Compared by
    value; hashable (actions carrying it are), the mappings left out of the hash."""

    requests: Mapping[str, str] = attrs.field(factory=dict, hash=False)
    limits: Mapping[str, str] = attrs.field(factory=dict, hash=False)

    @classmethod
    def of(cls, resources: Obj | None) -> Self | None:
        """From a container's (or a container status's) `resources`; None when absent."""
        if resources is None:
            return None
        return cls(
            requests={str(key): str(value) for key, value in (resources.get("requests") or {}).items()},
            limits={str(key): str(value) for key, value in (resources.get("limits") or {}).items()},
        )

    def same(self, other: ContainerResources) -> bool:
        """The same cpu and memory requests and limits, quantity for quantity."""
        return same_requests(self.requests, other.requests) and same_requests(self.limits, other.limits)

    @property
    def memory_limit(self) -> int | None:
        """The memory limit in bytes (None when absent or unreadable)."""
        value = self.limits.get("memory")
        try:
            return quantity_bytes(value) if value is not None else None
        except ValueError:
            return None

    def to_json(self) -> Obj:
        """As a container's `resources` (what a resize sends)."""
        rendered: Obj = {}
        if self.requests:
            rendered["requests"] = dict(self.requests)
        if self.limits:
            rendered["limits"] = dict(self.limits)
        return rendered


def same_requests(left: Mapping[str, str], right: Mapping[str, str]) -> bool:
    """cpu and memory the same in both (other resources are not the operator's)."""
    return all(same_quantity(key, left.get(key), right.get(key)) for key in ("cpu", "memory"))


RESIZE_PENDING = "PodResizePending"
RESIZE_IN_PROGRESS = "PodResizeInProgress"
INFEASIBLE = "Infeasible"
DEFERRED = "Deferred"


@attrs.frozen(kw_only=True)
class PodResources:
    """The Valkey container's resources as its pod asks, as the kubelet allocated and runs them, and
    the kubelet's resize conditions (the pods/resize subresource; all unknown on a pod not running yet)."""

    asked: ContainerResources | None = None
    """spec.containers[valkey].resources (None: the pod has no such container)."""
    allocated: Mapping[str, str] | None = None
    """status.containerStatuses[valkey].allocatedResources: the requests the kubelet admitted."""
    running: ContainerResources | None = None
    """status.containerStatuses[valkey].resources: what the container runs with."""
    generation: int | None = None
    """metadata.generation: a resize raises it."""
    observed_generation: int | None = None
    """status.observedGeneration: the generation the kubelet last reported on (absent before 1.34)."""
    pending: str | None = None
    """The reason of a True PodResizePending condition (Infeasible or Deferred), else None."""
    pending_message: str = ""
    pending_generation: int | None = None
    """That condition's observedGeneration: the generation it judged."""
    pending_since: float | None = None
    """That condition's lastTransitionTime, as Unix seconds (None when absent or unreadable)."""
    in_progress: bool = False
    """A True PodResizeInProgress condition: admitted, not yet running everywhere."""
    failing_since: float | None = None
    """That condition's lastTransitionTime when its reason is Error: the kubelet admitted the
    resize and could not carry it out (a memory limit below what the process uses, say)."""

    @property
    def infeasible(self) -> bool:
        """The kubelet refused the pod's current ask for good: its node can never hold it."""
        return self.pending == INFEASIBLE and self._judges_current_ask

    def stuck_since(self) -> float | None:
        """Since when the kubelet defers the pod's current ask (its node has no room for it now) or
        fails to carry it out, whichever is earlier; None when it does neither."""
        deferred = self.pending_since if self.pending == DEFERRED and self._judges_current_ask else None
        return min((at for at in (deferred, self.failing_since) if at is not None), default=None)

    @property
    def _judges_current_ask(self) -> bool:
        unknown = self.pending_generation is None or self.generation is None
        return unknown or self.pending_generation == self.generation

    @classmethod
    def of(cls, pod: Obj) -> Self:
        metadata = pod.get("metadata") or {}
        status = pod.get("status") or {}
        container = _valkey_container((pod.get("spec") or {}).get("containers"))
        reported = _valkey_container(status.get("containerStatuses")) or {}
        conditions = {
            str(condition.get("type")): condition
            for condition in status.get("conditions") or []
            if condition.get("status") == "True"
        }
        pending = conditions.get(RESIZE_PENDING)
        failing = conditions.get(RESIZE_IN_PROGRESS)
        allocated = reported.get("allocatedResources")
        return cls(
            asked=ContainerResources.of(container.get("resources") or {}) if container is not None else None,
            allocated={str(key): str(value) for key, value in allocated.items()} if allocated else None,
            running=ContainerResources.of(reported.get("resources")),
            generation=_integer(metadata.get("generation")),
            observed_generation=_integer(status.get("observedGeneration")),
            pending=str(pending.get("reason") or "Pending") if pending is not None else None,
            pending_message=str((pending or {}).get("message") or "")[:300],
            pending_generation=_integer((pending or {}).get("observedGeneration")),
            pending_since=parse_rfc3339(str((pending or {}).get("lastTransitionTime") or "")),
            in_progress=RESIZE_IN_PROGRESS in conditions,
            failing_since=parse_rfc3339(str(failing.get("lastTransitionTime") or ""))
            if failing is not None and failing.get("reason") == "Error"
            else None,
        )


def _valkey_container(containers: list[Obj] | None) -> Obj | None:
    """The Valkey container (or its status) among a pod's, if there."""
    return next((found for found in containers or [] if found.get("name") == layout.CONTAINER_NAME), None)


def _integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class PodPhase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


@attrs.frozen(kw_only=True)
class PodObservation:
    """An owned pod as the informer cache shows it."""

    name: str
    shard: int | None
    """The shard label; None when absent or not a number (such a pod is reported, never acted on)."""
    template_hash: str | None
    phase: PodPhase
    ready: bool
    ip: str | None
    deleting: bool
    """deletionTimestamp is set: the pod still exists (and may still serve) until it is gone."""
    created: str
    """creationTimestamp (RFC 3339, sortable); with the name it orders a shard's pods deterministically."""
    uid: str = ""
    annotations: Mapping[str, str] = attrs.field(factory=dict)
    created_at: float | None = None
    """creationTimestamp as Unix seconds (None when absent or unreadable)."""
    failure: str | None = None
    """For an ended pod: how its container ended (exit code, reason, the message it left)."""
    found_version: str | None = None
    """For an ended pod: the Valkey version its server printed before exiting, if any."""
    unschedulable: str | None = None
    """Why the scheduler cannot place this pod (its PodScheduled condition), while it cannot."""
    node_name: str | None = None
    """The Kubernetes node the pod is bound to (spec.nodeName); None before it is scheduled."""
    host_ip: str | None = None
    """Its Kubernetes node's address (status.hostIP): what a NodePort node announces."""
    named: bool = False
    """Carries its own name as a label (POD_NAME_LABEL): what its external Service selects."""
    member: bool = False
    """Carries the member label: the client Service hands it to clients (membership.py)."""
    claim: str | None = None
    """The data claim the pod runs on (persistence), else None (claims.py)."""
    image_wait: str | None = None
    """A container waits for its image: the kubelet's reason (ErrImagePull, ImagePullBackOff,
    InvalidImageName, ErrImageNeverPull), else None (stalled.py reads it)."""
    image_wait_message: str = ""
    """That container's name, image and the kubelet's message."""
    shape_hash: str | None = None
    """The shape-hash label (template.shape_hash): the template without resources. Pods made
    before in-place resize have none, and are rolled for a resources change."""
    resources: PodResources = PodResources()
    """The Valkey container's resources asked, allocated and running, and any resize under way."""

    @property
    def order(self) -> tuple[str, str]:
        return (self.created, self.name)

    @property
    def live(self) -> bool:
        """Counts toward the shard's desired pods: not going away and not terminated for good."""
        return not self.deleting and self.phase not in {PodPhase.SUCCEEDED, PodPhase.FAILED}

    @property
    def starting(self) -> bool:
        """A new pod whose server may already answer while its readiness probe has not passed yet:
        Running, not Ready, not going away, in a shard and not (yet) in the client Service. It is
        probed (probe.should_probe) so it can be MET at once: a primary MET within Valkey's 2 s
        writable delay after its start reports cluster_state ok when that delay ends, one MET later
        only after the rejoin delay (min(cluster-node-timeout, 5 s)) from learning the slot map."""
        return (
            self.phase is PodPhase.RUNNING
            and not self.ready
            and not self.deleting
            and not self.member
            and self.shard is not None
        )

    @property
    def never_started(self) -> bool:
        """Pending pods have not run their server yet, so they carry no node identity."""
        return self.phase is PodPhase.PENDING

    @property
    def ended(self) -> bool:
        """Failed or Succeeded: with restartPolicy Never its server is gone for good, like a deleted pod's."""
        return self.phase in {PodPhase.SUCCEEDED, PodPhase.FAILED}

    @classmethod
    def from_pod(cls, pod: Obj) -> Self:
        """From a decoded Pod; tolerant of the fields a young pod does not have yet."""
        metadata = pod.get("metadata", {})
        labels = metadata.get("labels") or {}
        status = pod.get("status") or {}
        conditions = status.get("conditions") or []
        try:
            phase = PodPhase(status.get("phase", "Pending"))
        except ValueError:
            phase = PodPhase.UNKNOWN
        created = metadata.get("creationTimestamp", "")
        ended = phase in {PodPhase.SUCCEEDED, PodPhase.FAILED}
        image_wait = None if ended else _image_wait(status)
        return cls(
            name=metadata["name"],
            shard=shard_of(labels),
            template_hash=labels.get(TEMPLATE_HASH_LABEL),
            shape_hash=labels.get(SHAPE_HASH_LABEL),
            resources=PodResources.of(pod),
            phase=phase,
            ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
            ip=status.get("podIP") or None,
            deleting=metadata.get("deletionTimestamp") is not None,
            created=created,
            uid=metadata.get("uid", ""),
            annotations=dict(metadata.get("annotations") or {}),
            created_at=parse_rfc3339(created),
            failure=_termination(status) if ended else None,
            found_version=_printed_version(status) if ended else None,
            node_name=(pod.get("spec") or {}).get("nodeName") or None,
            host_ip=status.get("hostIP") or None,
            named=labels.get(POD_NAME_LABEL) == metadata["name"],
            member=labels.get(MEMBER_LABEL) == MEMBER,
            claim=claim_of(pod),
            image_wait=image_wait[0] if image_wait else None,
            image_wait_message=image_wait[1] if image_wait else "",
            unschedulable=next(
                (
                    str(c.get("message") or c.get("reason") or "unschedulable")
                    for c in conditions
                    if c.get("type") == "PodScheduled" and c.get("status") == "False"
                ),
                None,
            ),
        )


@attrs.frozen(kw_only=True)
class ClaimObservation:
    """A data claim of the cluster (persistence) as the informer cache shows it."""

    name: str
    shard: int | None
    uid: str = ""
    deleting: bool = False
    created: str = ""
    node_id: str | None = None
    """The node id a server on this claim last reported (NODE_ID_ANNOTATION)."""
    requested: int | None = None
    """spec.resources.requests.storage in bytes (None when absent or unreadable)."""
    bound: bool = False
    mode: str | None = None
    """The persistence mode its files were written in (MODE_ANNOTATION)."""
    storage_class: str | None = None
    """spec.storageClassName (the default class's name once the API server filled it in)."""

    @property
    def order(self) -> tuple[str, str]:
        return (self.created, self.name)

    @classmethod
    def from_claim(cls, claim: Obj) -> Self:
        metadata = claim.get("metadata", {})
        storage = (((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
        try:
            requested = quantity_bytes(str(storage)) if storage is not None else None
        except ValueError:
            requested = None
        return cls(
            name=metadata["name"],
            shard=shard_of(metadata.get("labels") or {}),
            uid=metadata.get("uid", ""),
            deleting=metadata.get("deletionTimestamp") is not None,
            created=metadata.get("creationTimestamp", ""),
            node_id=(metadata.get("annotations") or {}).get(NODE_ID_ANNOTATION) or None,
            requested=requested,
            bound=(claim.get("status") or {}).get("phase") == "Bound",
            mode=(metadata.get("annotations") or {}).get(MODE_ANNOTATION) or None,
            storage_class=(claim.get("spec") or {}).get("storageClassName") or None,
        )


_VERSION_IN_LOG = re.compile(r"\(Version (\d+\.\d+\.\d+)\)|Valkey version=(\d+\.\d+\.\d+)")


def claim_of(pod: Obj) -> str | None:
    """The claim a pod's data volume mounts, if it mounts one."""
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        if volume.get("name") == DATA_VOLUME and volume.get("persistentVolumeClaim"):
            return str(volume["persistentVolumeClaim"].get("claimName") or "") or None
    return None


def _terminations(status: Obj) -> Iterable[tuple[str, Obj]]:
    """Ended containers: a failed init container (a restore's download) first, it ends the pod."""
    for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        terminated = (container.get("state") or {}).get("terminated") or {}
        if terminated:
            yield container.get("name", ""), terminated


def _image_wait(status: Obj) -> tuple[str, str] | None:
    """The first container (init containers first) waiting for its image: reason and what it says."""
    for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        waiting = (container.get("state") or {}).get("waiting") or {}
        reason = str(waiting.get("reason") or "")
        if reason in PULL_ERRORS | PULL_NEVER:
            said = str(waiting.get("message") or "").strip()[:300]
            text = f"container {container.get('name', '')} ({container.get('image', '')}): {reason}"
            return reason, f"{text}: {said}" if said else text
    return None


def _printed_version(status: Obj) -> str | None:
    """The version a server printed in its termination message (FallbackToLogsOnError)."""
    for _name, terminated in _terminations(status):
        match = _VERSION_IN_LOG.search(terminated.get("message") or "")
        if match:
            return match.group(1) or match.group(2)
    return None


def _termination(status: Obj) -> str:
    for name, terminated in _terminations(status):
        reason = terminated.get("reason") or "terminated"
        text = f"container {name} exited with code {terminated.get('exitCode')} ({reason})"
        message = (terminated.get("message") or "").strip()
        return f"{text}: {message[:200]}" if message else text
    return str(status.get("reason") or "Failed")


@attrs.frozen(kw_only=True)
class Observation:
    """Everything one pass observed: the pods and, keyed by pod name, their servers' reports.

    The observer probes every pod that is Ready or going away (a terminating
    pod may still serve); a pod absent from `nodes` was not probed. A Ready pod
    that was not probed counts as unreachable. Only what the pass read from
    the cache and the servers is here, and no clock: the stored status, what
    earlier passes remember, rollout admission and the pass's time are the
    decision's own inputs (controllers/cluster/decision/context.py), so an
    observation is the same whatever the operator remembers or stored
    (test_observation_fields.py keeps the fields to that list).
    """

    pods: tuple[PodObservation, ...]
    nodes: Mapping[str, NodeObservation] = attrs.field(factory=dict)
    objects: Mapping[str, Obj | None] = attrs.field(factory=dict)
    """Each rendered owned object (Service, ConfigMap, Secret, PDBs) as the cache holds it, by
    `OwnedObject.key`; None when absent."""
    node_zones: Mapping[str, str] = attrs.field(factory=dict)
    """Kubernetes node name -> its topology.kubernetes.io/zone label, for the nodes hosting pods."""
    claims: tuple[ClaimObservation, ...] = ()
    """The cluster's data claims (persistence; none for a cache), by label, owned or retained."""
    expandable: Mapping[str, bool] = attrs.field(factory=dict)
    """StorageClass name -> its allowVolumeExpansion, for the classes the claims use (absent: the
    class was not found, and the API server decides)."""
    services: Mapping[str, Obj] = attrs.field(factory=dict)
    """The cluster's per-pod Services (spec.externalAccess) as the cache holds them, by name (a
    pod's Service is named after the pod)."""

    def node(self, pod: str) -> NodeObservation | None:
        return self.nodes.get(pod)
