"""The OCI image store, the image build's context and the runc runtime config: no server, no runc."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from oci_support import write_archive

from valkey_testbed import ocistore, operatorimage
from valkey_testbed.kubelet import runc, runtime

ROOT = Path(__file__).resolve().parents[3]


def load(
    tmp_path: Path, layers: list[dict[str, bytes | None]], config: dict[str, object]
) -> ocistore.OciImage:
    tmp_path.mkdir(parents=True, exist_ok=True)
    archive = tmp_path / "image.oci.tar"
    digest = write_archive(archive, layers, config)
    assert ocistore.load(archive, ["example/app:1"], lambda _: None, prefix=tmp_path / "prefix") == digest
    image = ocistore.resolve("example/app:1", prefix=tmp_path / "prefix")
    assert image is not None
    return image


def test_layers_apply_in_order_with_whiteouts_and_opaque_directories(tmp_path: Path) -> None:
    base = {"etc": None, "etc/keep": b"1", "etc/gone": b"2", "cache": None, "cache/old": b"3"}
    top = {"etc/.wh.gone": b"", "cache/.wh..wh..opq": b"", "cache/new": b"4", "etc/keep": b"5"}
    image = load(tmp_path, [base, top], {"User": "1000:2000", "Entrypoint": ["app"], "Env": ["A=b"]})
    assert (image.rootfs / "etc" / "keep").read_bytes() == b"5", "a later layer replaces a file"
    assert not (image.rootfs / "etc" / "gone").exists(), "a whiteout deletes a lower file"
    assert sorted(p.name for p in (image.rootfs / "cache").iterdir()) == ["new"], "opaque: lower entries go"
    assert (image.user, image.entrypoint, image.env, image.cmd) == ("1000:2000", ("app",), ("A=b",), ())


def test_an_image_is_found_by_tag_and_by_repository_digest_and_not_by_another_tag(tmp_path: Path) -> None:
    image = load(tmp_path, [{"bin": None}], {})
    prefix = tmp_path / "prefix"
    by_digest = ocistore.resolve(f"example/app@{image.digest}", prefix=prefix)
    assert by_digest is not None and by_digest.rootfs == image.rootfs
    assert ocistore.resolve("example/app:2", prefix=prefix) is None, "an unknown tag is a failed pull"
    assert ocistore.archive_digest(tmp_path / "image.oci.tar") == image.digest


def test_a_layer_that_escapes_the_root_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "evil.oci.tar"
    write_archive(archive, [{"../outside": b"x"}], {})
    with pytest.raises(ocistore.StoreError, match="escapes"):
        ocistore.load(archive, ["evil:1"], lambda _: None, prefix=tmp_path / "prefix")
    assert not (tmp_path / "prefix" / "outside").exists()


@pytest.mark.parametrize(
    ("reference", "repository"),
    [
        ("valkey-operator:0.1.0", "valkey-operator"),
        ("registry.example.com:5000/team/op:1", "registry.example.com:5000/team/op"),
        ("op@sha256:abc", "op"),
        ("op", "op"),
    ],
)
def test_repository_drops_tag_and_digest_but_keeps_a_registry_port(reference: str, repository: str) -> None:
    assert ocistore.repository(reference) == repository


def test_image_user_names_are_looked_up_in_the_image(tmp_path: Path) -> None:
    passwd = b"root:x:0:0::/root:/bin/sh\nvalkey:x:999:998::/data:/bin/sh\n"
    layers = [{"etc": None, "etc/passwd": passwd, "etc/group": b"root:x:0:\nops:x:4000:\n"}]
    image = load(tmp_path, layers, {"User": "valkey"})
    assert runc.image_user(image) == (999, 998), "a name takes its primary group"
    assert runc.image_user(load(tmp_path / "b", layers, {"User": "valkey:ops"})) == (999, 4000)
    assert runc.image_user(load(tmp_path / "c", layers, {})) == (0, 0), "no USER is root"
    with pytest.raises(runtime.ConfigError, match="unable to find user nobody"):
        runc.image_user(load(tmp_path / "d", layers, {"User": "nobody"}))


def pod(context: dict[str, object] | None = None) -> dict[str, object]:
    return {
        "metadata": {"name": "p", "namespace": "n", "uid": "u"},
        "spec": {"securityContext": context or {}},
    }


def test_security_context_maps_to_what_runc_enforces() -> None:
    restricted = {
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
    }
    secure = runc.security(
        pod({"seccompProfile": {"type": "RuntimeDefault"}}), {"securityContext": restricted}
    )
    assert secure == runc.Security(True, ("CAP_NET_BIND_SERVICE",), True)
    default = runc.security(pod(), {})
    assert not default.read_only_root and not default.seccomp_runtime_default
    assert "CAP_CHOWN" in default.capabilities and "CAP_SYS_ADMIN" not in default.capabilities
    dropped = runc.security(pod(), {"securityContext": {"capabilities": {"drop": ["chown", "CAP_KILL"]}}})
    assert not {"CAP_CHOWN", "CAP_KILL"} & set(dropped.capabilities)
    for refused, message in (
        ({"privileged": True}, "privileged"),
        ({"capabilities": {"add": ["FLY"]}}, "unknown capabilities: FLY"),
        ({"seccompProfile": {"type": "Localhost", "localhostProfile": "x.json"}}, "Localhost"),
    ):
        with pytest.raises(runtime.ConfigError, match=message):
            runc.security(pod(), {"securityContext": refused})


def test_runtime_config_carries_user_root_mounts_and_seccomp(tmp_path: Path) -> None:
    mounts = [
        runtime.Mount(tmp_path / "nested", "/config/users", read_only=True),
        runtime.Mount(tmp_path / "config", "/config", read_only=True),
        runtime.Mount(tmp_path / "data", "/data"),
    ]
    config = runc.runtime_config(
        argv=["valkey-operator", "--help"],
        env={"A": "b"},
        who=runtime.Identity(65532, 65532, (2000,), no_new_privs=True),
        mounts=mounts,
        secure=runc.Security(True, (), True),
        hostname="pod-0",
        working_dir="/",
        rootfs=tmp_path / "rootfs",
    )
    json.dumps(config)  # what runc reads
    assert config["process"]["user"] == {"uid": 65532, "gid": 65532, "additionalGids": [2000]}
    assert config["process"]["noNewPrivileges"] is True
    assert config["process"]["capabilities"] == {"bounding": [], "effective": [], "permitted": []}
    assert config["root"] == {"path": str(tmp_path / "rootfs"), "readonly": True}
    assert {n["type"] for n in config["linux"]["namespaces"]} == {"pid", "ipc", "uts", "mount"}, (
        "host network"
    )
    volumes = [(m["destination"], m["options"][-1]) for m in config["mounts"] if m["type"] == "bind"]
    volumes = [v for v in volumes if v[0] != "/etc/resolv.conf"]
    assert volumes == [("/config", "ro"), ("/data", "rw"), ("/config/users", "ro")], "parents first"
    assert "unshare" in config["linux"]["seccomp"]["syscalls"][0]["names"]
    unconfined = runc.runtime_config(
        argv=["x"], env={}, who=runtime.Identity(0, 0), mounts=[], secure=runc.Security(),
        hostname="h", working_dir="/", rootfs=tmp_path,
    )  # fmt: skip
    assert "seccomp" not in unconfined["linux"] and unconfined["root"]["readonly"] is False


@pytest.mark.parametrize(
    ("name", "ignored"),
    [
        ("tests/unit/test_x.py", True),
        ("docs/index.md", True),
        ("valkey_operator/__pycache__/x.pyc", True),
        ("valkey_operator/core/manager.py", False),
        ("setup.cfg", False),
        ("Containerfile", False),
        (".git/config", True),
    ],
)
def test_the_build_context_is_what_containerignore_leaves(name: str, ignored: bool) -> None:
    patterns = operatorimage._container_ignore(ROOT)
    assert any(operatorimage._ignores(p, name) for p in patterns) is ignored


def test_the_build_context_holds_the_package_and_its_metadata_only() -> None:
    tops = {name.split("/", 1)[0] for name in operatorimage._context_files(ROOT)}
    assert {
        "valkey_operator",
        "controllers",
        "setup.cfg",
        "pyproject.toml",
        "README.md",
        "Containerfile",
    } <= tops
    assert not tops & {"tests", "docs", "charts", "bench", ".git"}
