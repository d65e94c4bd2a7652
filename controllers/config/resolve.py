"""Resolve a ValkeyConfig's baseRef chain into the effective settings (pure).

The effective config is the chain merged child over parent: imageRef from the
nearest config that sets it; resources, valkey and podSecurity key by key
(valkey directive names case-insensitively). A missing base, a cycle, a chain
deeper than MAX_BASE_CHAIN_DEPTH, or a missing image is a resolution failure
with a reason the status reports (SPEC 1.2).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Literal

import attrs

from valkey_operator.api.resources import MAX_BASE_CHAIN_DEPTH
from valkey_operator.core.rest import Obj

Lookup = Callable[[str], Obj | None]
FailureReason = Literal["ConfigNotFound", "ImageNotFound", "BaseNotFound", "BaseCycle", "TooDeep"]

DEFAULT_POD_SECURITY = {"runAsUser": 999, "runAsGroup": 999, "fsGroup": 999}


@attrs.frozen
class ResolvedImage:
    name: str
    repository: str
    tag: str
    version: str

    def to_status(self) -> Obj:
        return {"name": self.name, "repository": self.repository, "tag": self.tag, "version": self.version}

    @property
    def reference(self) -> str:
        return f"{self.repository}:{self.tag}"


@attrs.frozen
class ResolvedConfig:
    """The effective settings of a config, and the chain they came from (leaf first)."""

    chain: tuple[str, ...]
    image: ResolvedImage
    resources: dict[str, str]
    valkey: dict[str, str]
    pod_security: dict[str, int]

    @property
    def settings_hash(self) -> str:
        """Changes exactly when something that shapes the pods or valkey.conf changes."""
        content = {
            "image": [self.image.repository, self.image.tag, self.image.version],
            "resources": self.resources,
            "valkey": self.valkey,
            "podSecurity": self.pod_security,
        }
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]


@attrs.frozen
class ResolutionFailure:
    reason: FailureReason
    message: str
    chain: tuple[str, ...]


def resolve(name: str, get_config: Lookup, get_image: Lookup) -> ResolvedConfig | ResolutionFailure:
    """Walk name's baseRef chain and merge it; never raises for bad references."""
    chain: list[Obj] = []
    names: list[str] = []
    current: str | None = name
    while current is not None:
        if current in names:
            cycle = " -> ".join([*names[names.index(current) :], current])
            return ResolutionFailure("BaseCycle", f"baseRef chain has a cycle: {cycle}", tuple(names))
        if len(names) == MAX_BASE_CHAIN_DEPTH:
            return ResolutionFailure(
                "TooDeep",
                f"baseRef chain is deeper than {MAX_BASE_CHAIN_DEPTH} configs: {' -> '.join(names)} -> ...",
                tuple(names),
            )
        config = get_config(current)
        if config is None:
            if not names:  # the config a cluster names does not exist
                return ResolutionFailure("ConfigNotFound", f"ValkeyConfig {current} not found", ())
            message = f"ValkeyConfig {current} (baseRef of {names[-1]}) not found"
            return ResolutionFailure("BaseNotFound", message, tuple(names))
        names.append(current)
        chain.append(config)
        current = config.get("spec", {}).get("baseRef") or None
    return _merge(tuple(names), chain, get_image)


def _merge(names: tuple[str, ...], chain: list[Obj], get_image: Lookup) -> ResolvedConfig | ResolutionFailure:
    specs = [config.get("spec", {}) for config in chain]
    image_ref = next((spec["imageRef"] for spec in specs if spec.get("imageRef")), None)
    if image_ref is None:
        return ResolutionFailure("ImageNotFound", f"no config in {' -> '.join(names)} sets imageRef", names)
    image = get_image(image_ref)
    if image is None:
        return ResolutionFailure("ImageNotFound", f"ValkeyImage {image_ref} not found", names)
    resources: dict[str, str] = {}
    valkey: dict[str, str] = {}
    pod_security: dict[str, int] = dict(DEFAULT_POD_SECURITY)
    for spec in reversed(specs):  # root first, so children override
        resources.update({key: str(value) for key, value in spec.get("resources", {}).items()})
        valkey.update({key.lower(): value for key, value in spec.get("valkey", {}).items()})
        pod_security.update(spec.get("podSecurity", {}))
    image_spec = image.get("spec", {})
    resolved_image = ResolvedImage(
        image_ref, image_spec.get("repository", ""), image_spec.get("tag", ""), image_spec.get("version", "")
    )
    return ResolvedConfig(names, resolved_image, resources, valkey, pod_security)
