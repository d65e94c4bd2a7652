"""Status writes that happen only when the observed status differs from the stored one."""

from __future__ import annotations

from valkey_operator.core.rest import Obj


def status_patch(current: Obj, desired: Obj) -> Obj | None:
    """A merge patch turning current into desired (None when equal); removed keys become null."""
    if current == desired:
        return None
    patch: Obj = dict(desired)
    for key in current.keys() - desired.keys():
        patch[key] = None
    return {"status": patch}
