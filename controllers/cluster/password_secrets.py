"""Gather the Secrets spec users' passwords come from, creating the generated ones (SPEC 1.9).

Reads only caches in the steady state, never a list: a generated Secret is
owned and labelled, so the operator's full Secret cache holds it; a
passwordSecretName Secret is the user's, read through ReferencedSecrets (the
metadata-only watch of every Secret, one GET when its resourceVersion changes).
The named index `clusters-by-password-secret` (controllers/indexes.py) maps a
changed Secret back to its clusters. What the Secrets mean is decided in
render/user_passwords.py.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from controllers.cluster.render.context import RenderContext
from controllers.cluster.render.user_passwords import password_secret, render_user_secret
from controllers.cluster.secrets import ReferencedSecrets
from valkey_operator.core.client import ApiError, Client
from valkey_operator.core.resource import SECRETS, Resource
from valkey_operator.core.rest import Obj

CachedLookup = Callable[[Resource, str, str], Obj | None]


async def gather_password_secrets(
    ctx: RenderContext,
    *,
    client: Client,
    cached: CachedLookup,
    referenced: ReferencedSecrets,
    endpoint: str,
    create: bool,
    rng: random.Random,
) -> dict[str, Obj | None]:
    """Secret name -> the Secret (None when absent) for every user whose passwords live in one.

    A generated Secret that does not exist is created (unless `create` is False: a paused cluster)
    and read back; an existing one is never written, so its password survives operator restarts.
    """
    found: dict[str, Obj | None] = {}
    for user in ctx.cluster.spec.acl:
        name = password_secret(ctx.name, user)
        if name is None or name in found:
            continue
        if not user.generated_password:
            found[name] = await referenced.get(ctx.namespace, name)
            continue
        secret = cached(SECRETS, ctx.namespace, name) or await referenced.get(ctx.namespace, name)
        if secret is None and create:
            secret = await _create(client, render_user_secret(ctx, user.username, endpoint, rng))
        found[name] = secret
    return found


async def _create(client: Client, body: Obj) -> Obj | None:
    meta = body["metadata"]
    try:
        return await client.create(SECRETS, body)
    except ApiError as exc:
        if not exc.conflict and exc.status != 409:
            raise
        return await client.get_or_none(SECRETS, meta["name"], meta["namespace"])
