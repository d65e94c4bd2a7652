"""The status documents a pass stores, for tests that read them as the API server holds them.

status_document.py builds `ValkeyClusterStatus` models from the recorded one; the reconciler parses
the stored status into the model and renders the decided model once, where it writes it. These
helpers do the same around the pure functions: a stored document in, a stored document out.
"""

from __future__ import annotations

from controllers.cluster.decision.report import PlannedStatus
from controllers.cluster.decision.status_document import blocked_status, planned_status
from valkey_operator.api.cluster import ValkeyClusterStatus
from valkey_operator.core.rest import Obj


def planned_document(
    current: Obj, generation: int | None, status: PlannedStatus, endpoint_text: str, now: str
) -> Obj:
    recorded = ValkeyClusterStatus.from_dict(current)
    return planned_status(recorded, generation, status, endpoint_text, now).to_dict()


def blocked_document(
    current: Obj, generation: int | None, reason: str, message: str, endpoint_text: str, now: str
) -> Obj:
    recorded = ValkeyClusterStatus.from_dict(current)
    return blocked_status(recorded, generation, reason, message, endpoint_text, now).to_dict()
