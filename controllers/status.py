"""Status writes that happen only when the observed status differs from the stored one."""

from __future__ import annotations

from typing import Any

from valkey_operator.core.rest import Obj


def merge_diff(current: Obj, desired: Obj) -> Obj:
    """The RFC 7386 merge patch turning current into desired, at any depth.

    A key present in current but absent from desired becomes null, also inside nested
    objects: a merge patch that sent the nested object whole would merge it into the
    stored one and leave the dropped key on the server, so every pass would see a
    difference and patch again. Lists are replaced whole, as merge patches do.
    """
    patch: Obj = {}
    for key in current.keys() - desired.keys():
        patch[key] = None
    for key, value in desired.items():
        old: Any = current.get(key)
        if old == value and key in current:
            continue
        if isinstance(value, dict) and isinstance(old, dict):
            patch[key] = merge_diff(old, value)
        else:
            patch[key] = value
    return patch


def status_patch(current: Obj, desired: Obj) -> Obj | None:
    """A merge patch turning the stored status into desired (None when equal).

    A recursive merge patch rather than server-side apply: it needs no field manager
    bookkeeping, and the patch carries only what changed.
    """
    if current == desired:
        return None
    return {"status": merge_diff(current, desired)}
