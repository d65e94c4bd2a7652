"""A pod's volumes, materialised in a per-pod directory like a kubelet's volume plugins.

Supported: emptyDir (mode 0777), configMap, secret, downwardAPI, and
projected (serviceAccountToken via
TokenRequest bound to the pod, configMap, secret, downwardAPI; the
kube-api-access volume the ServiceAccount admission plugin injects gives
token, ca.crt and namespace). Content volumes are written the way the real
atomic writer does (a `..data` symlink swapped to a new timestamped
directory, one symlink per top-level key), so a process reading a file sees
the old or the new content, never half of either. `refresh` rewrites them
when their sources changed; the caller decides when (the sync delay).

persistentVolumeClaim: the claim must be Bound (else VolumeError: the pod
waits and retries, as a real kubelet's volume manager does); its PV's
hostPath or local path is bind-mounted at each mountPath (readOnly from the
mount or the claim source). A hostPath DirectoryOrCreate path that is
missing is created as the kubelet creates it (root, 0755); a local path
must exist, and gets the pod's fsGroup (group-owned, group-writable,
setgid directories) as the kubelet's ownership management gives local
volumes. local-path-provisioner volumes are hostPath directories its helper
pod made with mode 0777 (localpath.py), so any user can write them.

Node failure models a reboot (`drop_memory`): a disk emptyDir keeps its
contents, as a real kubelet's directory under /var/lib/kubelet does, while
an emptyDir with `medium: Memory` is emptied, since a real one is a tmpfs
and does not survive the reboot. Here a Memory emptyDir is a plain host
directory (no tmpfs mount, `sizeLimit` not enforced); only its lifetime is
modelled. A failure with data loss (`drop_disk`) empties every emptyDir.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from valkey_operator.core.client import Client
from valkey_testbed.kubelet import envvars

Obj = dict[str, Any]
Payload = dict[str, tuple[bytes, int]]
"""relative path -> (content, mode)"""

DEFAULT_MODE = 0o644
TOKEN_REFRESH_FRACTION = 0.8


class VolumeError(Exception):
    """A volume cannot be set up yet (missing source, API error): the pod waits and retries."""


@attrs.define
class _Token:
    token: str
    issued: float
    expires: float


@attrs.define
class PodVolumes:
    """Materialise and refresh one pod's volumes under `root` (the pod's volumes directory)."""

    root: Path
    client: Client
    configmaps: envvars.Lookup
    secrets: envvars.Lookup
    node_allocatable: Mapping[str, str] = attrs.field(factory=dict)
    clock: Callable[[], float] = time.time
    _payloads: dict[str, Payload] = attrs.field(init=False, factory=dict)
    _tokens: dict[tuple[str, str, int], _Token] = attrs.field(init=False, factory=dict)
    _claims: dict[str, Path] = attrs.field(init=False, factory=dict)

    def path(self, volume: str) -> Path:
        """Where a volume's content is on the host: a claim's volume path, else under root."""
        return self._claims.get(volume) or self.root / volume

    @staticmethod
    def fs_group(pod: Obj) -> int | None:
        value = ((pod.get("spec") or {}).get("securityContext") or {}).get("fsGroup")
        return int(value) if value is not None else None

    def references(self, pod: Obj) -> set[tuple[str, str, str]]:
        """The (kind, namespace, name) ConfigMaps and Secrets the volumes read."""
        namespace = pod["metadata"]["namespace"]
        refs: set[tuple[str, str, str]] = set()
        for volume in pod["spec"].get("volumes") or []:
            sources = [volume]
            if "projected" in volume:
                sources = volume["projected"].get("sources") or []
            for source in sources:
                if "configMap" in source:
                    refs.add(("ConfigMap", namespace, source["configMap"].get("name", "")))
                if "secret" in source:
                    name = source["secret"].get("secretName") or source["secret"].get("name", "")
                    refs.add(("Secret", namespace, name))
        return refs

    async def setup(self, pod: Obj, pod_ip: str, host_ip: str) -> None:
        """Create every volume (emptyDirs only once: their contents persist); raise VolumeError."""
        self.root.mkdir(parents=True, exist_ok=True)
        fs_group = self.fs_group(pod)
        _own_dir(self.root.parent, fs_group, 0o755)
        _own_dir(self.root, fs_group, 0o755)
        for volume in pod["spec"].get("volumes") or []:
            name = volume["name"]
            target = self.path(name)
            if "emptyDir" in volume:
                target.mkdir(exist_ok=True)
                _own_dir(target, fs_group, 0o2777 if fs_group is not None else 0o777)
            elif "hostPath" in volume:
                continue  # mounted straight from the host path
            elif "persistentVolumeClaim" in volume:
                namespace = pod["metadata"]["namespace"]
                claim = volume["persistentVolumeClaim"]["claimName"]
                self._claims[name] = await self._claim_path(namespace, claim, fs_group)
            else:
                await self._write(pod, volume, pod_ip, host_ip, fs_group)

    async def _claim_path(self, namespace: str, claim: str, fs_group: int | None) -> Path:
        """The host path of the volume bound to a claim; VolumeError while there is none yet."""
        pvc = await self._get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}")
        volume_name = (pvc.get("spec") or {}).get("volumeName")
        phase = (pvc.get("status") or {}).get("phase")
        if phase != "Bound" or not volume_name:
            raise VolumeError(f'persistentvolumeclaim "{claim}" is not bound (phase {phase})')
        pv = await self._get(f"/api/v1/persistentvolumes/{volume_name}")
        return await asyncio.to_thread(_volume_path, volume_name, pv.get("spec") or {}, fs_group)

    async def _get(self, path: str) -> Obj:
        try:
            found: Obj = await self.client.rest.request("GET", path)
        except Exception as exc:
            raise VolumeError(f"GET {path} failed: {exc}") from exc
        return found

    def drop_disk(self, pod: Obj) -> list[str]:
        """The node's disk is lost: remove every emptyDir (`setup` recreates them empty)."""
        dropped = []
        for volume in pod["spec"].get("volumes") or []:
            if "emptyDir" in volume:
                shutil.rmtree(self.root / volume["name"], ignore_errors=True)
                dropped.append(volume["name"])
        return dropped

    def drop_memory(self, pod: Obj) -> list[str]:
        """The node went down: tmpfs contents are lost. Remove every `medium: Memory` emptyDir
        (`setup` recreates it empty when the pod starts again) and return their names."""
        dropped = []
        for volume in pod["spec"].get("volumes") or []:
            if "emptyDir" in volume and (volume["emptyDir"] or {}).get("medium") == "Memory":
                shutil.rmtree(self.path(volume["name"]), ignore_errors=True)
                dropped.append(volume["name"])
        return dropped

    async def refresh(self, pod: Obj, pod_ip: str, host_ip: str) -> bool:
        """Rewrite content volumes whose sources changed; True if any did."""
        changed = False
        fs_group = self.fs_group(pod)
        for volume in pod["spec"].get("volumes") or []:
            if "emptyDir" in volume or "hostPath" in volume or "persistentVolumeClaim" in volume:
                continue
            with contextlib.suppress(VolumeError):  # keep the last good content, like the kubelet
                changed |= await self._write(pod, volume, pod_ip, host_ip, fs_group)
        return changed

    async def _write(self, pod: Obj, volume: Obj, pod_ip: str, host_ip: str, fs_group: int | None) -> bool:
        payload = await self._payload(pod, volume, pod_ip, host_ip)
        if payload is None:
            return False
        name = volume["name"]
        if self._payloads.get(name) == payload and self.path(name).is_dir():
            return False
        _atomic_write(self.path(name), payload, fs_group)
        self._payloads[name] = payload
        return True

    async def _payload(self, pod: Obj, volume: Obj, pod_ip: str, host_ip: str) -> Payload | None:
        namespace = pod["metadata"]["namespace"]
        if "configMap" in volume:
            return self._object_payload(volume["configMap"], namespace, "configMap", DEFAULT_MODE)
        if "secret" in volume:
            return self._object_payload(volume["secret"], namespace, "secret", DEFAULT_MODE)
        if "downwardAPI" in volume:
            spec = volume["downwardAPI"]
            mode = spec.get("defaultMode", DEFAULT_MODE)
            return self._downward_payload(pod, spec.get("items") or [], mode, pod_ip, host_ip)
        if "projected" in volume:
            spec = volume["projected"]
            mode = spec.get("defaultMode", DEFAULT_MODE)
            payload: Payload = {}
            for source in spec.get("sources") or []:
                if "serviceAccountToken" in source:
                    token = await self._token(pod, source["serviceAccountToken"])
                    payload[source["serviceAccountToken"]["path"]] = (token.encode(), mode)
                elif "configMap" in source:
                    payload.update(
                        self._object_payload(source["configMap"], namespace, "configMap", mode) or {}
                    )
                elif "secret" in source:
                    payload.update(self._object_payload(source["secret"], namespace, "secret", mode) or {})
                elif "downwardAPI" in source:
                    items = source["downwardAPI"].get("items") or []
                    payload.update(self._downward_payload(pod, items, mode, pod_ip, host_ip))
            return payload
        raise VolumeError(f"volume {volume['name']!r}: this test-bed kubelet does not support its type")

    def _object_payload(self, spec: Obj, namespace: str, kind: str, default_mode: int) -> Payload | None:
        name = spec.get("name") or spec.get("secretName") or ""
        obj = (self.configmaps if kind == "configMap" else self.secrets)(namespace, name)
        mode = spec.get("defaultMode", default_mode)
        if obj is None:
            if spec.get("optional"):
                return {}
            raise VolumeError(f'{kind.lower()} "{name}" not found')
        data: dict[str, bytes] = {}
        if kind == "secret":
            data = {key: base64.b64decode(value) for key, value in (obj.get("data") or {}).items()}
        else:
            data = {key: value.encode() for key, value in (obj.get("data") or {}).items()}
            data.update(
                {key: base64.b64decode(value) for key, value in (obj.get("binaryData") or {}).items()}
            )
        items = spec.get("items")
        if not items:
            return {key: (value, mode) for key, value in data.items()}
        payload: Payload = {}
        for item in items:
            if item["key"] not in data:
                if spec.get("optional"):
                    continue
                raise VolumeError(f'{kind.lower()} "{name}" has no key "{item["key"]}"')
            payload[item.get("path") or item["key"]] = (data[item["key"]], item.get("mode", mode))
        return payload

    def _downward_payload(self, pod: Obj, items: list[Obj], mode: int, pod_ip: str, host_ip: str) -> Payload:
        payload: Payload = {}
        for item in items:
            try:
                if "fieldRef" in item:
                    value = envvars.field_value(pod, item["fieldRef"]["fieldPath"], pod_ip, host_ip)
                else:
                    ref = item["resourceFieldRef"]
                    named = ref.get("containerName")
                    container = next(
                        (c for c in pod["spec"]["containers"] if c["name"] == named),
                        pod["spec"]["containers"][0],
                    )
                    value = envvars.resource_field_value(container, ref, self.node_allocatable)
            except envvars.EnvError as exc:
                raise VolumeError(str(exc)) from exc
            payload[item["path"]] = (value.encode(), item.get("mode", mode))
        return payload

    async def _token(self, pod: Obj, spec: Obj) -> str:
        """A TokenRequest for the pod's service account, bound to the pod, refreshed at 80% of its life."""
        audience = spec.get("audience") or ""
        expiration = int(spec.get("expirationSeconds") or 3600)
        key = (spec.get("path", "token"), audience, expiration)
        now = self.clock()
        cached = self._tokens.get(key)
        if cached and now < cached.issued + TOKEN_REFRESH_FRACTION * (cached.expires - cached.issued):
            return cached.token
        meta = pod["metadata"]
        account = pod["spec"].get("serviceAccountName") or "default"
        body: Obj = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": expiration,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
            },
        }
        if audience:
            body["spec"]["audiences"] = [audience]
        path = f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{account}/token"
        try:
            issued = await self.client.rest.request("POST", path, body=body)
        except Exception as exc:
            raise VolumeError(f"token request for serviceaccount {account!r} failed: {exc}") from exc
        token: str = issued["status"]["token"]
        self._tokens[key] = _Token(token, now, now + expiration)
        return token


def _own_dir(path: Path, fs_group: int | None, mode: int) -> None:
    if fs_group is not None:
        os.chown(path, 0, fs_group)
    path.chmod(mode)


def _volume_path(volume_name: str, spec: Obj, fs_group: int | None) -> Path:
    """The host directory of a PV (hostPath or local), made or owned as the kubelet would."""
    if "hostPath" in spec:
        path = Path(spec["hostPath"]["path"])
        if not path.exists() and spec["hostPath"].get("type") == "DirectoryOrCreate":
            path.mkdir(mode=0o755, parents=True)
            path.chmod(0o755)  # whatever the umask: what the kubelet's MakeDir gives
    elif "local" in spec:
        path = Path(spec["local"]["path"])
        if path.is_dir() and fs_group is not None:
            _own_tree(path, fs_group)
    else:
        raise VolumeError(f'persistentvolume "{volume_name}": only hostPath and local are supported')
    if not path.is_dir():
        raise VolumeError(f'persistentvolume "{volume_name}": path {path} does not exist on the node')
    return path


def _own_tree(root: Path, fs_group: int) -> None:
    """The kubelet's volume ownership for fsGroup: group-owned, group rw, setgid directories."""
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        os.chown(path, -1, fs_group)
        mode = path.stat().st_mode & 0o7777
        path.chmod(mode | (0o2070 if path.is_dir() else 0o060))


def _atomic_write(target: Path, payload: Payload, fs_group: int | None) -> None:
    """Write payload under target the way the kubelet's AtomicWriter does."""
    target.mkdir(parents=True, exist_ok=True)
    _own_dir(target, fs_group, 0o755)
    stamp = f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{time.monotonic_ns()}"
    new = target / stamp
    new.mkdir()
    for relative, (content, mode) in payload.items():
        file = new / relative
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(content)
        if fs_group is not None:
            os.chown(file, 0, fs_group)
        file.chmod(mode | (0o040 if fs_group is not None else 0))
    if fs_group is not None:
        for directory in [new, *(p for p in new.rglob("*") if p.is_dir())]:
            os.chown(directory, 0, fs_group)
    data_link = target / "..data"
    old = os.readlink(data_link) if data_link.is_symlink() else None
    tmp_link = target / "..data_tmp"
    with contextlib.suppress(FileNotFoundError):
        tmp_link.unlink()
    tmp_link.symlink_to(stamp)
    tmp_link.replace(data_link)
    top_level = {relative.split("/", 1)[0] for relative in payload}
    for name in top_level:
        link = target / name
        if not link.is_symlink():
            link.symlink_to(f"..data/{name}")
    for entry in target.iterdir():
        if entry.name.startswith(".."):
            continue
        if entry.is_symlink() and entry.name not in top_level:
            entry.unlink()
    if old and old != stamp:
        shutil.rmtree(target / old, ignore_errors=True)
