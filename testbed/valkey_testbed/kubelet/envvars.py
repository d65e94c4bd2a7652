"""A container's environment and `$(VAR)` expansion, with the kubelet's semantics.

Expansion follows Kubernetes' forked `expansion.Expand`: `$(NAME)` becomes
the variable's value when it is defined, stays literally `$(NAME)` when it is
not, and `$$` escapes a dollar. Env values may refer to variables defined
before them (and to the service variables); command and args to all of them.
"""

from __future__ import annotations

import base64
import decimal
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

Obj = dict[str, Any]
Lookup = Callable[[str, str], Obj | None]
"""(namespace, name) -> a cached ConfigMap or Secret, or None."""


class EnvError(Exception):
    """A required ConfigMap/Secret key is missing: CreateContainerConfigError, retried."""


def expand(text: str, variables: Mapping[str, str]) -> str:
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    while cursor < len(text):
        if text[cursor] == "$" and cursor + 1 < len(text):
            out.append(text[checkpoint:cursor])
            rest = text[cursor + 1 :]
            if rest[0] == "$":
                out.append("$")
                advance = 1
            elif rest[0] == "(":
                close = rest.find(")")
                if close == -1:
                    out.append("$(")
                    advance = 1
                else:
                    name = rest[1:close]
                    out.append(variables.get(name, f"$({name})"))
                    advance = close + 1
            else:
                out.append("$" + rest[0])
                advance = 1
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    out.append(text[checkpoint:])
    return "".join(out)


_SUFFIXES: dict[str, int | decimal.Decimal] = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "n": decimal.Decimal("1e-9"),
    "u": decimal.Decimal("1e-6"),
    "m": decimal.Decimal("1e-3"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}


def parse_quantity(text: str | int | float) -> decimal.Decimal:
    """A Kubernetes resource quantity ("500m", "1Gi", "2") as a number."""
    match = re.fullmatch(r"([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([A-Za-z]*)", str(text).strip())
    if not match:
        raise ValueError(f"bad quantity {text!r}")
    number, suffix = match.groups()
    return decimal.Decimal(number) * decimal.Decimal(_SUFFIXES[suffix] if suffix else 1)


def resource_field_value(
    container: Obj, ref: Obj, node_allocatable: Mapping[str, str], *, default_divisor: str = "1"
) -> str:
    """resourceFieldRef (limits.cpu, requests.memory, ...), rounded up like the kubelet."""
    kind, _, resource = ref["resource"].partition(".")
    resources = container.get("resources") or {}
    value = (resources.get(kind) or {}).get(resource)
    if value is None and kind == "limits":
        value = node_allocatable.get(resource)
    if value is None:
        value = "0"
    divisor = parse_quantity(ref.get("divisor") or default_divisor)
    return str(math.ceil(parse_quantity(value) / divisor))


def field_value(pod: Obj, path: str, pod_ip: str, host_ip: str) -> str:
    """A downward-API fieldRef value."""
    meta = pod.get("metadata", {})
    spec = pod.get("spec", {})
    label = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if label:
        return str((meta.get(label.group(1)) or {}).get(label.group(2), ""))
    values = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "metadata.labels": _format_map(meta.get("labels") or {}),
        "metadata.annotations": _format_map(meta.get("annotations") or {}),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.hostIP": host_ip,
        "status.hostIPs": host_ip,
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
    }
    if path not in values:
        raise EnvError(f"unsupported fieldRef {path!r}")
    return str(values[path])


def _format_map(values: Mapping[str, str]) -> str:
    """Labels/annotations as a downward-API file shows them: key="value" lines, sorted."""
    return "\n".join(f'{key}="{_escape(value)}"' for key, value in sorted(values.items()))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def service_env(api_host: str, api_port: int) -> dict[str, str]:
    """The `kubernetes` Service's variables, pointing at the API server on loopback (TESTBED.md)."""
    url = f"tcp://{api_host}:{api_port}"
    prefix = f"KUBERNETES_PORT_{api_port}_TCP"
    return {
        "KUBERNETES_SERVICE_HOST": api_host,
        "KUBERNETES_SERVICE_PORT": str(api_port),
        "KUBERNETES_SERVICE_PORT_HTTPS": str(api_port),
        "KUBERNETES_PORT": url,
        prefix: url,
        f"{prefix}_PROTO": "tcp",
        f"{prefix}_PORT": str(api_port),
        f"{prefix}_ADDR": api_host,
    }


def _source_data(obj: Obj, secret: bool) -> dict[str, str]:
    if secret:
        return {
            key: base64.b64decode(value).decode(errors="replace")
            for key, value in (obj.get("data") or {}).items()
        }
    data = dict(obj.get("data") or {})
    for key, value in (obj.get("binaryData") or {}).items():
        data.setdefault(key, base64.b64decode(value).decode(errors="replace"))
    return data


def container_env(
    pod: Obj,
    container: Obj,
    *,
    pod_ip: str,
    host_ip: str,
    base: Mapping[str, str],
    configmaps: Lookup,
    secrets: Lookup,
    node_allocatable: Mapping[str, str],
) -> dict[str, str]:
    """The variables the container declares (envFrom, then env), on top of `base` (service vars).

    Returns only base + declared variables: the image's own env is merged by the caller.
    """
    namespace = pod["metadata"]["namespace"]
    env: dict[str, str] = dict(base)
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix", "")
        ref, lookup = (
            (source["configMapRef"], configmaps)
            if "configMapRef" in source
            else (source.get("secretRef"), secrets)
        )
        if not ref:
            continue
        obj = lookup(namespace, ref["name"])
        if obj is None:
            if ref.get("optional"):
                continue
            raise EnvError(f'{"configmap" if lookup is configmaps else "secret"} "{ref["name"]}" not found')
        for key, value in _source_data(obj, lookup is secrets).items():
            env[prefix + key] = value
    for var in container.get("env") or []:
        name = var["name"]
        if "valueFrom" not in var:
            env[name] = expand(var.get("value", ""), env)
            continue
        source = var["valueFrom"]
        if "fieldRef" in source:
            env[name] = field_value(pod, source["fieldRef"]["fieldPath"], pod_ip, host_ip)
        elif "resourceFieldRef" in source:
            ref = source["resourceFieldRef"]
            named = ref.get("containerName")
            target = (
                next((c for c in pod["spec"]["containers"] if c["name"] == named), container)
                if named
                else container
            )
            env[name] = resource_field_value(target, ref, node_allocatable)
        else:
            key_ref, lookup, kind = (
                (source["configMapKeyRef"], configmaps, "configmap")
                if "configMapKeyRef" in source
                else (source["secretKeyRef"], secrets, "secret")
            )
            obj = lookup(namespace, key_ref["name"])
            data = _source_data(obj, kind == "secret") if obj is not None else None
            if data is None or key_ref["key"] not in data:
                if key_ref.get("optional"):
                    continue
                what = f'{kind} "{key_ref["name"]}"' if data is None else f'key "{key_ref["key"]}" in {kind}'
                raise EnvError(f"{what} not found")
            env[name] = data[key_ref["key"]]
    return env
