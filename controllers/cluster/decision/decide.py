"""One pure decision per pass: `decide(facts, now) -> Decision` (SPEC 5).

The reconciler gathers facts (the cluster and its recorded status, the config
resolution, the TLS Secret checked against `now`, the internal Secret as read,
the ValkeyRoles, the observation, the rollout slots held, a seed for pod
names), calls decide, carries the actions out, and writes what was decided.
Every choice is made here, in this order:
0. names: an object of one of the cluster's names that someone else controls
   blocks the cluster (`NameConflict`, conflicts.py): it is never taken over;
1. blocked, by the first of: a config that does not resolve
   (`ResolutionFailure`, with its reason), a TLS Secret that fails its checks
   (`TlsSecretInvalid`), a restore whose source cannot be used yet or
   does not fit the cluster (`_restore_held`, with its reason), a damaged internal Secret
   (`InternalSecretDamaged`), a user's password Secret that cannot be read
   (`PasswordSecretInvalid`), an ACL that does not render (`AclError`, with
   its reason). The status says why (blocked_status), one Warning Event when
   the reason or message changes, nothing is created or changed, a requeue
   after REQUEUE_BLOCKED (tests/unit/test_docstring_steps.py keeps this list
   equal to the code's);
2. the internal Secret: a missing one is created (never applied over an
   existing one) with the fresh passwords the gatherer drew, and the pass
   goes on with them;
3. rollout admission: with outdated pods (view.is_outdated, the one
   definition), the cluster may roll when it holds a slot or one is free;
   with the stored status and the Memory it makes the pass's Context
   (context.py), what the planner reads besides the Observation;
4. plan (plan.py) on one View of the observation in that context, the roll
   computed once: actions and intents (NewPod);
5. a switchover the annotation asks for (switchover.py): refused, or carried
   out with the roll's primary hand-over once nothing else disruptive is
   planned; `complete` then assembles the pass's actions in one place, each
   whole (a NewPod becomes a CreatePod with its drawn name and rendered body);
6. status (status_document.py, stamped with `now`), Events (transitions,
   rolling update progress, problems that appear, switchovers) and metric changes.
Once the actions were carried out, `Decision.after(failures)` is the same
decision finished with what failed (plan.finish): status, Events and metrics
then name the failures too.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Iterable, Mapping, Sequence

import attrs

from controllers.cluster.decision import stalled
from controllers.cluster.decision.actions import (
    Action,
    ApplyObject,
    CreateObject,
    CreatePod,
    DeletePod,
    Event,
    Failover,
    Failure,
    NewPod,
    Planned,
    Promote,
    ResizePod,
)
from controllers.cluster.decision.archive import STATUS_REFRESH_S, ArchiveProgress, archive_report, topology
from controllers.cluster.decision.cadence import Quiet, next_quiet, signature
from controllers.cluster.decision.conflicts import conflict_message, conflicts
from controllers.cluster.decision.context import Context
from controllers.cluster.decision.desired import (
    Desired,
    DesiredAcl,
    DesiredTls,
    DesiredUser,
    OwnedObject,
    object_key,
)
from controllers.cluster.decision.failures import failure_events
from controllers.cluster.decision.memory import CLAIM_TTL, Memory, remember_refusals
from controllers.cluster.decision.migration_counts import migration_counts
from controllers.cluster.decision.owned import owned_objects, retired_objects
from controllers.cluster.decision.plan import REQUEUE_STEADY, REQUEUE_WAITING, Plan, finish, plan_view
from controllers.cluster.decision.refusals import classified
from controllers.cluster.decision.report import PlannedStatus, Reason
from controllers.cluster.decision.restore import (
    RestoreHeld,
    RestoreSource,
    restore_status,
    restoring,
)
from controllers.cluster.decision.status_document import blocked_status, endpoint, planned_status
from controllers.cluster.decision.switchover import (
    Outcome,
    Situation,
    decide_switchover,
    holds_spread,
    pinned,
    requested,
)
from controllers.cluster.decision.view import View, outdated_pods
from controllers.cluster.render import exporter
from controllers.cluster.render.acl import AclError, internal_users, render_acl, role_commands
from controllers.cluster.render.claims import (
    claim_bytes,
    claim_mode,
    claim_size,
    complete_log,
    persistent,
    render_claim,
)
from controllers.cluster.render.config import maxmemory_derived, runtime_settings
from controllers.cluster.render.context import RenderContext
from controllers.cluster.render.network_policy import operator_peer
from controllers.cluster.render.pods import render_pod
from controllers.cluster.render.pods import resources as container_resources
from controllers.cluster.render.restore import with_restore
from controllers.cluster.render.template import shape_hash, template_hash
from controllers.cluster.render.user_passwords import (
    PasswordProblem,
    missing_generated,
    render_user_secret,
    user_secret_name,
    with_passwords,
)
from controllers.options import ControllerOptions
from controllers.shared import layout, names
from controllers.shared.config_resolve import ResolutionFailure, ResolvedConfig
from controllers.shared.credentials import DamagedSecret, InternalCredentials
from controllers.shared.observation import ContainerResources, Observation
from controllers.shared.tls import TlsMaterial, TlsProblem
from valkey_operator.api.backup import RestorePhase, RestoreStatus
from valkey_operator.api.cluster import (
    DEGRADED,
    PROGRESSING,
    STALLED,
    AclUser,
    ClusterState,
    ValkeyCluster,
    ValkeyClusterStatus,
)
from valkey_operator.api.config import PersistenceMode
from valkey_operator.api.meta import ConditionStatus, find_condition
from valkey_operator.api.resources import PAUSED_ANNOTATION, SWITCHOVER_ANNOTATION
from valkey_operator.api.role import ValkeyRole
from valkey_operator.core.clock import parse_rfc3339, rfc3339
from valkey_operator.core.events import NORMAL, WARNING
from valkey_operator.core.resource import SECRETS
from valkey_operator.core.rest import Obj

EVENT_REASONS = frozenset(
    {
        Reason.DATA_LOST,
        Reason.MIGRATION_FAILED,
        Reason.PROMOTING_REPLICA,
        Reason.UNKNOWN_COMMAND,
        Reason.CONFIG_REJECTED,
        Reason.ACL_REJECTED,
        Reason.ACTION_FAILED,
        Reason.FAILOVER_FAILED,
        Reason.PODS_UNSCHEDULABLE,
        Reason.CERTIFICATE_EXPIRING,
        Reason.TLS_REJECTED,
        Reason.CLAIM_SHRINK_REFUSED,
        Reason.CLAIM_GROWTH_REFUSED,
        Reason.VOLUME_LOST,
        Reason.RESTORE_INCOMPLETE,
        Reason.FORBIDDEN,
        Reason.IMAGE_PULL_FAILED,
    }
)
"""Findings that also become a Warning Event when they first show up."""

TLS_SECRET_INVALID = "TlsSecretInvalid"
INTERNAL_SECRET_DAMAGED = stalled.INTERNAL_SECRET_DAMAGED
NAME_CONFLICT = stalled.NAME_CONFLICT
PASSWORD_SECRET_INVALID = "PasswordSecretInvalid"
REQUEUE_BLOCKED = 60.0
"""A blocked cluster (missing config/image/role, damaged Secret) waits for a watch event."""


@attrs.frozen(kw_only=True)
class RolloutSlots:
    """maxConcurrentRollouts and the clusters holding a slot (statuses showing a roll, plus the
    claims not lapsed in the clusters' Memory: memory.slot_holders)."""

    limit: int = 0
    holders: frozenset[str] = frozenset()


class RolloutSlot(enum.Enum):
    """What the gate remembers after the pass."""

    KEEP = "keep"
    CLAIM = "claim"
    """Admitted into a free slot: held until the status shows the roll."""
    RELEASE = "release"
    """Nothing outdated: a claim is no longer needed."""


def admit(outdated: bool, slots: RolloutSlots, cluster: str) -> tuple[bool, RolloutSlot]:
    """Whether cluster may take rollout steps now, and what the gate remembers."""
    if not outdated:
        return True, RolloutSlot.RELEASE
    if slots.limit <= 0 or cluster in slots.holders:
        return True, RolloutSlot.KEEP
    if len(slots.holders) < slots.limit:
        return True, RolloutSlot.CLAIM
    return False, RolloutSlot.KEEP


@attrs.frozen(kw_only=True)
class Facts:
    """Everything one pass gathered; gathering stops at the first fact that blocks the cluster."""

    cluster: ValkeyCluster
    recorded: ValkeyClusterStatus = attrs.field(factory=ValkeyClusterStatus)
    """status as last recorded (the reconciler's own unseen write wins over a stale cache)."""
    options: ControllerOptions = attrs.field(factory=ControllerOptions)
    resolved: ResolvedConfig | ResolutionFailure
    tls: TlsMaterial | TlsProblem | None = None
    """spec.tls's Secret checked against the pass's `now` (None: not a TLS cluster)."""
    credentials: InternalCredentials | DamagedSecret | None = None
    """The internal Secret as read (None: it does not exist)."""
    fresh_credentials: InternalCredentials | None = None
    """Drawn by the gatherer when the Secret is missing: the passwords of the Secret decided."""
    user_secrets: Mapping[str, Obj | None] = attrs.field(factory=dict)
    """Secret name -> the Secret as read (None: absent), for every user whose passwords live in one
    (passwordSecretName, or the generated `<cluster>-<user>`)."""
    fresh_user_passwords: Mapping[str, str] = attrs.field(factory=dict)
    """username -> a password drawn by the gatherer for a generated Secret that is missing."""
    roles: Mapping[str, ValkeyRole | None] = attrs.field(factory=dict)
    """The ValkeyRoles spec.acl names (None: not found)."""
    observation: Observation | None = None
    """None only when gathering stopped at a blocking fact."""
    rollout_slots: RolloutSlots = RolloutSlots()
    name_seed: int = 0
    """Seeds the pod-name suffixes (the gatherer draws it from a CSPRNG; tests fix it)."""
    restore: RestoreSource | RestoreHeld | None = None
    """spec.restore not yet verified: the backup to load, or why it cannot be (restore.py)."""
    backup_running: bool = False
    """A ValkeyBackup of this cluster is Running (no slot moves meanwhile)."""
    last_backup: str | None = None
    """The newest Completed backup spec.backup's schedule made: status.lastBackup."""
    archive: ArchiveProgress | None = None
    """spec.backup.pointInTime: the archivers' progress as read (archive.py; None: not read)."""
    memory: Memory = attrs.field(factory=Memory)
    """What the cluster's earlier passes remembered (memory.py); the next one leaves in Decision."""
    named: Mapping[str, Obj | None] = attrs.field(factory=dict)
    """kind/name -> the cached object (None: absent), for every object the cluster writes by
    name (owned.written_names): one someone else controls blocks the cluster (conflicts.py)."""
    now: float = 0.0
    """The pass's time (unix seconds): the only clock decide reads."""

    @property
    def key(self) -> str:
        return f"{self.cluster.metadata.namespace}/{self.cluster.metadata.name}"

    @property
    def paused(self) -> bool:
        return self.cluster.metadata.annotations.get(PAUSED_ANNOTATION, "").lower() == "true"

    @property
    def restoring(self) -> bool:
        return restoring(self.cluster.spec.restore, self.recorded.restore)


@attrs.frozen(kw_only=True)
class MetricChanges:
    """What the pass changes in the cluster's metrics (per-node gauges mirror the observation)."""

    state: ClusterState | None = None
    max_primaries_per_node: int | None = None
    version_floor_rejection: bool = False
    rollout_started: bool = False
    rollout_finished: bool = False
    rollout_failed: bool = False
    rollout_seconds: float | None = None
    failover_timeouts: int = 0
    failovers: Mapping[str, int] = attrs.field(factory=dict)
    """mode (coordinated, takeover) -> failovers sent without an error this pass."""
    migration_failures: int = 0
    """Failed slot migration jobs not counted before (migration_counts.py)."""
    migrations_active: int | None = None
    """Slot migration export jobs under way (None: not observed this pass)."""
    archived_until: float | None = None
    """spec.backup.pointInTime: the cluster's archive mark (Unix seconds; None removes the series)."""
    stalled: str | None = None
    """The reason of the Stalled=True condition the pass stores; None when it stores Stalled=False
    (every pass stores a whole status, so None also removes a series an earlier pass set)."""


@attrs.frozen(kw_only=True)
class Decision:
    actions: tuple[Action, ...] = ()
    status: ValkeyClusterStatus
    """The whole status to store (the reconciler renders it once, where it writes it)."""
    events: tuple[Event, ...] = ()
    metrics: MetricChanges
    requeue_after: float
    rollout_slot: RolloutSlot = RolloutSlot.KEEP
    memory: Memory = attrs.field(factory=Memory)
    """What the next pass remembers (memory.py): the reconciler stores it, and nothing else."""
    context: RenderContext | None = attrs.field(default=None, eq=False, repr=False)
    """The rendering inputs, for the actor's names (None when blocked before resolving)."""
    switchover: Outcome | None = attrs.field(default=None, eq=False, repr=False)
    plan: Plan | None = attrs.field(default=None, eq=False, repr=False)
    topology: Obj | None = None
    """spec.backup.pointInTime: the slot map to record beside the archive (archive.topology; None:
    none to record this pass)."""
    facts: Facts | None = attrs.field(default=None, eq=False, repr=False)
    now: float = attrs.field(default=0.0, eq=False, repr=False)

    @property
    def quiet(self) -> Quiet | None:
        """Set when this pass was quiet (cadence.py): the next pass backs off from it."""
        return self.memory.quiet

    def after(
        self,
        failures: Sequence[Failure],
        *,
        created: Iterable[str] = (),
        deleted: Iterable[str] = (),
        annotated: Mapping[str, Mapping[str, str]] | None = None,
    ) -> Decision:
        """This decision once its actions were carried out, some of them failing (pure): each failure
        classified (refusals.py), the pods written awaited and the refusals remembered by the next
        pass (memory.py)."""
        failures = tuple(classified(failure) for failure in failures)
        decision = self
        if failures and self.plan is not None and self.facts is not None:
            finished = attrs.evolve(finish(self.plan, failures), actions=self.plan.actions)
            decision = _conclude(
                self.facts,
                self.now,
                self.context,
                finished,
                self.actions,
                failures,
                self.rollout_slot,
                self.switchover,
            )
        memory = decision.memory
        memory = attrs.evolve(
            memory,
            expected=memory.expected.expect(self.now, created, deleted, annotated),
            refusals=remember_refusals(memory.refusals, self.actions, failures),
        )
        return decision if memory == decision.memory else attrs.evolve(decision, memory=memory)


def run_pass(facts: Facts) -> Decision:
    """One pass decided from what was gathered (gather.py), at facts.now: the reconciler and the
    decide harness both run this, then carry the actions out and finish it with
    `Decision.after`."""
    if facts.observation is None and not gathering_stops(facts):
        raise ValueError(f"{facts.key}: gathering stopped without a fact that blocks the cluster")
    return decide(facts, facts.now)


def gathering_stops(facts: Facts) -> bool:
    """Whether gathering stops at what it has (gather.py): a fact that blocks the cluster and
    without which nothing can be rendered or connected to (the names someone else holds, a config
    that does not resolve, a TLS Secret that fails its checks, a damaged internal Secret)."""
    return (
        bool(conflicts(facts.cluster.metadata.uid or "", facts.named))
        or isinstance(facts.resolved, ResolutionFailure)
        or isinstance(facts.tls, TlsProblem)
        or isinstance(facts.credentials, DamagedSecret)
    )


def decide(facts: Facts, now: float) -> Decision:
    """Every action, the whole status, the Events and metric changes of one pass (pure)."""
    cluster = facts.cluster
    taken = conflicts(cluster.metadata.uid or "", facts.named)
    if taken:
        return _blocked(facts, now, NAME_CONFLICT, conflict_message(taken))
    resolved = facts.resolved
    if isinstance(resolved, ResolutionFailure):
        return _blocked(facts, now, resolved.reason, resolved.message)
    ctx = RenderContext(
        cluster=cluster,
        config=resolved,
        default_zone_spread=facts.options.default_zone_spread,
        exporter_image=facts.options.exporter_image,
        operator_peer=operator_peer(
            facts.options.operator_namespace, dict(facts.options.operator_pod_labels)
        ),
        operator_image=facts.options.operator_image,
        endpoint_networks=tuple(str(net) for net in facts.options.backup_endpoints.allowed),
    )
    if isinstance(facts.tls, TlsProblem):
        return _blocked(facts, now, TLS_SECRET_INVALID, facts.tls.message, ctx)
    restore = facts.restore if facts.restoring else None
    held = _restore_held(restore, ctx) if facts.restoring else None
    if held is not None:
        return _blocked(facts, now, held.reason, held.message, ctx)
    credentials = facts.credentials
    if isinstance(credentials, DamagedSecret):
        return _blocked(facts, now, INTERNAL_SECRET_DAMAGED, credentials.message, ctx)
    creating_secret = credentials is None and not facts.paused and facts.fresh_credentials is not None
    if creating_secret:
        credentials = facts.fresh_credentials
    acl = DesiredAcl()
    internal = None
    created_users: tuple[OwnedObject, ...] = ()
    if credentials is not None:
        with_secrets = _with_passwords(facts, ctx)
        if isinstance(with_secrets, PasswordProblem):
            return _blocked(facts, now, PASSWORD_SECRET_INVALID, with_secrets.message, ctx)
        spec_users, created_users = with_secrets
        sidecar = exporter.enabled(ctx)
        rendered = render_acl(spec_users, facts.roles.get, credentials, exporter=sidecar)
        if isinstance(rendered, AclError):
            return _blocked(facts, now, rendered.reason, rendered.message, ctx)
        users = internal_users(credentials, exporter=sidecar)
        acl = DesiredAcl(
            internal=users,
            users=tuple(
                DesiredUser(user, role_commands(spec_user, facts.roles.get))
                for user, spec_user in zip(rendered.users[len(users) :], cluster.spec.acl, strict=True)
            ),
            secret=names.secret_name(cluster.metadata.name),
            key=layout.ACL_KEY,
        )
        internal = (credentials, rendered)
    if facts.observation is None:
        raise ValueError(f"{facts.key}: no observation, and no fact that blocks the cluster")
    tls = facts.tls
    desired = Desired.of(
        cluster,
        template_hash=template_hash(ctx),
        image=ctx.config.image.reference,
        shape_hash=shape_hash(ctx),
        resources=ContainerResources.of(container_resources(ctx)),
        maxmemory_derived=maxmemory_derived(ctx.config),
        config_hash=resolved.settings_hash,
        runtime=runtime_settings(ctx.config),
        acl=acl,
        objects=owned_objects(ctx, internal),
        retired=retired_objects(ctx),
        tls=DesiredTls(
            material=tls,
            sync_delay=facts.options.secret_sync_seconds,
            expiry_warning=facts.options.tls_expiry_warning_days * 86400.0,
            client_certificates=cluster.spec.tls is not None and cluster.spec.tls.clients_need_certificates,
        )
        if tls is not None
        else None,
        claim_size=claim_size(ctx) if persistent(ctx) else None,
        claim_bytes=claim_bytes(ctx) if persistent(ctx) else None,
        claim_mode=claim_mode(ctx) if persistent(ctx) else None,
        complete_log=complete_log(ctx),
    )
    asked = facts.recorded.switchover
    request = requested(cluster.metadata.annotations, asked, SWITCHOVER_ANNOTATION)
    desired = attrs.evolve(
        desired,
        backup_running=facts.backup_running,
        spread_held=holds_spread(request, asked),
        pinned_primary=pinned(asked),
    )
    if isinstance(restore, RestoreSource):
        # The backup's layout first, primaries only (restore.py); spec.shards and replicas after.
        desired = attrs.evolve(desired, shards=len(restore.shards), replicas_per_shard=0, restore=restore)
    observation = facts.observation
    # Rollout admission before the View is built (the View is never changed once built).
    may_roll, slot = admit(bool(outdated_pods(observation.pods, desired)), facts.rollout_slots, facts.key)
    context = Context.of(
        now=now,
        recorded=facts.recorded,
        expected=_seen(facts, now).expected,
        refusals=facts.memory.refusals,
        pods=(pod.name for pod in observation.pods),
        may_roll=may_roll,
    )
    view = View(observation, desired, context)
    planned = plan_view(view)
    switch = decide_switchover(planned.view, request, asked, _situation(facts, now, planned))
    actions = complete(
        planned.actions,
        ctx,
        observation,
        created=() if facts.paused else tuple(CreateObject(owned) for owned in created_users),
        switchover=switch.actions,
        seed=facts.name_seed,
        creating_secret=creating_secret,
        restore=desired.restore,
    )
    planned = attrs.evolve(planned, actions=actions)  # the plan as carried out, for finish()
    if switch.running:  # the hand-over shows in Valkey, not as a Kubernetes event: look again soon
        planned = attrs.evolve(planned, requeue_after=min(planned.requeue_after, REQUEUE_WAITING))
    return _conclude(facts, now, ctx, planned, actions, (), slot, switch)


def _situation(facts: Facts, now: float, planned: Plan) -> Situation:
    """What the switchover waits on: its hand-over goes last, once nothing disruptive is planned."""
    return Situation(
        paused=facts.paused,
        restoring=facts.restoring,
        rolling=planned.rolling,
        planned=planned.actions,
        now=now,
        now_text=rfc3339(now),
    )


def _with_passwords(
    facts: Facts, ctx: RenderContext
) -> tuple[tuple[AclUser, ...], tuple[OwnedObject, ...]] | PasswordProblem:
    """The spec users with the hashes of their Secrets' passwords, and the generated Secrets to
    create this pass (used at once: a create that loses a race is read back the next pass). A
    paused cluster creates none, so a new user without its Secret waits (SPEC 1.9)."""
    name = ctx.name
    found = dict(facts.user_secrets)
    created = []
    if not facts.paused:
        endpoint_text = endpoint(name, ctx.namespace, facts.options.cluster_domain)
        for username in missing_generated(name, ctx.cluster.spec.acl, found.get):
            password = facts.fresh_user_passwords.get(username)
            if password is None:
                continue
            body = render_user_secret(ctx, username, endpoint_text, password)
            found[user_secret_name(name, username)] = body
            created.append(OwnedObject(SECRETS, body))
    users = with_passwords(name, ctx.cluster.spec.acl, found.get)
    return users if isinstance(users, PasswordProblem) else (users, tuple(created))


def commands_to_probe(users: Sequence[AclUser], roles: Mapping[str, ValkeyRole | None]) -> list[str]:
    """The role commands each node is asked whether it knows (the gatherer's COMMAND INFO)."""
    return sorted({command for user in users for _, command in role_commands(user, roles.get)})


def complete(
    planned: Iterable[Planned],
    ctx: RenderContext,
    observation: Observation,
    *,
    created: Sequence[Action] = (),
    switchover: Sequence[Action] = (),
    seed: int = 0,
    creating_secret: bool = False,
    restore: RestoreSource | None = None,
) -> tuple[Action, ...]:
    """The one place a pass's actions are assembled, each whole: the generated password Secrets
    created first, then the planner's, then the switchover's hand-over (it waits for anything
    disruptive). Each NewPod intent becomes a CreatePod with its drawn name and whole rendered body
    (a restoring one with the init container that loads its shard; a new data claim's body); a
    planned DeletePod names the pod's data claim; the missing internal Secret is created rather
    than applied."""
    rng = random.Random(seed)
    taken = {pod.name for pod in observation.pods} | {claim.name for claim in observation.claims}
    claims = {pod.name: pod.claim for pod in observation.pods if pod.claim}
    secret = object_key("Secret", names.secret_name(ctx.name))
    actions: list[Action] = list(created)
    for action in planned:
        if isinstance(action, NewPod):
            name = names.pod_name(ctx.name, action.shard, rng, taken)
            taken.add(name)
            actions.append(_create_pod(ctx, action, name, restore))
        elif isinstance(action, DeletePod) and action.pod in claims:
            actions.append(attrs.evolve(action, claim=claims[action.pod]))
        elif creating_secret and isinstance(action, ApplyObject) and action.object.key == secret:
            actions.append(CreateObject(action.object))
        else:
            actions.append(action)
    return (*actions, *switchover)


def _create_pod(ctx: RenderContext, intent: NewPod, name: str, restore: RestoreSource | None) -> CreatePod:
    claim, claim_body = intent.claim or None, None
    if claim is None and persistent(ctx):
        claim, claim_body = name, render_claim(ctx, intent.shard, name)
    body = render_pod(ctx, intent.shard, name, claim)
    if restore is not None:
        body = with_restore(ctx, body, restore.fetch, restore.shards[intent.shard])
    if intent.annotations:
        metadata = body["metadata"]
        metadata["annotations"] = {**(metadata.get("annotations") or {}), **dict(intent.annotations)}
    return CreatePod(
        shard=intent.shard,
        name=name,
        body=body,
        annotations=intent.annotations,
        claim=claim or "",
        claim_body=claim_body,
    )


def _blocked(
    facts: Facts, now: float, reason: str, message: str, ctx: RenderContext | None = None
) -> Decision:
    meta = facts.cluster.metadata
    current = facts.recorded
    status = blocked_status(
        current,
        meta.generation,
        reason,
        message,
        endpoint(meta.name, meta.namespace or "", facts.options.cluster_domain),
        rfc3339(now),
    )
    restore = facts.cluster.spec.restore
    if restore is not None:
        held = restore_status(restore, RestorePhase.HELD, None, None, reason, message)
        status = attrs.evolve(status, restore=held if facts.restoring else current.restore)
    if facts.last_backup:
        status = attrs.evolve(status, last_backup=facts.last_backup)
    before = find_condition(current.conditions, PROGRESSING)
    changed = before is None or before.reason != reason or before.message != message
    return Decision(
        status=status,
        events=(Event(WARNING, reason, message),) if changed else (),
        # The archivers run on while the cluster is blocked: the recorded mark stays the metric's.
        metrics=MetricChanges(
            state=status.state,
            stalled=stalled_reason(status),
            archived_until=parse_rfc3339(status.point_in_time.archived_until)
            if status.point_in_time
            else None,
        ),
        requeue_after=REQUEUE_BLOCKED,
        memory=attrs.evolve(_seen(facts, now), quiet=None),
        context=ctx,
        facts=facts,
        now=now,
    )


def _conclude(
    facts: Facts,
    now: float,
    ctx: RenderContext | None,
    planned: Plan,
    actions: tuple[Action, ...],
    failures: Sequence[Failure],
    slot: RolloutSlot,
    switch: Outcome | None = None,
) -> Decision:
    meta = facts.cluster.metadata
    current = facts.recorded
    status = planned_status(
        current,
        meta.generation,
        planned.status,
        endpoint(meta.name, meta.namespace or "", facts.options.cluster_domain),
        rfc3339(now),
    )
    status = attrs.evolve(
        status,
        restore=_restore_status(facts, planned) if facts.cluster.spec.restore is not None else None,
        last_backup=facts.last_backup or None,
        switchover=switch.status if switch is not None else None,
    )
    archived = archive_report(ctx, facts.archive, facts.observation) if ctx is not None else None
    if archived is not None:
        status = attrs.evolve(status, point_in_time=archived.status)
    switch_events = switch.events if switch else ()
    transition, rejected = _transition(current, status, planned.status)
    rollout_events, rollout_metrics = _rollout(current, status, now)
    problems = tuple(_problems(current, planned.status))
    resized = tuple(resize_events(actions, failures))
    metrics = attrs.evolve(
        rollout_metrics,
        state=planned.status.state,
        max_primaries_per_node=planned.status.max_primaries_per_node,
        version_floor_rejection=rejected,
        failover_timeouts=sum(1 for event in problems if event.reason == Reason.FAILOVER_FAILED),
        failovers=failover_counts(actions, failures),
        stalled=stalled_reason(status),
        archived_until=archived.archived_until if archived is not None else None,
    )
    quiet = _quiet(facts, planned, actions, failures)
    if quiet is not None and archived is not None and archived.status is not None:
        quiet = attrs.evolve(quiet, interval=min(quiet.interval, STATUS_REFRESH_S))
    memory = _remembered(facts, now, slot, quiet)
    pod_failures: tuple[Event, ...] = ()
    if facts.observation is not None:
        counted = migration_counts(facts.observation, memory.failed_jobs)
        pod_failures, told = failure_events(facts.observation.pods, memory.failed_pods)
        memory = attrs.evolve(memory, failed_jobs=counted.failed, failed_pods=told)
        metrics = attrs.evolve(
            metrics, migration_failures=counted.new_failures, migrations_active=counted.active
        )
    return Decision(
        actions=actions,
        status=status,
        events=(*transition, *rollout_events, *resized, *problems, *switch_events, *pod_failures),
        metrics=metrics,
        requeue_after=quiet.interval if quiet is not None else planned.requeue_after,
        rollout_slot=slot,
        memory=memory,
        context=ctx,
        plan=planned,
        topology=topology(ctx, facts.observation) if ctx is not None else None,
        facts=facts,
        now=now,
        switchover=switch,
    )


def _seen(facts: Facts, now: float) -> Memory:
    """The memory once this pass's facts are seen: a written status the cache has passed (any other
    version: ours, or something newer) and a slot claim the status now shows are dropped."""
    memory = facts.memory
    written = memory.written
    if written is not None and facts.cluster.metadata.resource_version not in written.older:
        memory = attrs.evolve(memory, written=None)
    if memory.claim_until is not None and (facts.recorded.rollout is not None or not memory.claims_slot(now)):
        memory = attrs.evolve(memory, claim_until=None)
    if facts.observation is not None:
        memory = attrs.evolve(memory, expected=memory.expected.met(facts.observation.pods, now))
    return memory


def _remembered(facts: Facts, now: float, slot: RolloutSlot, quiet: Quiet | None) -> Memory:
    """What the next pass remembers of this one (before its actions are carried out)."""
    memory = attrs.evolve(_seen(facts, now), quiet=quiet)
    if slot is RolloutSlot.CLAIM:
        return attrs.evolve(memory, claim_until=now + CLAIM_TTL)
    if slot is RolloutSlot.RELEASE:
        return attrs.evolve(memory, claim_until=None)
    return memory


def _quiet(
    facts: Facts, planned: Plan, actions: Sequence[Action], failures: Sequence[Failure]
) -> Quiet | None:
    """A quiet pass (Active or paused with nothing to do, nothing failed) backs off (cadence.py)."""
    if failures or actions or planned.requeue_after != REQUEUE_STEADY or facts.observation is None:
        return None
    observed = signature(facts.observation, facts.cluster.metadata.resource_version or "")
    return next_quiet(facts.memory.quiet, observed, facts.options.steady_probe_max_seconds)


def _restore_held(restore: RestoreSource | RestoreHeld | None, ctx: RenderContext) -> RestoreHeld | None:
    """Why a restore cannot go on this pass: its source not read or not usable, or a restore to a
    moment into a cluster that does not run append-only files (histories load only as those)."""
    if not isinstance(restore, RestoreSource):
        return restore or RestoreHeld("RestoreSourceUnknown", "the backup to restore was not read")
    if restore.fetch.until is not None and ctx.persistence.mode is not PersistenceMode.AOF:
        return RestoreHeld(
            stalled.NEEDS_APPEND_ONLY,
            "a restore to a moment loads append-only histories: it needs persistence mode aof; the "
            f"config runs {ctx.persistence.mode}",
        )
    return None


def _restore_status(facts: Facts, planned: Plan) -> RestoreStatus | None:
    """status.restore: Loading until every shard loaded its count and nothing else keeps the cluster
    from Active, then Verified (and kept as recorded afterwards); Held when a count differs or the
    restoring pods keep failing (a download or checksum that failed)."""
    if not facts.restoring:
        return facts.recorded.restore
    progress = planned.view.restore_progress
    spec = facts.cluster.spec.restore
    if progress is None or spec is None:
        return None
    findings = planned.status.findings
    blocked = planned.view.crash_loops.blocked
    if progress.mismatches() or blocked:
        reason = findings[0].reason if findings else Reason.PODS_FAILING
        message = "; ".join(progress.mismatches()) or planned.status.message
        return restore_status(spec, RestorePhase.HELD, progress.source, progress, reason, message)
    # Slot moves toward each shard's quota wait for Verified (a restore moves nothing before it).
    others = [f for f in findings if f.reason not in {Reason.RESTORING, Reason.REBALANCING_SLOTS}]
    if progress.all_loaded and not others:
        message = f"every shard loaded {progress.source.label} and every slot is served"
        if progress.source.keys is None:
            message += f" (keys loaded: {progress.per_shard()})"
        return restore_status(
            spec, RestorePhase.VERIFIED, progress.source, progress, "RestoreVerified", message
        )
    return restore_status(
        spec, RestorePhase.LOADING, progress.source, progress, Reason.RESTORING, progress.message()
    )


def failover_counts(actions: Sequence[Action], failures: Sequence[Failure]) -> dict[str, int]:
    """Each failover sent without an error: Failover is coordinated, Promote a takeover."""
    failed = [failure.action for failure in failures]  # actions may hold dicts: not hashable
    counts = {"coordinated": 0, "takeover": 0}
    for action in actions:
        if action in failed:
            continue
        if isinstance(action, Failover):
            counts["coordinated"] += 1
        elif isinstance(action, Promote):
            counts["takeover"] += 1
    return {mode: count for mode, count in counts.items() if count}


def _transition(
    current: ValkeyClusterStatus, status: ValkeyClusterStatus, planned: PlannedStatus
) -> tuple[tuple[Event, ...], bool]:
    """The Events of a state change or of a roll that stopped on a failure, and whether a
    version-floor rejection appeared."""
    before, after = current.state, status.state
    events: list[Event] = []
    stopped = _stopped(status)
    rejected = False
    if stopped is not None and stopped != _stopped(current):
        rejected = stopped == Reason.VERSION_BELOW_FLOOR
        events.append(Event(WARNING, stopped, planned.message))
    if before is after or planned.state is ClusterState.FAILED:
        return tuple(events), rejected
    events.append(Event(NORMAL, planned.state.value, planned.message))
    return tuple(events), rejected


def stalled_reason(status: ValkeyClusterStatus) -> str | None:
    """The reason of the status's Stalled condition when it is True (kstatus Failed: only a human
    can move the cluster on, stalled.py), else None: what the stalled metric reports."""
    condition = find_condition(status.conditions, STALLED)
    if condition is None or condition.status is not ConditionStatus.TRUE:
        return None
    return condition.reason or None


def _stopped(status: ValkeyClusterStatus) -> str | None:
    """Why the cluster stopped progressing on a failure (Failed, or a roll its old pods outlive)."""
    progressing = find_condition(status.conditions, PROGRESSING)
    if progressing is None or progressing.status is not ConditionStatus.FALSE:
        return None
    failures = {Reason.VERSION_BELOW_FLOOR, Reason.PODS_FAILING}
    return progressing.reason if progressing.reason in failures else None


def _rollout(
    current: ValkeyClusterStatus, status: ValkeyClusterStatus, now: float
) -> tuple[tuple[Event, ...], MetricChanges]:
    """Events and metrics of a rolling update, from the rollout progress before and after the pass."""
    before, after = current.rollout, status.rollout
    events: list[Event] = []
    started = finished = failed = False
    seconds = None
    if before is None and after is not None:
        started = True
        events.append(
            Event(
                NORMAL,
                "RolloutStarted",
                f"rolling {after.shards - after.shards_updated} shard(s) onto a new pod template, "
                f"shard by shard",
            )
        )
    elif before is not None and after is not None and after.shards_updated > before.shards_updated:
        events.append(
            Event(
                NORMAL,
                "ShardUpdated",
                f"{after.shards_updated} of {after.shards} shard(s) run the new pod template",
            )
        )
    if before is not None and _stopped(status) is not None and _stopped(current) is None:
        failed = True
    if before is not None and after is None:
        finished = True
        began = parse_rfc3339(before.started_at)
        if began is not None:
            seconds = now - began
        events.append(
            Event(
                NORMAL,
                "RolloutFinished",
                f"every pod runs the new pod template ({status.current_image})",
            )
        )
    metrics = MetricChanges(
        rollout_started=started, rollout_finished=finished, rollout_failed=failed, rollout_seconds=seconds
    )
    return tuple(events), metrics


def resize_events(actions: Sequence[Action], failures: Sequence[Failure]) -> Iterable[Event]:
    """A Normal Event for each in-place resize sent (the failed ones are reported as failures)."""
    failed = [failure.action for failure in failures]
    for action in actions:
        if isinstance(action, ResizePod) and action not in failed:
            asked = action.resources
            wanted = ", ".join(
                f"{kind} {key} {value}"
                for kind, values in (("request", asked.requests), ("limit", asked.limits))
                for key, value in sorted(values.items())
            )
            yield Event(NORMAL, "PodResizing", f"resizing pod {action.pod} in place: {wanted}")


def _problems(current: ValkeyClusterStatus, planned: PlannedStatus) -> Iterable[Event]:
    """A Warning Event when a repair or migration problem appears or changes (lost data, a failed
    migration, a takeover), read from the Degraded condition before and after the pass."""
    before = find_condition(current.conditions, DEGRADED)
    carried = before.message if before is not None and before.status is ConditionStatus.TRUE else None
    for finding in planned.findings:
        if finding.reason not in EVENT_REASONS:
            continue
        if carried is not None and finding.message in carried:
            continue  # already reported while the condition carried it
        yield Event(WARNING, finding.reason, finding.message)
