"""The test bed's local image store: OCI archives unpacked into root filesystems for runc.

`load` reads an OCI image archive (index.json -> manifest -> config and
layers), applies the layers in order with their whiteouts into
`<store>/<manifest digest>/rootfs`, keeps the image config beside it, and
points each given reference (and `name@sha256:<digest>`) at it. `resolve`
answers what the kubelet needs to run a container of a reference. Unpacked
images are immutable: containers mount them as the lower layer of an overlay.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import attrs

from valkey_testbed.build import file_lock

Progress = Callable[[str], None]

# Unpacked images beyond those a reference names are kept for this many (running pods may use them).
_KEEP_UNREFERENCED = 2
_WHITEOUT = ".wh."
_OPAQUE = ".wh..wh..opq"


class StoreError(Exception):
    """An archive could not be read or unpacked."""


@attrs.frozen
class OciImage:
    """What a container of this image starts from: its root filesystem and its config."""

    reference: str
    digest: str
    rootfs: Path
    user: str
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    env: tuple[str, ...]
    working_dir: str


def store_dir(prefix: Path) -> Path:
    return prefix / "oci"


def archive_digest(archive: Path) -> str:
    """The manifest digest (sha256:...) of a one-image OCI archive."""
    with tarfile.open(archive) as tar:
        return str(_manifest_descriptor(_read_json(tar, "index.json"))["digest"])


def load(archive: Path, references: Sequence[str], progress: Progress, *, prefix: Path) -> str:
    """Unpack archive (unless already unpacked) and point references at it; returns its digest."""
    store = store_dir(prefix)
    store.mkdir(parents=True, exist_ok=True)
    store.chmod(0o755)
    with file_lock(store / ".lock"), tarfile.open(archive) as tar:
        descriptor = _manifest_descriptor(_read_json(tar, "index.json"))
        digest = str(descriptor["digest"])
        target = store / digest.replace(":", "-")
        if (target / "config.json").is_file():
            progress(f"  image store: {digest[:19]} already unpacked")
        else:
            _unpack(tar, digest, target, progress)
        names = {*references, *(f"{repository(reference)}@{digest}" for reference in references)}
        for reference in names:
            _write_ref(store, reference, digest)
        _prune(store)
    return digest


def resolve(reference: str, *, prefix: Path) -> OciImage | None:
    """The unpacked image a reference names, or None (not loaded: a failed pull)."""
    store = store_dir(prefix)
    ref_file = _ref_file(store, reference)
    if not ref_file.is_file():
        return None
    digest = json.loads(ref_file.read_text())["digest"]
    directory = store / digest.replace(":", "-")
    config_file = directory / "config.json"
    if not config_file.is_file():
        return None
    config = json.loads(config_file.read_text()).get("config") or {}
    return OciImage(
        reference=reference,
        digest=digest,
        rootfs=directory / "rootfs",
        user=str(config.get("User") or "0"),
        entrypoint=tuple(config.get("Entrypoint") or ()),
        cmd=tuple(config.get("Cmd") or ()),
        env=tuple(config.get("Env") or ()),
        working_dir=str(config.get("WorkingDir") or "/"),
    )


def repository(reference: str) -> str:
    """The repository part of a reference: without its tag or digest."""
    name = reference.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return name[: len(name) - len(last)] + last.split(":", 1)[0]


def _ref_file(store: Path, reference: str) -> Path:
    return store / "refs" / (hashlib.sha256(reference.encode()).hexdigest()[:32] + ".json")


def _write_ref(store: Path, reference: str, digest: str) -> None:
    path = _ref_file(store, reference)
    path.parent.mkdir(exist_ok=True)
    path.parent.chmod(0o755)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"reference": reference, "digest": digest}))
    tmp.chmod(0o644)
    tmp.replace(path)


def _prune(store: Path) -> None:
    """Remove unpacked images no reference names, except the newest few."""
    referenced = set()
    for ref in (store / "refs").glob("*.json"):
        referenced.add(json.loads(ref.read_text())["digest"].replace(":", "-"))
    unreferenced = sorted(
        (d for d in store.glob("sha256-*") if d.name not in referenced),
        key=lambda d: d.stat().st_mtime,
        reverse=True,
    )
    for directory in unreferenced[_KEEP_UNREFERENCED:]:
        shutil.rmtree(directory, ignore_errors=True)


def _read_json(tar: tarfile.TarFile, name: str) -> Any:
    member = tar.extractfile(name)
    if member is None:
        raise StoreError(f"{name} missing from the archive")
    return json.load(member)


def _blob(tar: tarfile.TarFile, digest: str) -> IO[bytes]:
    algorithm, _, hexdigest = digest.partition(":")
    member = tar.extractfile(f"blobs/{algorithm}/{hexdigest}")
    if member is None:
        raise StoreError(f"blob {digest} missing from the archive")
    return member


def _manifest_descriptor(index: Any) -> Any:
    manifests = index.get("manifests") or []
    if len(manifests) != 1:
        raise StoreError(f"expected one image in the archive, found {len(manifests)}")
    return manifests[0]


def _unpack(tar: tarfile.TarFile, digest: str, target: Path, progress: Progress) -> None:
    manifest = json.load(_blob(tar, digest))
    config_bytes = _blob(tar, manifest["config"]["digest"]).read()
    partial = Path(tempfile.mkdtemp(prefix=".unpack-", dir=target.parent))
    try:
        rootfs = partial / "rootfs"
        rootfs.mkdir()
        for layer in manifest["layers"]:
            blob = _blob(tar, layer["digest"])
            _verify(blob, layer["digest"])
            blob = _blob(tar, layer["digest"])
            with tarfile.open(fileobj=blob, mode="r|*") as layer_tar:
                _apply_layer(layer_tar, rootfs)
        rootfs.chmod(0o755)
        partial.chmod(0o755)
        (partial / "config.json").write_bytes(config_bytes)
        (partial / "config.json").chmod(0o644)
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    progress(f"  image store: unpacked {digest[:19]} into {target}")


def _verify(blob: IO[bytes], digest: str) -> None:
    hasher = hashlib.sha256()
    for chunk in iter(lambda: blob.read(1 << 20), b""):
        hasher.update(chunk)
    if f"sha256:{hasher.hexdigest()}" != digest:
        raise StoreError(f"layer {digest} does not match its digest")


def _apply_layer(layer: tarfile.TarFile, rootfs: Path) -> None:
    """Extract one layer over rootfs, honouring OCI whiteouts (deleted files, opaque directories)."""
    for member in layer:
        path = Path(os.path.normpath(member.name.lstrip("/")))
        if path.is_absolute() or path.parts[:1] == ("..",):
            raise StoreError(f"layer member escapes the root: {member.name}")
        base = path.name
        parent = rootfs / path.parent
        if base == _OPAQUE:
            for child in parent.iterdir() if parent.is_dir() else ():
                _remove(child)
            continue
        if base.startswith(_WHITEOUT):
            _remove(parent / base[len(_WHITEOUT) :])
            continue
        destination = rootfs / path
        if destination.is_symlink() or (destination.exists() and not destination.is_dir()):
            destination.unlink()
        elif destination.is_dir() and not member.isdir():
            shutil.rmtree(destination)
        # The archive is one we built; owners, modes and links are kept as the image says.
        layer.extract(member, rootfs, set_attrs=True, numeric_owner=True, filter="fully_trusted")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
