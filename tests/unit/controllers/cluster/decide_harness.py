"""Drive decide() against the simulator: the reconciler's pass, with the world in memory.

One pass, as ClusterReconciler runs it, with the same code: the reconciler's
gatherer (gather.py) reads the facts from this world (`WorldSource`: the
cluster as the user wrote it, its config chain resolved, the TLS material, the
internal Secret read back from the world, the roles, the observation, the
Memory the last pass returned) -> `run_pass` -> check the decision is
deterministic -> act on the simulator (a patch `after` a failed action is
skipped: actions.skipped, as the actor does; failures reported as facts, which
decide classifies) -> `Decision.after(failures)` -> the status is recorded as
the reconciler writes it (the model rendered to a dict; the next pass parses it
back) and the returned Memory kept -> time passes. Each pass's reasons (every condition's, and
every finding behind the message) are collected in `World.reasons`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping, Sequence

import attrs
from simulate import Outcome, SimSettings, SimulatedCluster

from controllers.cluster.decision.actions import (
    Action,
    Failure,
    ReloadTls,
    SetConfig,
    SyncAcl,
    skipped,
)
from controllers.cluster.decision.archive import ArchiveProgress
from controllers.cluster.decision.decide import Decision, Facts, RolloutSlots, run_pass
from controllers.cluster.decision.desired import object_key
from controllers.cluster.decision.memory import Memory
from controllers.cluster.decision.owned import written_names
from controllers.cluster.decision.restore import RestoreHeld, RestoreSource
from controllers.cluster.gather import gather as gather_facts
from controllers.cluster.render.user_passwords import password_secret
from controllers.options import ControllerOptions
from controllers.shared.config_resolve import resolve
from controllers.shared.credentials import DamagedSecret, InternalCredentials, read_credentials
from controllers.shared.observation import Observation
from controllers.shared.tls import TlsMaterial, TlsProblem
from valkey_operator.api.cluster import ClusterState, ValkeyCluster, ValkeyClusterStatus
from valkey_operator.api.role import ValkeyRole
from valkey_operator.core.rest import Obj

NAMESPACE = "ns"
NAME = "vk"
KEY = f"{NAMESPACE}/{NAME}"
SECRET_KEY = f"Secret/{NAME}-internal"
FRESH = InternalCredentials(admin_password="a" * 40, replication_password="r" * 40)
IMAGES = {
    "v9": {
        "metadata": {"name": "v9"},
        "spec": {"repository": "valkey/valkey", "tag": "9.1.2", "version": "9.1.2"},
    }
}
OPTIONS = ControllerOptions(secret_sync_seconds=2.0)

Hands = Callable[[Observation], Observation]
"""Someone outside the operator changes what the next observation shows."""


def cluster_dict(shards: int = 1, replicas: int = 0, **spec: object) -> Obj:
    return {
        "apiVersion": "valkey.gomomento.com/v1alpha1",
        "kind": "ValkeyCluster",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "uid": "0b7e1c55-0000-4000-8000-000000000001"},
        "spec": {"configRef": "cfg", "shards": shards, "replicasPerShard": replicas, **spec},
    }


def config(
    valkey: Mapping[str, str] | None = None,
    image: str = "v9",
    base: str | None = None,
    persistence: Obj | None = None,
) -> Obj:
    spec: Obj = {"imageRef": image, "valkey": dict(valkey or {})}
    if base is not None:
        spec = {"baseRef": base}
    if persistence is not None:
        spec["persistence"] = persistence
    return {"metadata": {"name": "cfg"}, "spec": spec}


@attrs.define
class World:
    sim: SimulatedCluster
    cluster: Obj
    configs: dict[str, Obj] = attrs.field(factory=lambda: {"cfg": config()})
    images: dict[str, Obj] = attrs.field(factory=lambda: dict(IMAGES))
    roles: dict[str, Obj] = attrs.field(factory=dict)
    tls: TlsMaterial | TlsProblem | None = None
    options: ControllerOptions = OPTIONS
    rollout_slots: RolloutSlots = attrs.field(factory=RolloutSlots)
    status: Obj = attrs.field(factory=dict)
    decisions: list[Decision] = attrs.field(factory=list)
    reasons: set[str] = attrs.field(factory=set)
    restore: RestoreSource | RestoreHeld | None = None
    """What the gatherer reads for spec.restore (the backup's manifest, or why not)."""
    last_backup: str | None = None
    backup_running: bool = False
    archive: ArchiveProgress = attrs.field(factory=ArchiveProgress)
    """What the gatherer reads of the archivers (spec.backup.pointInTime): node ID -> progress."""
    memory: Memory = attrs.field(factory=Memory)
    """What the last pass returned for the next one, as the reconciler keeps it."""

    @property
    def last(self) -> Decision:
        return self.decisions[-1]

    @property
    def state(self) -> str | None:
        return self.status.get("state")

    def edit(self, **spec: object) -> None:
        self.cluster = {**self.cluster, "spec": {**self.cluster["spec"], **spec}}

    def annotate(self, annotations: Mapping[str, str]) -> None:
        self.cluster = {
            **self.cluster,
            "metadata": {**self.cluster["metadata"], "annotations": dict(annotations)},
        }


def world(shards: int = 1, replicas: int = 0, settings: SimSettings | None = None, **spec: object) -> World:
    return World(
        SimulatedCluster(settings or SimSettings(cluster=NAME)), cluster_dict(shards, replicas, **spec)
    )


@attrs.define
class WorldSource:
    """Where a pass reads its facts in the simulated world (gather.FactSource): the reconciler's
    order and stops are gather.py's, run here unchanged."""

    world: World
    unreachable: Collection[str] = ()
    hands: Hands | None = None

    def begin(self) -> Facts:
        world = self.world
        cluster = ValkeyCluster.from_dict(world.cluster)
        return Facts(
            cluster=cluster,
            recorded=ValkeyClusterStatus.from_dict(world.status),
            memory=world.memory,
            options=world.options,
            resolved=resolve(cluster.spec.config_ref, world.configs.get, world.images.get),
            named={
                key: world.sim.objects.get(key)
                for resource, name in written_names(cluster)
                if (key := object_key(resource.kind, name))
            },
            now=world.sim.now,
        )

    async def tls(self, facts: Facts) -> TlsMaterial | TlsProblem | None:
        return self.world.tls

    async def credentials(self, facts: Facts) -> InternalCredentials | DamagedSecret | None:
        return read_credentials(self.world.sim.objects.get(SECRET_KEY))

    def fresh_credentials(self) -> InternalCredentials:
        return FRESH

    async def user_secrets(self, facts: Facts) -> dict[str, Obj | None]:
        return {
            name: self.world.sim.objects.get(f"Secret/{name}")
            for user in facts.cluster.spec.acl
            if (name := password_secret(NAME, user)) is not None
        }

    def fresh_passwords(self, usernames: Sequence[str]) -> dict[str, str]:
        return {username: "u" * 40 for username in usernames}

    def role(self, name: str) -> ValkeyRole | None:
        found = self.world.roles.get(name)
        return ValkeyRole.from_dict(found) if found is not None else None

    async def observe(
        self, facts: Facts, credentials: InternalCredentials | None, commands: Sequence[str]
    ) -> Observation:
        observation = self.world.sim.observe(self.unreachable, commands=list(commands))
        return self.hands(observation) if self.hands is not None else observation

    async def restore(self, facts: Facts, backup_name: str) -> RestoreSource | RestoreHeld:
        return self.world.restore or RestoreHeld("RestoreSourceUnknown", "the test world has no backup")

    async def archive(self, facts: Facts) -> ArchiveProgress:
        return self.world.archive

    def backups(self, facts: Facts) -> tuple[bool, str | None]:
        return self.world.backup_running, self.world.last_backup

    def rollout_slots(self, facts: Facts) -> RolloutSlots:
        return self.world.rollout_slots

    def name_seed(self) -> int:
        return self.world.sim.tick


def gather(world: World, unreachable: Collection[str] = (), hands: Hands | None = None) -> Facts:
    """The facts the reconciler's gatherer (gather.py) reads from this world."""
    return asyncio.run(gather_facts(WorldSource(world, unreachable, hands)))


def step(
    world: World,
    *,
    unreachable: Collection[str] = (),
    act_unreachable: Collection[str] = (),
    hands: Hands | None = None,
    forbidden: Callable[[Action], bool] | None = None,
) -> Decision:
    """One reconcile pass against the simulated world, then one tick of time."""
    sim = world.sim
    facts = gather(world, unreachable, hands)
    decision = run_pass(facts)
    assert run_pass(facts) == decision, "decide is not deterministic"
    if decision.plan is not None:
        sim.template_hash = decision.plan.view.desired.template_hash
        sim.shape_hash = decision.plan.view.desired.shape_hash or None
    failures = act(sim, decision.actions, {*unreachable, *act_unreachable}, forbidden)
    decision = decision.after(failures)
    world.status = decision.status.to_dict()  # as the reconciler writes it, and parses it next pass
    world.memory = decision.memory
    world.decisions.append(decision)
    world.reasons |= reasons_of(decision)
    sim.advance()
    return decision


def run(
    world: World, passes: int = 60, until: Callable[[World], bool] | None = None, **kwargs: object
) -> World:
    """Passes until `until` holds (default: Active) or passes run out."""
    done = until or (lambda w: w.state == ClusterState.ACTIVE.value)
    for _ in range(passes):
        step(world, **kwargs)  # type: ignore[arg-type]
        if done(world):
            break
    return world


def reasons_of(decision: Decision) -> set[str]:
    found = {str(condition.reason) for condition in decision.status.conditions}
    if decision.plan is not None:
        found |= {str(finding.reason) for finding in decision.plan.status.findings}
    return found


def act(
    sim: SimulatedCluster,
    actions: Sequence[Action],
    unreachable: Collection[str],
    forbidden: Callable[[Action], bool] | None = None,
) -> list[Failure]:
    """The actions carried out in order, as the actor would; what failed, as the actor reports it
    (facts only: decide classifies them). forbidden: actions the API server's authorizer refuses
    (not carried out; reported as the actor reports a 403 from RBAC)."""
    failures: list[Failure] = []
    for action in actions:
        if skipped(action, failures):
            continue
        if forbidden is not None and forbidden(action):
            message = f"{type(action).__name__}: {RBAC_DENIAL}"
            failures.append(Failure(action, message, http_status=403))
            continue
        (outcome,) = sim.apply([action], unreachable)
        failures += failures_of(outcome)
    return failures


RBAC_DENIAL = (
    '403 Forbidden: pods is forbidden: User "system:serviceaccount:ops:valkey-operator" cannot create '
    'resource "pods" in API group "" in the namespace "ns"'
)
"""How the API server words a request its authorizer refused (the actor's message for it)."""


def failures_of(outcome: Outcome) -> list[Failure]:
    """The simulator's error as the actor reports it: an error answer to a CONFIG SET or a TLS
    reload, one failure per ACL user the server refused."""
    action, error = outcome.action, outcome.error
    if error is None:
        return []
    if isinstance(action, SetConfig) and error.startswith("CONFIG SET failed"):
        return [Failure(action, error, command_error=True)]
    if isinstance(action, ReloadTls):
        return [Failure(action, error, command_error=True)]
    if isinstance(action, SyncAcl) and error.startswith("refused "):
        users = error.removeprefix("refused ").split(", ")
        return [Failure(action, error, command_error=True, user=user) for user in users]
    return [Failure(action, error)]
