"""Where each spec user's passwords come from (SPEC 1.9), and the Secrets the operator generates.

Three sources, at most one per user (admission enforces it):
- `passwordHashes` in the spec: used as they are.
- `passwordSecretName`: a Secret in the cluster's namespace whose values are
  the passwords (key names are free; several keys during a rotation). They are
  hashed here (SHA-256, Valkey's `#<hash>`), so a changed Secret changes the
  rendered rules, and the planner sets them on every node with ACL SETUSER.
- neither: the operator creates `<cluster>-<username>` once, with a random
  password, the username and a connection URI, owned by the cluster; every
  later pass reads the password back from it (never regenerated, like the
  internal Secret in shared/credentials.py).
The result is the spec users with their hashes filled in, so acl.py renders
all three alike.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Sequence

import attrs

from controllers.cluster.render.context import RenderContext
from valkey_operator.api.cluster import AclUser
from valkey_operator.core.rest import Obj

USERNAME_KEY = "username"
PASSWORD_KEY = "password"
URI_KEY = "uri"
"""Keys of a generated user Secret: what a client needs, the URI ready for most client libraries."""

SecretLookup = Callable[[str], Obj | None]
"""Secret name (in the cluster's namespace) -> the Secret with its data, or None when absent."""


@attrs.frozen
class PasswordProblem:
    """A user's password Secret is missing or holds no usable password: the cluster waits for it."""

    message: str


def user_secret_name(cluster: str, username: str) -> str:
    """The generated Secret of a user with no password source (admission keeps it a valid name)."""
    return f"{cluster}-{username}"


def password_secret(cluster: str, user: AclUser) -> str | None:
    """The Secret a user's passwords are read from; None when the spec holds its hashes."""
    if user.password_secret_name is not None:
        return user.password_secret_name
    return user_secret_name(cluster, user.username) if user.generated_password else None


def _values(secret: Obj) -> dict[str, bytes] | str:
    try:
        return {
            key: base64.b64decode(value, validate=True) for key, value in (secret.get("data") or {}).items()
        }
    except (TypeError, ValueError, binascii.Error):
        return "holds a value that is not valid base64"


def secret_hashes(secret: Obj | None, name: str, *, generated: bool) -> tuple[str, ...] | PasswordProblem:
    """SHA-256 of every password in the Secret, in key order; a generated Secret's `password` only."""
    if secret is None:
        return PasswordProblem(f"Secret {name} not found")
    values = _values(secret)
    if isinstance(values, str):
        return PasswordProblem(f"Secret {name} {values}")
    if generated:
        values = {PASSWORD_KEY: values[PASSWORD_KEY]} if PASSWORD_KEY in values else {}
    passwords = [values[key] for key in sorted(values) if values[key]]
    if not passwords:
        wanted = f"a non-empty {PASSWORD_KEY!r} key" if generated else "a non-empty value"
        return PasswordProblem(f"Secret {name} holds no password (it needs {wanted})")
    return tuple(dict.fromkeys(hashlib.sha256(password).hexdigest() for password in passwords))


def missing_generated(cluster: str, users: Sequence[AclUser], secrets: SecretLookup) -> list[str]:
    """Usernames whose generated Secret does not exist yet: the decision creates them."""
    return [
        user.username
        for user in users
        if user.generated_password and secrets(user_secret_name(cluster, user.username)) is None
    ]


def with_passwords(
    cluster: str, users: Sequence[AclUser], secrets: SecretLookup
) -> tuple[AclUser, ...] | PasswordProblem:
    """The users with `password_hashes` filled from their Secrets, or every problem found at once."""
    resolved: list[AclUser] = []
    problems: list[str] = []
    for user in users:
        name = password_secret(cluster, user)
        if name is None:
            resolved.append(user)
            continue
        hashes = secret_hashes(secrets(name), name, generated=user.generated_password)
        if isinstance(hashes, PasswordProblem):
            problems.append(f"user {user.username}: {hashes.message}")
        else:
            resolved.append(attrs.evolve(user, password_hashes=hashes, password_secret_name=None))
    return PasswordProblem("; ".join(problems)) if problems else tuple(resolved)


def client_uri(username: str, password: str, endpoint: str, *, tls: bool) -> str:
    """`valkey://user:password@host:port` (`valkeys://` with TLS); both are URL-safe as generated."""
    return f"{'valkeys' if tls else 'valkey'}://{username}:{password}@{endpoint}"


def render_user_secret(ctx: RenderContext, username: str, endpoint: str, password: str) -> Obj:
    """A new generated user Secret (the password drawn by the gatherer); created once, never
    applied over an existing one."""
    data = {
        USERNAME_KEY: username,
        PASSWORD_KEY: password,
        URI_KEY: client_uri(username, password, endpoint, tls=ctx.tls_secret is not None),
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": ctx.metadata(user_secret_name(ctx.name, username)),
        "type": "Opaque",
        "data": {key: base64.b64encode(value.encode()).decode() for key, value in data.items()},
    }
