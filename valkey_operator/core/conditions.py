"""Status conditions as Kubernetes API conventions define them (metav1.Condition)."""

from __future__ import annotations

from typing import Any

from valkey_operator.core.clock import Clock, RealClock, rfc3339

Condition = dict[str, Any]


def now_rfc3339(clock: Clock | None = None) -> str:
    """The clock's wall time in the seconds precision conditions use (default: the real clock)."""
    return rfc3339((clock or RealClock()).wall())


def find_condition(conditions: list[Condition] | None, type_: str) -> Condition | None:
    """The condition of that type in conditions (None when absent or conditions is None)."""
    for condition in conditions or []:
        if condition.get("type") == type_:
            return condition
    return None


def is_true(conditions: list[Condition] | None, type_: str) -> bool:
    """Whether the condition of that type exists with status "True"."""
    condition = find_condition(conditions, type_)
    return condition is not None and condition.get("status") == "True"


def set_condition(
    conditions: list[Condition] | None,
    type_: str,
    status: bool | str,
    reason: str,
    message: str = "",
    observed_generation: int | None = None,
    now: str | None = None,
) -> list[Condition]:
    """A new list with the condition set; lastTransitionTime moves only when status changes.

    Returns a copy, so callers can compare old and new to decide whether to write.
    """
    status_text = status if isinstance(status, str) else ("True" if status else "False")
    existing = find_condition(conditions, type_)
    transition = (
        existing["lastTransitionTime"]
        if existing is not None and existing.get("status") == status_text and "lastTransitionTime" in existing
        else (now or now_rfc3339())
    )
    updated: Condition = {
        "type": type_,
        "status": status_text,
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition,
    }
    if observed_generation is not None:
        updated["observedGeneration"] = observed_generation
    result = [c for c in conditions or [] if c.get("type") != type_]
    index = next((i for i, c in enumerate(conditions or []) if c.get("type") == type_), len(result))
    result.insert(index, updated)
    return result
