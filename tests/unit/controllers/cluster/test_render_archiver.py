"""The archiver sidecar (spec.backup.pointInTime): only on an AOF with the operator's image known; a
hardened native sidecar reading the data volume read-only, credentials from the destination's
Secret, timestamps in valkey.conf; its destination rolls the pods, the operator's image does not."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from render_support import context, parse_valkey_conf, resolved

from controllers.cluster.render import archiver
from controllers.cluster.render.context import RenderContext
from controllers.cluster.render.objects import render_config_map
from controllers.cluster.render.pods import render_pod
from controllers.cluster.render.security import container_security_context
from controllers.cluster.render.template import template_hash
from controllers.shared.persistence import Persistence, merge_persistence
from valkey_operator.archiver.command import parser

Obj = dict[str, Any]
IMAGE = "registry.example/valkey-operator:1.2.3"
DESTINATION = {
    "endpoint": "https://s3.example:9000",
    "bucket": "backups",
    "path": "team-a/",
    "credentialsSecretName": "s3-keys",
}


def aof(mode: str = "aof") -> Any:
    merged = merge_persistence([{"persistence": {"mode": mode, "size": "1Gi"}}])
    assert isinstance(merged, Persistence), merged
    return attrs.evolve(resolved(), persistence=merged)


def archiving(
    *, mode: str = "aof", image: str = IMAGE, networks: tuple[str, ...] = (), **destination: Any
) -> RenderContext:
    backup = {
        "schedule": "0 3 * * *",
        "keep": 3,
        "destination": {**DESTINATION, **destination},
        "pointInTime": {},
    }
    ctx = context(config=aof(mode), backup=backup)
    return attrs.evolve(ctx, operator_image=image, endpoint_networks=networks)


def archiver_of(pod: Obj) -> Obj:
    [found] = [c for c in pod["spec"].get("initContainers", []) if c["name"] == archiver.CONTAINER_NAME]
    return found


def conf(ctx: RenderContext) -> dict[str, list[str]]:
    text = render_config_map(ctx)["data"]["valkey.conf"]
    return {args[0]: args[1:] for args in parse_valkey_conf(text)}


def test_the_sidecar_ships_the_data_volume_read_only_with_the_destination_from_the_spec() -> None:
    ctx = archiving(networks=("127.0.0.0/8",))
    pod = render_pod(ctx, 0, "cache-0-bcdfg", claim="data-cache-0-bcdfg")
    sidecar = archiver_of(pod)
    assert sidecar["image"] == IMAGE
    assert sidecar["restartPolicy"] == "Always"
    assert sidecar["command"] == ["valkey-operator"]
    args = parser().parse_args(sidecar["args"][1:])
    assert sidecar["args"][0] == "archive"
    assert (args.dir.as_posix(), args.endpoint, args.bucket, args.path) == (
        "/data",
        "https://s3.example:9000",
        "backups",
        "team-a",
    )
    assert (args.namespace, args.cluster, args.endpoint_allowed_networks) == (
        "team-a",
        "cache",
        "127.0.0.0/8",
    )
    assert args.ca_file is None
    assert sidecar["volumeMounts"] == [{"name": "data", "mountPath": "/data", "readOnly": True}]
    assert {e["name"]: e["valueFrom"]["secretKeyRef"] for e in sidecar["env"]} == {
        "AWS_ACCESS_KEY_ID": {"name": "s3-keys", "key": "AWS_ACCESS_KEY_ID"},
        "AWS_SECRET_ACCESS_KEY": {"name": "s3-keys", "key": "AWS_SECRET_ACCESS_KEY"},
    }
    assert sidecar["securityContext"] == container_security_context()
    assert sidecar["resources"]["limits"]["memory"]
    assert conf(ctx)["aof-timestamp-enabled"] == ["yes"]


def test_a_ca_is_mounted_read_only_and_named_to_the_archiver() -> None:
    ctx = archiving(caSecretName="s3-ca")
    pod = render_pod(ctx, 0, "cache-0-bcdfg", claim="data-cache-0-bcdfg")
    sidecar = archiver_of(pod)
    assert parser().parse_args(sidecar["args"][1:]).ca_file.as_posix() == "/etc/valkey-archive/ca.crt"
    assert {"name": "archive-ca", "mountPath": "/etc/valkey-archive", "readOnly": True} in sidecar[
        "volumeMounts"
    ]
    [volume] = [v for v in pod["spec"]["volumes"] if v["name"] == "archive-ca"]
    assert volume["secret"]["secretName"] == "s3-ca"
    assert volume["secret"]["defaultMode"] == 0o440


@pytest.mark.parametrize(("mode", "image"), [("rdb", IMAGE), ("none", IMAGE), ("aof", "")])
def test_no_sidecar_and_no_timestamps_without_an_aof_or_the_image(mode: str, image: str) -> None:
    ctx = archiving(mode=mode, image=image)
    assert archiver.asked(ctx) and not archiver.enabled(ctx)
    claim = None if mode == "none" else "data-cache-0-bcdfg"
    pod = render_pod(ctx, 0, "cache-0-bcdfg", claim=claim)
    assert all(c["name"] != archiver.CONTAINER_NAME for c in pod["spec"].get("initContainers", []))
    assert "aof-timestamp-enabled" not in conf(ctx)


def test_the_destination_rolls_the_pods_and_the_operator_image_does_not() -> None:
    plain = attrs.evolve(context(config=aof()), operator_image=IMAGE)
    on = archiving()
    assert template_hash(on) != template_hash(plain)
    assert template_hash(archiving(image="registry.example/valkey-operator:2.0.0")) == template_hash(on)
    assert template_hash(archiving(bucket="elsewhere")) != template_hash(on)
