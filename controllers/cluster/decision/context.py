"""What a pass knows besides what it observed: the pass's time, the stored status, its memory, admission.

The Observation (shared/observation.py) holds only what this pass saw: the
pods, objects and claims in the cache, the nodes' reports, the zones and
storage classes. The planner also reads a few things that are not
observations, and they live here, in one frozen value decide() builds from
Facts before it builds the View:
- `now`: the pass's time, the only clock the decision reads (Facts.now);
- what the stored status says (`recorded_*`): what the last pass decided, not
  what this one saw, so a lost or stale status changes only these;
- what the cluster's Memory remembers (memory.py): the pod writes the cache
  does not show yet (`awaiting`), the CONFIG SETs refused before (`refusals`);
- rollout admission (`may_roll`): decided by decide.admit across clusters.
Keeping them out of the Observation keeps it a fact that one probe and one
cache read make, whatever the operator remembers, and keeps every
non-observed input of the planner in one place a test can build.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from controllers.cluster.decision.memory import Expected, Refusals, live_refusals
from valkey_operator.api.cluster import ClientAuth, ClusterState, TlsStatus, ValkeyClusterStatus
from valkey_operator.core.clock import parse_rfc3339


@attrs.frozen(kw_only=True)
class TlsRecord:
    """status.tls as stored: the TLS Secret content last seen, and since when."""

    secret_hash: str
    changed_at: float
    """Unix seconds."""
    client_certificates: bool = False
    """status.tls.clientAuth was Required: a node may still require client certificates."""

    @classmethod
    def of(cls, recorded: TlsStatus | None) -> TlsRecord | None:
        """The stored status.tls, None when it is absent or its time does not parse."""
        if recorded is None or not recorded.secret_hash:
            return None
        changed = parse_rfc3339(recorded.changed_at)
        required = recorded.client_auth is ClientAuth.REQUIRED
        if changed is None:
            return None
        return cls(secret_hash=recorded.secret_hash, changed_at=changed, client_certificates=required)


@attrs.frozen(kw_only=True)
class Context:
    """The planner's inputs that are not observations (see the module docstring for each)."""

    now: float = 0.0
    """Wall-clock seconds (Unix time) of the pass: backoff after failed slot migrations is counted
    from the time the migration log records, so an operator restart does not reset it."""
    recorded_state: ClusterState | None = None
    """status.state as stored before this pass: tells a first bootstrap (Creating) from a later
    change (Updating), and a rebuilt shard from a new one (data lost)."""
    recorded_config_hash: str | None = None
    """status.configHash as stored: kept until every node runs the current settings."""
    recorded_image: str | None = None
    """status.currentImage as stored: kept until every pod runs the current template."""
    recorded_tls: TlsRecord | None = None
    """status.tls as stored: the Secret content last seen, and since when."""
    may_roll: bool = True
    """A rollout slot is free for this cluster (maxConcurrentRollouts), or it holds one already."""
    awaiting: frozenset[str] = frozenset()
    """Pods this operator created or deleted that the cache does not show so yet. Until it does,
    no pod is created or deleted (client-go's expectations): a lagging cache would otherwise ask
    for a duplicate, or let a second pod go while the first is still leaving."""
    refusals: Refusals = attrs.field(factory=Refusals)
    """CONFIG SETs the cluster's existing pods refused in earlier passes (a Failure the next pass
    sees): not sent again."""

    @classmethod
    def of(
        cls,
        *,
        now: float,
        recorded: ValkeyClusterStatus,
        expected: Expected,
        refusals: Refusals,
        pods: Iterable[str],
        may_roll: bool,
    ) -> Context:
        """The context of one pass: the stored status, the pod writes still awaited (the Memory's
        expectations once this pass's pods are seen), the refusals of the pods that still exist."""
        return cls(
            now=now,
            recorded_state=recorded.state,
            recorded_config_hash=recorded.config_hash,
            recorded_image=recorded.current_image,
            recorded_tls=TlsRecord.of(recorded.tls),
            may_roll=may_roll,
            awaiting=expected.names(),
            refusals=live_refusals(refusals, pods),
        )
