"""The optional redis_exporter sidecar: off by default and invisible then; on, a hardened native sidecar
on the pod IP with a read-only ACL user of its own, a password derived from the admin password, and
a template hash that rolls the pods; never on a TLS cluster."""

from __future__ import annotations

import base64
import hashlib
import random
from typing import Any

from decide_harness import SECRET_KEY, gather, run, world
from render_support import context, parse_acl_file
from restore_support import FETCH

from controllers.cluster.decision.actions import ApplyObject, CreatePod, SyncAcl
from controllers.cluster.decision.decide import decide
from controllers.cluster.render import exporter
from controllers.cluster.render.acl import RenderedAcl, render_acl
from controllers.cluster.render.context import RenderContext
from controllers.cluster.render.objects import render_internal_secret
from controllers.cluster.render.pods import render_pod
from controllers.cluster.render.restore import RestoreShard, with_restore
from controllers.cluster.render.security import container_security_context
from controllers.cluster.render.template import template_hash
from controllers.options import ControllerOptions
from controllers.shared import layout
from controllers.shared.credentials import generate_credentials
from valkey_operator.api.resources import EXPORTER_USER, RESERVED_USERNAMES
from valkey_operator.operator import controller_options
from valkey_operator.operator_config import OperatorConfig
from valkey_operator.settings import parse
from valkey_testbed import images, redisexporter

Obj = dict[str, Any]
CREDENTIALS = generate_credentials(random.Random(7))
ON = {"metrics": {"exporter": {"enabled": True}}}


def pod(ctx: RenderContext) -> Obj:
    return render_pod(ctx, 0, "cache-0-bcdfg")


def sidecar(p: Obj) -> Obj:
    [only] = p["spec"]["initContainers"]
    return only


def secret_data(ctx: RenderContext) -> dict[str, str]:
    acl = render_acl([], {}.get, CREDENTIALS, exporter=exporter.enabled(ctx))
    assert isinstance(acl, RenderedAcl)
    secret = render_internal_secret(ctx, CREDENTIALS, acl)
    return {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}


def test_off_by_default_and_invisible() -> None:
    plain, off = context(), context(metrics={"exporter": {"enabled": False}})
    for ctx in (plain, off, context(metrics={})):
        assert not exporter.enabled(ctx)
        assert "initContainers" not in pod(ctx)["spec"]
        assert exporter.EXPORTER_PASSWORD_KEY not in secret_data(ctx)
        assert EXPORTER_USER not in parse_acl_file(secret_data(ctx)["users.acl"])
    # Clusters that never asked for it keep their hash, whatever the operator's exporter image.
    assert template_hash(plain) == template_hash(off)
    assert template_hash(plain) == template_hash(RenderContext(cluster=plain.cluster, config=plain.config))
    other_image = RenderContext(cluster=plain.cluster, config=plain.config, exporter_image="x/y:1")
    assert template_hash(plain) == template_hash(other_image)


def test_on_it_is_a_hardened_native_sidecar_on_the_pod_ip() -> None:
    ctx = context(**ON)
    p = pod(ctx)
    container = sidecar(p)
    assert container["name"] == "exporter"
    assert container["image"] == layout.DEFAULT_EXPORTER_IMAGE
    # A native sidecar: ends with the Valkey container (restartPolicy Never pod), restarts on its own.
    assert container["restartPolicy"] == "Always"
    assert p["spec"]["restartPolicy"] == "Never"
    assert container["args"] == [
        "--redis.addr=redis://$(POD_IP):6379",
        "--web.listen-address=$(POD_IP):9121",
        "--config-command=-",
        "--redis-only-metrics",
    ]
    assert container["ports"] == [{"name": "metrics", "containerPort": 9121, "protocol": "TCP"}]
    env = {item["name"]: item for item in container["env"]}
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["REDIS_USER"]["value"] == EXPORTER_USER
    assert env["REDIS_PASSWORD"]["valueFrom"] == {
        "secretKeyRef": {"name": "cache-internal", "key": exporter.EXPORTER_PASSWORD_KEY}
    }
    # No password in argv or a plain value anywhere in the pod.
    assert exporter.password(CREDENTIALS) not in str(p)
    security = container["securityContext"]
    assert security == container_security_context()
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert set(container["resources"]) == {"requests", "limits"}
    assert set(container["resources"]["limits"]) == {"cpu", "memory"}
    # It never holds the pod's readiness; a hung exporter is restarted.
    assert "readinessProbe" not in container
    assert container["livenessProbe"]["httpGet"] == {"path": "/health", "port": "metrics"}
    # The Valkey container is unchanged.
    assert p["spec"]["containers"] == pod(context())["spec"]["containers"]


def test_enabling_it_or_changing_its_image_rolls_the_pods() -> None:
    plain, on = context(), context(**ON)
    assert template_hash(plain) != template_hash(on)
    moved = RenderContext(cluster=on.cluster, config=on.config, exporter_image="registry.example/re:v1")
    assert template_hash(moved) != template_hash(on)
    assert sidecar(pod(moved))["image"] == "registry.example/re:v1"


def test_a_tls_cluster_gets_no_sidecar_even_if_an_old_crd_let_it_through() -> None:
    ctx = context(tls={"secretRef": "tls"}, **ON)
    assert not exporter.enabled(ctx)
    assert "initContainers" not in pod(ctx)["spec"]
    assert template_hash(ctx) == template_hash(context(tls={"secretRef": "tls"}))


def test_its_user_reads_statistics_only_with_a_derived_password() -> None:
    ctx = context(**ON)
    data = secret_data(ctx)
    password = data[exporter.EXPORTER_PASSWORD_KEY]
    assert password == exporter.password(CREDENTIALS)
    assert len(password) == 64 and password not in (
        CREDENTIALS.admin_password,
        CREDENTIALS.replication_password,
    )
    # Derived, so stable across passes and with the same admin password; another cluster's differs.
    assert exporter.password(generate_credentials(random.Random(7))) == password
    assert exporter.password(generate_credentials(random.Random(8))) != password
    users = parse_acl_file(data["users.acl"])
    assert list(users) == ["default", "valkey-operator", "valkey-replication", EXPORTER_USER]
    rules = users[EXPORTER_USER]
    assert rules[:3] == ["reset", "on", "#" + hashlib.sha256(password.encode()).hexdigest()]
    granted = rules[3:]
    assert all(rule.startswith("+") and "@" not in rule for rule in granted), granted
    assert not any(rule.startswith(("~", "%", "&", "(")) for rule in rules), "no keys, channels, selectors"
    assert "+info" in granted and not any("config" in rule or "slowlog|get" in rule for rule in granted)
    assert EXPORTER_USER in RESERVED_USERNAMES


def test_a_restoring_pod_loads_its_shard_before_the_sidecar_starts() -> None:
    ctx = context(**ON)
    shard = RestoreShard(
        index=0, object_key="backups/x/shard-0.rdb", sha256="0" * 64, keys=1, bytes=100, slots="0-16383"
    )
    restoring = with_restore(ctx, pod(ctx), FETCH, shard)
    assert [c["name"] for c in restoring["spec"]["initContainers"]] == ["restore", "exporter"]


def test_the_test_bed_builds_what_the_operator_runs() -> None:
    """The default image is the test bed's catalog image, run with the flags the bench measured."""
    assert layout.DEFAULT_EXPORTER_IMAGE == images.EXPORTER_IMAGE
    assert exporter.FLAGS == redisexporter.SIDECAR_FLAGS
    assert exporter.PORT == redisexporter.PORT
    assert RenderContext.__attrs_attrs__.exporter_image.default == layout.DEFAULT_EXPORTER_IMAGE  # type: ignore[attr-defined]


def test_the_exporter_image_flag() -> None:
    config = OperatorConfig()
    default = controller_options(parse([], environ={}), config)
    assert default.exporter_image == layout.DEFAULT_EXPORTER_IMAGE == ControllerOptions().exporter_image
    chosen = controller_options(parse(["--exporter-image", "registry.example/re:v1"], environ={}), config)
    assert chosen.exporter_image == "registry.example/re:v1"


def test_turning_it_on_gives_live_nodes_the_user_and_the_secret_its_password_before_any_new_pod() -> None:
    found = run(world(1, 1))
    found.edit(**ON)
    decision = decide(gather(found), 1_767_225_600.0)
    actions = list(decision.actions)
    secret_at = next(
        i for i, a in enumerate(actions) if isinstance(a, ApplyObject) and a.object.key == SECRET_KEY
    )
    applied = actions[secret_at]
    assert isinstance(applied, ApplyObject)
    data = applied.object.body["data"]
    assert exporter.EXPORTER_PASSWORD_KEY in data
    assert EXPORTER_USER in base64.b64decode(data["users.acl"]).decode()
    synced = [a for a in actions if isinstance(a, SyncAcl)]
    assert len(synced) == 2, "both live nodes get the user now, not when their pod is replaced"
    assert all(EXPORTER_USER in [user.username for user in a.set_users] for a in synced)
    assert all(i > secret_at for i, a in enumerate(actions) if isinstance(a, CreatePod))
    # Once the roll is done, turning it off deletes the user from every live node.
    rolled = run(found)
    rolled.edit(metrics={"exporter": {"enabled": False}})
    off = decide(gather(rolled), 1_767_225_600.0)
    deleted = [a for a in off.actions if isinstance(a, SyncAcl)]
    assert deleted and all(EXPORTER_USER in a.delete_users for a in deleted)
