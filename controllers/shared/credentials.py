"""The operator's internal Valkey passwords: generated once, then read back from the owned Secret.

Passwords are generated only when the Secret does not exist yet; afterwards
every pass reads them from the Secret, so an operator restart never rotates
them behind the nodes' backs (SPEC 1.4, SPEC 5: state lives in the world).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import random

import attrs

from controllers.shared import layout
from valkey_operator.core.rest import Obj

PASSWORD_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
PASSWORD_LENGTH = 40
"""About 238 bits from a CSPRNG; alphanumeric so it needs no quoting in any file or command."""


def sha256_hex(password: str) -> str:
    """Valkey's password hash (ACL `#<hash>`): SHA-256 of the password, lowercase hex."""
    return hashlib.sha256(password.encode()).hexdigest()


@attrs.frozen(kw_only=True)
class InternalCredentials:
    admin_password: str = attrs.field(repr=False)
    replication_password: str = attrs.field(repr=False)

    @property
    def admin_hash(self) -> str:
        return sha256_hex(self.admin_password)

    @property
    def replication_hash(self) -> str:
        return sha256_hex(self.replication_password)


def generate_password(rng: random.Random) -> str:
    return "".join(rng.choice(PASSWORD_ALPHABET) for _ in range(PASSWORD_LENGTH))


def generate_credentials(rng: random.Random) -> InternalCredentials:
    """Fresh passwords for a new cluster; production passes random.SystemRandom()."""
    return InternalCredentials(
        admin_password=generate_password(rng), replication_password=generate_password(rng)
    )


def _valid(password: str) -> bool:
    return len(password) >= 16 and all(char in PASSWORD_ALPHABET for char in password)


@attrs.frozen
class DamagedSecret:
    """The internal Secret exists but its passwords are missing or malformed.

    Not regenerated silently: live nodes still know the old admin password, so new ones would lock
    the operator out. The caller reports it in status; deleting the Secret (and the pods) starts over.
    """

    message: str


def read_credentials(secret: Obj | None) -> InternalCredentials | DamagedSecret | None:
    """The passwords in the existing internal Secret; None when there is no Secret yet."""
    if secret is None:
        return None
    data = secret.get("data") or {}
    try:
        admin = base64.b64decode(data[layout.ADMIN_PASSWORD_KEY], validate=True).decode()
        replication = base64.b64decode(data[layout.REPLICATION_PASSWORD_KEY], validate=True).decode()
    except KeyError as missing:
        return DamagedSecret(f"internal Secret lacks key {missing}")
    except (TypeError, ValueError, binascii.Error):
        return DamagedSecret("internal Secret holds a password that is not valid base64 text")
    if not (_valid(admin) and _valid(replication)):
        return DamagedSecret("internal Secret holds a password the operator did not generate")
    return InternalCredentials(admin_password=admin, replication_password=replication)
