"""Spec users' passwords from hashes, a Secret of passwords, or a generated Secret (pure)."""

from __future__ import annotations

import base64
import hashlib
import random

from render_support import context

from controllers.cluster.render.user_passwords import (
    PasswordProblem,
    client_uri,
    password_secret,
    render_user_secret,
    secret_hashes,
    with_passwords,
)
from controllers.shared.credentials import generate_password
from valkey_operator.api.cluster import AclUser

HASH = hashlib.sha256(b"in-the-spec").hexdigest()


def secret(**values: str) -> dict[str, object]:
    return {"data": {key: base64.b64encode(value.encode()).decode() for key, value in values.items()}}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_each_source_names_its_secret() -> None:
    assert password_secret("cache", AclUser(username="a", password_hashes=(HASH,))) is None
    assert password_secret("cache", AclUser(username="a", password_secret_name="pw")) == "pw"
    assert password_secret("cache", AclUser(username="app.v2")) == "cache-app.v2"


def test_every_password_in_a_secret_is_hashed_in_key_order() -> None:
    found = secret_hashes(secret(new="second", old="first", blank=""), "pw", generated=False)
    assert found == (sha("second"), sha("first"))


def test_a_generated_secret_counts_only_its_password_key() -> None:
    stored = secret(username="app", password="p4ss", uri="valkey://app:p4ss@h:6379")
    assert secret_hashes(stored, "cache-app", generated=True) == (sha("p4ss"),)


def test_missing_empty_and_undecodable_secrets_are_problems() -> None:
    assert secret_hashes(None, "pw", generated=False) == PasswordProblem("Secret pw not found")
    empty = secret_hashes(secret(a=""), "pw", generated=False)
    assert isinstance(empty, PasswordProblem) and "holds no password" in empty.message
    no_key = secret_hashes(secret(uri="x"), "cache-app", generated=True)
    assert isinstance(no_key, PasswordProblem) and "'password'" in no_key.message
    broken = secret_hashes({"data": {"a": "!!"}}, "pw", generated=False)
    assert isinstance(broken, PasswordProblem) and "base64" in broken.message


def test_users_get_their_hashes_and_every_problem_is_reported_at_once() -> None:
    users = (
        AclUser(username="spec", password_hashes=(HASH,)),
        AclUser(username="ref", password_secret_name="ref-pw"),
        AclUser(username="gen"),
    )
    secrets = {"ref-pw": secret(one="1", two="2"), "cache-gen": secret(password="g")}
    resolved = with_passwords("cache", users, secrets.get)
    assert isinstance(resolved, tuple)
    assert [user.password_hashes for user in resolved] == [(HASH,), (sha("1"), sha("2")), (sha("g"),)]
    assert all(user.password_secret_name is None for user in resolved)

    failed = with_passwords("cache", users, {}.get)
    assert failed == PasswordProblem(
        "user ref: Secret ref-pw not found; user gen: Secret cache-gen not found"
    )


def test_generated_secret_holds_a_login_and_a_uri_and_is_owned() -> None:
    ctx = context()
    body = render_user_secret(
        ctx, "app", "cache.team-a.svc.cluster.local:6379", generate_password(random.Random(7))
    )
    data = {key: base64.b64decode(value).decode() for key, value in body["data"].items()}
    assert body["metadata"]["name"] == "cache-app"
    assert body["metadata"]["ownerReferences"][0]["uid"] == ctx.cluster.metadata.uid
    assert data["username"] == "app" and len(data["password"]) == 40 and data["password"].isalnum()
    assert data["uri"] == f"valkey://app:{data['password']}@cache.team-a.svc.cluster.local:6379"
    assert secret_hashes(body, "cache-app", generated=True) == (sha(data["password"]),)


def test_tls_clusters_get_a_valkeys_uri() -> None:
    assert client_uri("u", "p", "h:6379", tls=True) == "valkeys://u:p@h:6379"
    tls = context(tls={"secretRef": "cache-tls"})
    body = render_user_secret(tls, "app", "h:6379", generate_password(random.Random(1)))
    assert base64.b64decode(body["data"]["uri"]).decode().startswith("valkeys://app:")
