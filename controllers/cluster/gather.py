"""One pass's facts, gathered in one order for every caller: `gather(source) -> Facts`.

The reconciler reads its facts from the API server, the informer caches and the
nodes; the decide harness (tests/unit/controllers/cluster/decide_harness.py)
reads them from the simulator. Both implement `FactSource` (where each fact
comes from) and run this one function (which facts, in which order, and where
gathering stops), then `run_pass` on the result, so a replayed pass is the
reconciler's pass and nothing of it is copied:
1. the cluster, its recorded status and Memory, the options, the pass's now;
   the objects of the cluster's names (someone else's blocks the cluster:
   nothing of it is read or written meanwhile), its config chain resolved;
2. the TLS Secret checked against now (TLS clusters);
3. the internal Secret as read, with fresh passwords drawn in case it is
   missing; the users' password Secrets, a password drawn for each generated
   one that is missing; the ValkeyRoles spec.acl names;
4. the observation (owned pods and objects, each Ready node probed), the
   restore source while restoring, the archivers' progress while archiving, the
   backups, the rollout slots held, a seed for pod names.
Gathering stops at the first fact that blocks the cluster (`gathering_stops`:
without it nothing can be rendered or connected to); decide() says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import attrs

from controllers.cluster.decision.archive import ArchiveProgress
from controllers.cluster.decision.decide import Facts, RolloutSlots, commands_to_probe, gathering_stops
from controllers.cluster.decision.restore import RestoreHeld, RestoreSource
from controllers.cluster.render import archiver
from controllers.cluster.render.user_passwords import missing_generated
from controllers.shared.config_resolve import ResolvedConfig
from controllers.shared.credentials import DamagedSecret, InternalCredentials
from controllers.shared.observation import Observation
from controllers.shared.tls import TlsMaterial, TlsProblem
from valkey_operator.api.backup import Restore
from valkey_operator.api.config import PersistenceMode
from valkey_operator.api.role import ValkeyRole
from valkey_operator.core.rest import Obj


class FactSource(Protocol):
    """Where one pass's facts come from (the API server and nodes, or the simulator)."""

    def begin(self) -> Facts:
        """The cluster, its recorded status and Memory, the options, now, the objects of its names and
        its config resolved: what every pass has."""
        ...

    async def tls(self, facts: Facts) -> TlsMaterial | TlsProblem | None:
        """spec.tls's Secret checked against facts.now (None: no material to check, as in a test
        world that leaves TLS out)."""
        ...

    async def credentials(self, facts: Facts) -> InternalCredentials | DamagedSecret | None:
        """The internal Secret's passwords as read (None: no Secret)."""
        ...

    def fresh_credentials(self) -> InternalCredentials:
        """Passwords drawn for a missing internal Secret."""
        ...

    async def user_secrets(self, facts: Facts) -> Mapping[str, Obj | None]:
        """Secret name -> the Secret (None: absent), for every user whose passwords live in one."""
        ...

    def fresh_passwords(self, usernames: Sequence[str]) -> Mapping[str, str]:
        """A password drawn for each generated Secret that is missing."""
        ...

    def role(self, name: str) -> ValkeyRole | None: ...

    async def observe(
        self, facts: Facts, credentials: InternalCredentials | None, commands: Sequence[str]
    ) -> Observation:
        """The owned pods and objects, each Ready node probed (with the admin credentials)."""
        ...

    async def restore(self, facts: Facts, restore: Restore) -> RestoreSource | RestoreHeld: ...

    async def archive(self, facts: Facts) -> ArchiveProgress:
        """The archivers' progress for the nodes facts.observation found (spec.backup.pointInTime)."""
        ...

    def backups(self, facts: Facts) -> tuple[bool, str | None]:
        """Whether a backup of the cluster is Running, and the newest Completed one's name."""
        ...

    def rollout_slots(self, facts: Facts) -> RolloutSlots: ...

    def name_seed(self) -> int: ...


async def gather(source: FactSource) -> Facts:
    """Every fact decide() needs; it stops at the first that blocks the cluster."""
    facts = source.begin()
    if gathering_stops(facts):
        return facts
    cluster = facts.cluster
    if cluster.spec.tls is not None:
        facts = attrs.evolve(facts, tls=await source.tls(facts))
        if gathering_stops(facts):
            return facts
    credentials = await source.credentials(facts)
    facts = attrs.evolve(
        facts,
        credentials=credentials,
        fresh_credentials=source.fresh_credentials() if credentials is None else None,
    )
    if gathering_stops(facts):
        return facts
    user_secrets = await source.user_secrets(facts)
    missing = missing_generated(cluster.metadata.name, cluster.spec.acl, user_secrets.get)
    roles = {
        permission.role_ref: source.role(permission.role_ref)
        for user in cluster.spec.acl
        for permission in user.permissions
    }
    facts = attrs.evolve(
        facts, user_secrets=user_secrets, fresh_user_passwords=source.fresh_passwords(missing), roles=roles
    )
    known = credentials if isinstance(credentials, InternalCredentials) else None
    commands = commands_to_probe(cluster.spec.acl, roles) if known is not None else []
    observation = await source.observe(facts, known, commands)
    restore = cluster.spec.restore
    running, last = source.backups(facts)
    resolved = facts.resolved
    mode = resolved.persistence.mode if isinstance(resolved, ResolvedConfig) else PersistenceMode.NONE
    archiving = archiver.runs(cluster, mode, facts.options.operator_image)  # else nothing to read
    facts = attrs.evolve(facts, observation=observation)
    return attrs.evolve(
        facts,
        archive=await source.archive(facts) if archiving else None,
        restore=await source.restore(facts, restore) if restore is not None and facts.restoring else None,
        backup_running=running,
        last_backup=last,
        rollout_slots=source.rollout_slots(facts),
        name_seed=source.name_seed(),
    )
