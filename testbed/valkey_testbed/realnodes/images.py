"""The real nodes' images, written as OCI archives and imported into each node's containerd.

No registry is reachable, so every image a real node runs is made here and
imported (`ctr images import`) before pods need it:

- `testbed/pause:1`, the sandbox image: our `pause` binary alone;
- `valkey/valkey:<version>`: Debian's minbase (mmdebstrap, with libssl3) plus
  the test bed's TLS build of valkey-server and valkey-cli, user 999 as in the
  official image;
- `testbed/local-path-helper:1`: the same Debian base, the shell the
  local-path provisioner's helper pod runs its scripts with;
- the operator's image, the archive `operatorimage` builds from the Containerfile.

Our archives are written directly (uncompressed layers: the digest of a layer
is its diff ID), each named by the `io.containerd.image.name` annotation, so
an import needs no flags.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs

from valkey_testbed import debian, operatorimage, versions
from valkey_testbed import images as catalog
from valkey_testbed.build import BuildError, cache_root, file_lock
from valkey_testbed.realnodes.build import NodeBinaries

Progress = Callable[[str], None]

PAUSE = "docker.io/testbed/pause:1"
LOCAL_PATH_HELPER = "docker.io/testbed/local-path-helper:1"
BASE_PACKAGES = ("libssl3", "ca-certificates")
VALKEY_UID = catalog.VALKEY_UID
_OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
_OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"


class ImageError(BuildError):
    """An image could not be made or imported; the message carries the tool's output."""


@attrs.frozen
class Archive:
    reference: str
    path: Path


def image_dir() -> Path:
    return cache_root() / "realnodes" / "images"


def normalized(reference: str) -> str:
    """What containerd's CRI calls a reference: docker.io/library/x:t for x:t, docker.io/a/b for a/b."""
    name = reference.split("@", maxsplit=1)[0]
    first = name.split("/")[0]
    if "/" in name and ("." in first or ":" in first or first == "localhost"):
        return reference
    return f"docker.io/{reference}" if "/" in name else f"docker.io/library/{reference}"


def _blob(tar: tarfile.TarFile, data: bytes) -> tuple[str, int]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest.split(':')[1]}")
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return digest, len(data)


def write_archive(target: Path, reference: str, layers: Sequence[Path], config: dict[str, object]) -> None:
    """An OCI archive of one image: the layer tarballs in order, the runtime config, the name."""
    partial = target.with_suffix(".partial")
    with tarfile.open(partial, "w") as tar:
        layer_descriptors, diff_ids = [], []
        for layer in layers:
            digest = "sha256:" + hashlib.sha256(layer.read_bytes()).hexdigest()
            tar.add(layer, arcname=f"blobs/sha256/{digest.split(':')[1]}")
            layer_descriptors.append(
                {"mediaType": _OCI_LAYER, "digest": digest, "size": layer.stat().st_size}
            )
            diff_ids.append(digest)
        image_config = {
            "architecture": "amd64",
            "os": "linux",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
        }
        config_digest, config_size = _blob(tar, json.dumps(image_config).encode())
        manifest = {
            "schemaVersion": 2,
            "mediaType": _OCI_MANIFEST,
            "config": {"mediaType": _OCI_CONFIG, "digest": config_digest, "size": config_size},
            "layers": layer_descriptors,
        }
        manifest_digest, manifest_size = _blob(tar, json.dumps(manifest).encode())
        index = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {
                    "mediaType": _OCI_MANIFEST,
                    "digest": manifest_digest,
                    "size": manifest_size,
                    "annotations": {
                        "io.containerd.image.name": normalized(reference),
                        "org.opencontainers.image.ref.name": reference.rsplit(":", 1)[-1],
                    },
                }
            ],
        }
        for name, data in (
            ("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
            ("index.json", json.dumps(index).encode()),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    partial.replace(target)


def _layer_of(files: Mapping[str, tuple[Path | bytes, int]], target: Path) -> Path:
    """A layer tarball of files: image path -> (host file or content, mode); parents made 0755."""
    with tarfile.open(target, "w") as tar:
        made: set[str] = set()
        for image_path in sorted(files):
            parts = image_path.strip("/").split("/")
            for depth in range(1, len(parts)):
                directory = "/".join(parts[:depth])
                if directory not in made:
                    info = tarfile.TarInfo(directory)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                    made.add(directory)
            source, mode = files[image_path]
            data = source if isinstance(source, bytes) else source.read_bytes()
            info = tarfile.TarInfo(image_path.strip("/"))
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return target


def _pause(bins: NodeBinaries, progress: Progress) -> Archive:
    target = image_dir() / "pause-1.oci.tar"
    stamp = hashlib.sha256(bins.path("pause").read_bytes()).hexdigest()[:16]
    if _fresh(target, stamp):
        progress(f"image {PAUSE}: cached")
        return Archive(PAUSE, target)
    with tempfile.TemporaryDirectory() as tmp:
        layer = _layer_of({"/pause": (bins.path("pause"), 0o755)}, Path(tmp) / "layer.tar")
        write_archive(target, PAUSE, [layer], {"Entrypoint": ["/pause"], "User": "65535:65535"})
    _stamp(target, stamp)
    progress(f"image {PAUSE}: written")
    return Archive(PAUSE, target)


def _base(progress: Progress) -> Path:
    """Debian minbase with libssl3, made by mmdebstrap from Debian's packages (cached)."""
    argv = debian.minbase_argv(BASE_PACKAGES, Path("-"))
    key = hashlib.sha256(" ".join(argv).encode()).hexdigest()[:12]
    target = image_dir() / f"base-{versions.DEBIAN_BASE_SUITE}-{key}.tar"
    if target.is_file():
        return target
    progress(f"image base {target.name}: making it from Debian packages...")
    partial = target.with_suffix(".partial.tar")
    done = subprocess.run(debian.minbase_argv(BASE_PACKAGES, partial), capture_output=True, text=True)
    if done.returncode != 0:
        raise ImageError(f"mmdebstrap failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    partial.replace(target)
    return target


def _passwd_layer(base: Path, target: Path) -> Path:
    """/etc/passwd and /etc/group of the base plus the valkey user and group (999), and /data."""
    with tarfile.open(base) as tar:
        passwd = _member(tar, "etc/passwd") + f"valkey:x:{VALKEY_UID}:{VALKEY_UID}::/data:/usr/sbin/nologin\n"
        group = _member(tar, "etc/group") + f"valkey:x:{VALKEY_UID}:\n"
    layer = _layer_of(
        {"/etc/passwd": (passwd.encode(), 0o644), "/etc/group": (group.encode(), 0o644)}, target
    )
    with tarfile.open(layer, "a") as tar:
        info = tarfile.TarInfo("data")
        info.type, info.mode, info.uid, info.gid = tarfile.DIRTYPE, 0o755, VALKEY_UID, VALKEY_UID
        tar.addfile(info)
    return layer


def _member(tar: tarfile.TarFile, name: str) -> str:
    for candidate in (name, "./" + name):
        try:
            handle = tar.extractfile(candidate)
        except KeyError:
            continue
        if handle is not None:
            return handle.read().decode()
    raise ImageError(f"the base image has no {name}")


def _valkey(progress: Progress) -> list[Archive]:
    """The Valkey image (the catalog's TLS build on the Debian base) and the helper image."""
    build = catalog.tls_build()
    reference = catalog.tls_image()
    entry = catalog.resolve_image(reference)
    if entry is None:
        raise ImageError(f"the catalog has no {reference}: run `python -m valkey_testbed build`")
    base = _base(progress)
    binaries = {name: entry.executable(name) for name in ("valkey-server", "valkey-cli")}
    stamp = hashlib.sha256(
        b"".join([base.name.encode(), *(path.read_bytes() for path in binaries.values())])
    ).hexdigest()[:16]
    valkey = image_dir() / f"valkey-{build.version}.oci.tar"
    helper = image_dir() / "local-path-helper-1.oci.tar"
    if _fresh(valkey, stamp) and _fresh(helper, stamp):
        progress(f"image {reference}: cached")
        return [Archive(reference, valkey), Archive(LOCAL_PATH_HELPER, helper)]
    with tempfile.TemporaryDirectory() as tmp:
        users = _passwd_layer(base, Path(tmp) / "users.tar")
        files = {f"/usr/local/bin/{name}": (path, 0o755) for name, path in binaries.items()}
        server = _layer_of(files, Path(tmp) / "valkey.tar")
        config: dict[str, object] = {
            "Cmd": ["valkey-server"],
            "User": f"{VALKEY_UID}:{VALKEY_UID}",
            "WorkingDir": "/data",
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
        }
        write_archive(valkey, reference, [base, users, server], config)
        helper_config: dict[str, object] = {
            "Cmd": ["/bin/sh"],
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
        }
        write_archive(helper, LOCAL_PATH_HELPER, [base], helper_config)
    for path in (valkey, helper):
        _stamp(path, stamp)
    progress(f"image {reference}: written from {base.name} and the TLS build {build.debian_version}")
    return [Archive(reference, valkey), Archive(LOCAL_PATH_HELPER, helper)]


def _fresh(target: Path, stamp: str) -> bool:
    stamp_file = target.with_suffix(".stamp")
    return target.is_file() and stamp_file.is_file() and stamp_file.read_text() == stamp


def _stamp(target: Path, stamp: str) -> None:
    target.with_suffix(".stamp").write_text(stamp)


def archives(bins: NodeBinaries, progress: Progress = print) -> list[Archive]:
    """Every image the real nodes run, made unless cached (the operator's from its Containerfile)."""
    image_dir().mkdir(parents=True, exist_ok=True)
    with file_lock(image_dir() / ".lock"):
        made = [_pause(bins, progress), *_valkey(progress)]
    operator = operatorimage.build_image(progress)
    return [*made, Archive(operator.reference, operator.archive)]


def import_into(ctr: Callable[..., list[str]], archive: Archive) -> None:
    """Import archive into one node's containerd under the CRI's name for its reference."""
    done = subprocess.run(
        ctr("images", "import", "--no-unpack=false", str(archive.path)), capture_output=True, text=True
    )
    if done.returncode != 0:
        raise ImageError(f"ctr images import {archive.path}: {done.stderr.strip()}")
    wanted = normalized(archive.reference)
    listed = subprocess.run(
        ctr("images", "list", "-q"), capture_output=True, text=True, check=True
    ).stdout.split()
    if wanted not in listed:
        # An archive named only by org.opencontainers.image.ref.name (buildah's) imports under that
        # name: tag it with the CRI's.
        source = next(
            (name for name in listed if name.endswith(archive.reference) or name == archive.reference), None
        )
        if source is None:
            raise ImageError(f"{archive.path} imported, but no image is named {wanted} (have {listed})")
        subprocess.run(
            ctr("images", "tag", "--force", source, wanted), capture_output=True, text=True, check=True
        )
