"""The slot migration metrics a pass changes, from the migration logs it read (pure).

Valkey keeps finished jobs in CLUSTER GETSLOTMIGRATIONS for a while, so a pass
sees the same failed job again and again: each failed export job is counted
once, by name, against the failed jobs the previous pass saw (kept in
`Memory.failed_jobs`, only as many as the logs still show). A node whose log
could not be read keeps what was seen before (it is still there). Active export
jobs are a gauge.
"""

from __future__ import annotations

import attrs

from controllers.shared.observation import Observation
from valkey_operator.valkey.replies import MigrationOperation


@attrs.frozen(kw_only=True)
class MigrationCounts:
    new_failures: int
    """Failed export jobs not counted by an earlier pass."""
    active: int
    """Export jobs under way now."""
    failed: frozenset[str]
    """The failed jobs the logs still show: what the next pass compares with."""


def migration_counts(observation: Observation, seen: frozenset[str]) -> MigrationCounts:
    new_failures = active = 0
    current: set[str] = set()
    for node in observation.nodes.values():
        if node.reachable and node.migrations is None:
            current |= seen  # its log could not be read: what it showed before is still there
        for job in node.jobs:
            if job.operation is not MigrationOperation.EXPORT:
                continue
            active += job.active
            if job.failed:
                current.add(job.name)
                if job.name not in seen:
                    new_failures += 1
                    seen = seen | {job.name}
    return MigrationCounts(new_failures=new_failures, active=active, failed=frozenset(current))
