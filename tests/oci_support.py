"""Small OCI image archives written by hand, for tests of the image store and the runtime."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

Obj = dict[str, Any]
# A layer: path -> file content, or None for a directory.
Layer = Mapping[str, bytes | None]


def _layer_tar(layer: Layer) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, content in layer.items():
            info = tarfile.TarInfo(name)
            if content is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(content), 0o644
                tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def _sha256(blob: bytes) -> str:
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def _descriptor(media_type: str, blob: bytes) -> Obj:
    return {"mediaType": media_type, "digest": _sha256(blob), "size": len(blob)}


def write_archive(path: Path, layers: Sequence[Layer], config: Obj) -> str:
    """An OCI archive of one image (gzip layers in order); returns its manifest digest."""
    tars = [_layer_tar(layer) for layer in layers]
    blobs = [gzip.compress(tar, mtime=0) for tar in tars]
    image_config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": [_sha256(t) for t in tars]},
        }
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": _descriptor("application/vnd.oci.image.config.v1+json", image_config),
            "layers": [_descriptor("application/vnd.oci.image.layer.v1.tar+gzip", blob) for blob in blobs],
        }
    ).encode()
    manifest_descriptor = _descriptor("application/vnd.oci.image.manifest.v1+json", manifest)
    index = json.dumps({"schemaVersion": 2, "manifests": [manifest_descriptor]}).encode()
    with tarfile.open(path, "w") as archive:
        entries = [("oci-layout", b'{"imageLayoutVersion": "1.0.0"}'), ("index.json", index)]
        for blob in (image_config, manifest, *blobs):
            entries.append((f"blobs/sha256/{hashlib.sha256(blob).hexdigest()}", blob))
        for name, blob in entries:
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            archive.addfile(info, io.BytesIO(blob))
    return str(manifest_descriptor["digest"])
