"""What a pass knows besides what it observed: the stored status, its memory, and admission.

The Observation says only what this pass saw (pods, servers' reports, owned
objects, zones, claims). decide() reads the rest from Facts and the cluster's
Memory and hands it to the planner here, once, so every step reads one frozen
value instead of fields smuggled into the observation:
- the status as stored before this pass (`recorded_*`): tells a first bootstrap
  from a later change, a rebuilt shard from a new one, and keeps the recorded
  config hash, image and TLS record until the pods catch up;
- `awaiting`: pod writes the cache does not show yet (Memory.expected);
- `refusals`: CONFIG SETs the servers refused before (Memory.refusals);
- `may_roll`: the rollout slot decide() admitted (maxConcurrentRollouts).
The defaults are a pass with nothing recorded, nothing remembered, and a free slot.
"""

from __future__ import annotations

import attrs

from controllers.cluster.decision.memory import Refusals
from valkey_operator.api.cluster import ClusterState


@attrs.frozen(kw_only=True)
class TlsRecord:
    """status.tls as stored: the Secret content last seen, and since when."""

    secret_hash: str
    changed_at: float
    """Unix seconds."""


@attrs.frozen(kw_only=True)
class Context:
    """The non-observed inputs of one planning pass (see the module docstring)."""

    recorded_state: ClusterState | None = None
    """status.state as stored before this pass: tells a first bootstrap (Creating) from a later
    change (Updating), and a rebuilt shard from a new one (data lost)."""
    recorded_config_hash: str | None = None
    """status.configHash as stored: kept until every node runs the current settings."""
    recorded_image: str | None = None
    """status.currentImage as stored: kept until every pod runs the current template."""
    recorded_tls: TlsRecord | None = None
    """status.tls as stored: the Secret content last seen, and since when."""
    awaiting: frozenset[str] = frozenset()
    """Pods this operator created or deleted that the cache does not show so yet. Until it does,
    no pod is created or deleted (client-go's expectations): a lagging cache would otherwise ask
    for a duplicate, or let a second pod go while the first is still leaving."""
    refusals: Refusals = attrs.field(factory=Refusals)
    """CONFIG SETs the servers refused in earlier passes (a Failure the next pass sees)."""
    may_roll: bool = True
    """A rollout slot is free for this cluster (maxConcurrentRollouts), or it holds one already."""
