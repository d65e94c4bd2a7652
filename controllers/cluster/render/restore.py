"""The init container of a restoring pod (spec.restore, SPEC 1.7): its shard's RDB, checked, in place;
or, restoring to a moment, its shard's archived history cut at the second.

It runs the operator's own image (`valkey-operator restore-fetch`): the Valkey
image has no S3 client, and the operator never execs into pods. The object is
streamed to the data volume, its sha256 compared with the manifest's, and the
file put where valkey-server reads it at start (dump.rdb; the base of a new
append-only file with persistence aof). A failed download or checksum ends the
init container with the reason as its termination message: the pod fails
before Valkey starts, and the cluster's status names it. The S3 credentials
come from the backup's Secret as environment variables (never arguments);
the CA, when the backup names one, is a read-only mount.
"""

from __future__ import annotations

import attrs

from controllers.cluster.render.context import RenderContext
from controllers.cluster.render.security import READ_ONLY_MODE, container_security_context
from controllers.shared import layout
from controllers.shared.names import DATA_VOLUME
from valkey_operator.api.config import PersistenceMode
from valkey_operator.api.destination_keys import CA_KEY, CREDENTIAL_KEYS
from valkey_operator.core.rest import Obj

CONTAINER_NAME = "restore"
CA_VOLUME = "restore-ca"
CA_DIR = "/etc/valkey-restore"
COMMAND = "restore-fetch"

# The renderer's inputs are defined with it, as RenderContext is: the decision (decision/restore.py)
# and the restore source reader (../restore_source.py) build them; render/ imports nothing of decision/.


@attrs.frozen(kw_only=True)
class RestoreShard:
    index: int
    object_key: str
    sha256: str
    keys: int
    bytes: int
    slots: str


@attrs.frozen(kw_only=True)
class ArchiveShard:
    """A shard restored to a moment: one node's history, from base base_seq on (its folder is the
    node's prefix in the bucket), cut at the second."""

    index: int
    node: str
    folder: str
    base_seq: int
    slots: str
    keys: None = None
    """A history counts nothing ahead: its load is reported, not compared."""


@attrs.frozen(kw_only=True)
class RestoreFetch:
    """What a restoring pod's init container needs: the image and where the objects are."""

    image: str
    endpoint: str
    bucket: str
    region: str
    credentials_secret: str
    ca_secret: str | None = None
    until: int | None = None
    """A restore to a moment: the last second kept of each history."""


def restore_layout(ctx: RenderContext) -> str:
    """How restore-fetch lays the file out: the base of an append-only file, or dump.rdb."""
    return "aof" if ctx.persistence.mode is PersistenceMode.AOF else "rdb"


def _source_args(fetch: RestoreFetch, shard: RestoreShard | ArchiveShard) -> list[str]:
    if isinstance(shard, RestoreShard):
        return ["--key", shard.object_key, "--sha256", shard.sha256]
    return [
        "--archive",
        shard.folder,
        "--base-seq",
        str(shard.base_seq),
        "--until",
        str(fetch.until),
    ]


def with_restore(
    ctx: RenderContext, pod: Obj, fetch: RestoreFetch, shard: RestoreShard | ArchiveShard
) -> Obj:
    """pod with the init container that loads shard's RDB or history (and the CA volume it reads)."""
    args = [
        COMMAND,
        "--endpoint",
        fetch.endpoint,
        "--bucket",
        fetch.bucket,
        "--region",
        fetch.region,
        *_source_args(fetch, shard),
        "--layout",
        restore_layout(ctx),
        "--dir",
        layout.DATA_DIR,
    ]
    mounts: list[Obj] = [{"name": DATA_VOLUME, "mountPath": layout.DATA_DIR}]
    volumes: list[Obj] = []
    if fetch.ca_secret:
        args += ["--ca-file", f"{CA_DIR}/{CA_KEY}"]
        mounts.append({"name": CA_VOLUME, "mountPath": CA_DIR, "readOnly": True})
        volumes.append(
            {
                "name": CA_VOLUME,
                "secret": {
                    "secretName": fetch.ca_secret,
                    "defaultMode": READ_ONLY_MODE,
                    "items": [{"key": CA_KEY, "path": CA_KEY}],
                },
            }
        )
    init = {
        "name": CONTAINER_NAME,
        "image": fetch.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["valkey-operator"],
        "args": args,
        "env": [_secret_env(name, fetch.credentials_secret) for name in CREDENTIAL_KEYS],
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": container_security_context(),
        "volumeMounts": mounts,
    }
    spec = pod["spec"]
    return {
        **pod,
        "spec": {
            **spec,
            "initContainers": [init, *spec.get("initContainers", [])],
            "volumes": [*spec["volumes"], *volumes],
        },
    }


def _secret_env(name: str, secret: str) -> Obj:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": name}}}
