"""The actor's pure parts: change detection for applies, and the duplicate-create guard."""

from __future__ import annotations

from controllers.cluster.actor import contains, pods_to_create


def test_contains_ignores_fields_the_server_added() -> None:
    stored = {"metadata": {"name": "x", "uid": "1", "labels": {"a": "1"}}, "data": {"k": "v"}}
    assert contains(stored, {"metadata": {"name": "x", "labels": {"a": "1"}}, "data": {"k": "v"}})
    assert not contains(stored, {"data": {"k": "changed"}})
    assert not contains(stored, {"data": {"k": "v", "new": "1"}})
    assert contains({"ports": [{"port": 1, "protocol": "TCP"}]}, {"ports": [{"port": 1}]})
    assert not contains({"ports": [{"port": 1}]}, {"ports": [{"port": 1}, {"port": 2}]})


def _pod(shard: int, *, phase: str = "Running", deleting: bool = False) -> dict:
    metadata: dict = {"name": f"p{shard}", "labels": {"valkey.gomomento.com/shard": str(shard)}}
    if deleting:
        metadata["deletionTimestamp"] = "now"
    return {"metadata": metadata, "status": {"phase": phase}}


def test_creates_are_capped_by_the_live_pods_the_api_shows() -> None:
    # the plan (from a lagging cache) wants 2 pods for shard 0 and 1 for shard 1
    assert pods_to_create({0: 2, 1: 1}, [], pods_per_shard=2) == {0: 2, 1: 1}
    # the API already shows the previous pass's pod of shard 0: only one more
    assert pods_to_create({0: 2, 1: 1}, [_pod(0)], pods_per_shard=2) == {0: 1, 1: 1}
    # shard 1 is full
    assert pods_to_create({1: 1}, [_pod(1), _pod(1)], pods_per_shard=2) == {}


def test_going_or_finished_pods_do_not_count() -> None:
    existing = [_pod(0, deleting=True), _pod(0, phase="Failed"), _pod(0, phase="Succeeded")]
    assert pods_to_create({0: 1}, existing, pods_per_shard=1) == {0: 1}


def test_acl_changes_set_rendered_users_and_delete_unknown_ones_but_never_internal_users() -> None:
    from controllers.cluster.actor import acl_changes, listed_usernames
    from controllers.cluster.render.acl import RenderedAcl, UserAcl

    acl = RenderedAcl(
        (
            UserAcl("default", ("reset", "off")),
            UserAcl("valkey-operator", ("reset", "on")),
            UserAcl("valkey-replication", ("reset", "on")),
            UserAcl("app", ("reset", "on", "#" + "a" * 64)),
        )
    )
    listed = [
        "user app on #abc ~app:* +@read",
        "user default off resetchannels -@all",
        "user gone on nopass ~* +@all",
        "user valkey-operator on #x ~* &* +@all",
    ]
    assert listed_usernames(listed) == ["app", "default", "gone", "valkey-operator"]
    setuser, deluser = acl_changes(acl, listed)
    assert [user.username for user in setuser] == ["default", "app"]
    assert deluser == ["gone"]
