"""The test bed's data user: what e2e tests, benches and demos write keys as.

The operator's admin user may run only the commands the operator sends
(controllers/cluster/render/acl.py ADMIN_COMMANDS: no keys, no channels), so anything that writes,
reads or pokes data does it as this spec.acl user, the way an application with a ValkeyRole would.
Its ValkeyRole allows every command category; it is made once per control plane and never changed.
"""

from __future__ import annotations

import hashlib

from valkey_operator.api.resources import VALKEY_ROLES
from valkey_operator.core.client import Client
from valkey_operator.core.rest import ApiError, Obj

SUPERUSER = "e2e-superuser"
SUPERUSER_PASSWORD = "e2e-superuser-password"
SUPERUSER_ROLE = "e2e-superuser"


def acl_entry() -> Obj:
    """SUPERUSER's spec.acl entry: every key and channel, through SUPERUSER_ROLE."""
    return {
        "username": SUPERUSER,
        "passwordHashes": [hashlib.sha256(SUPERUSER_PASSWORD.encode()).hexdigest()],
        "permissions": [
            {"roleRef": SUPERUSER_ROLE, "keys": [{"pattern": "*", "access": "readwrite"}], "channels": ["*"]}
        ],
    }


def with_superuser(spec: Obj) -> Obj:
    """spec with SUPERUSER appended to its spec.acl (after any users it names)."""
    return {**spec, "acl": [*(spec.get("acl") or []), acl_entry()]}


async def ensure_role(kube: Client) -> None:
    """SUPERUSER_ROLE, made if missing (shared by everything on the control plane)."""
    if await kube.get_or_none(VALKEY_ROLES, SUPERUSER_ROLE) is not None:
        return
    body = {
        "apiVersion": VALKEY_ROLES.api_version,
        "kind": VALKEY_ROLES.kind,
        "metadata": {"name": SUPERUSER_ROLE},
        "spec": {"categories": [{"name": "all", "access": "allow"}]},
    }
    try:
        await kube.create(VALKEY_ROLES, body)
    except ApiError as exc:
        if not exc.already_exists:  # made by someone else first: the same role
            raise
