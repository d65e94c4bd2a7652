"""decide() and the users' password Secrets (SPEC 1.9): a generated Secret is created once, in the
pass that first needs it, and its password is what the nodes get; a paused cluster creates none."""

from __future__ import annotations

import base64
import hashlib

from decide_harness import NAME, World, run, step, world
from simulate import SimSettings

from controllers.cluster.decision.actions import CreateObject, SyncAcl
from controllers.cluster.decision.decide import PASSWORD_SECRET_INVALID

SECRET = f"Secret/{NAME}-app"


def active_world() -> World:
    found = run(world(1, 0, SimSettings(cluster=NAME, ready_delays=(1,))), passes=80)
    assert found.state == "Active", found.status.get("message")
    return found


def test_a_user_without_a_password_source_gets_its_secret_created_once_and_its_hash_applied() -> None:
    found = active_world()
    found.edit(acl=[{"username": "app", "permissions": [{"roleRef": "r"}]}])
    found.roles["r"] = {"metadata": {"name": "r"}, "spec": {"categories": [{"name": "read"}]}}
    first = step(found)
    creates = [a for a in first.actions if isinstance(a, CreateObject) and a.object.key == SECRET]
    assert len(creates) == 1, first.actions
    data = creates[0].object.body["data"]
    password = base64.b64decode(data["password"]).decode()
    assert base64.b64decode(data["uri"]).decode().startswith(f"valkey://app:{password}@")
    digest = hashlib.sha256(password.encode()).hexdigest()
    synced = [user for a in first.actions if isinstance(a, SyncAcl) for user in a.set_users]
    assert any(user.username == "app" and f"#{digest}" in user.rules for user in synced), synced
    later = step(found)
    assert not [a for a in later.actions if isinstance(a, CreateObject) and a.object.key == SECRET]


def test_a_paused_cluster_creates_no_user_secret_and_says_why() -> None:
    found = active_world()
    found.annotate({"valkey.gomomento.com/paused": "true"})
    found.edit(acl=[{"username": "app", "permissions": [{"roleRef": "r"}]}])
    found.roles["r"] = {"metadata": {"name": "r"}, "spec": {"categories": [{"name": "read"}]}}
    decision = step(found)
    assert not decision.actions
    assert (decision.status.message or "").startswith(PASSWORD_SECRET_INVALID), decision.status.message
    assert SECRET not in found.sim.objects
