"""Resolve a ValkeyConfig's baseRef chain into the effective settings (pure).

The effective config is the chain merged child over parent: imageRef from the
nearest config that sets it; resources (requests and limits), valkey,
podSecurity and persistence key by key (valkey directive names
case-insensitively; persistence in persistence.py). A missing base, a cycle, a chain
deeper than MAX_BASE_CHAIN_DEPTH, a missing image, or rdb/aof without a size is a resolution failure
with a reason the status reports (SPEC 1.2).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Literal

import attrs

from controllers.shared.persistence import NONE, Persistence, merge_persistence
from valkey_operator.api.image import image_reference
from valkey_operator.api.quantity import parse_quantity
from valkey_operator.api.resources import MAX_BASE_CHAIN_DEPTH
from valkey_operator.core.rest import Obj

Lookup = Callable[[str], Obj | None]
FailureReason = Literal[
    "ConfigNotFound",
    "ImageNotFound",
    "BaseNotFound",
    "BaseCycle",
    "TooDeep",
    "LimitBelowRequest",
    "PersistenceInvalid",
]

DEFAULT_POD_SECURITY = {"runAsUser": 999, "runAsGroup": 999, "fsGroup": 999}


@attrs.frozen
class ResolvedImage:
    name: str
    repository: str
    tag: str
    version: str
    digest: str | None = None

    def to_status(self) -> Obj:
        status = {"name": self.name, "repository": self.repository, "tag": self.tag, "version": self.version}
        if self.digest:
            status["digest"] = self.digest
        return status

    @property
    def reference(self) -> str:
        return image_reference(self.repository, self.tag, self.digest)


@attrs.frozen
class ResolvedConfig:
    """The effective settings of a config, and the chain they came from (leaf first)."""

    chain: tuple[str, ...]
    image: ResolvedImage
    resources: dict[str, str]
    """The requests: cpu and memory."""
    valkey: dict[str, str]
    pod_security: dict[str, int]
    limits: dict[str, str] = attrs.field(factory=dict)
    """The limits the chain sets (resources.limits); see memory_limit for the default."""
    persistence: Persistence = NONE
    """What the nodes keep, and on what claims (SPEC 1.6); a cache unless the chain says otherwise."""

    @property
    def memory_limit(self) -> str | None:
        """limits.memory, else the memory request (SPEC 1.9); maxmemory is derived from it."""
        return self.limits.get("memory", self.resources.get("memory"))

    @property
    def settings_hash(self) -> str:
        """Changes exactly when something that shapes the pods or valkey.conf changes.

        A digest, limits and persistence enter only when set, so configs without them keep the hash
        they had.
        """
        image = [self.image.repository, self.image.tag, self.image.version]
        content: Obj = {
            "image": [*image, self.image.digest] if self.image.digest else image,
            "resources": self.resources,
            "valkey": self.valkey,
            "podSecurity": self.pod_security,
        }
        if self.limits:
            content["limits"] = self.limits
        if self.persistence.enabled:
            content["persistence"] = self.persistence.to_json()
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
    limits: dict[str, str] = {}
    valkey: dict[str, str] = {}
    pod_security: dict[str, int] = dict(DEFAULT_POD_SECURITY)
    for spec in reversed(specs):  # root first, so children override
        own = spec.get("resources") or {}
        resources.update({key: str(value) for key, value in own.items() if key != "limits"})
        limits.update({key: str(value) for key, value in (own.get("limits") or {}).items()})
        valkey.update({key.lower(): value for key, value in spec.get("valkey", {}).items()})
        pod_security.update(spec.get("podSecurity", {}))
    image_spec = image.get("spec", {})
    resolved_image = ResolvedImage(
        image_ref,
        image_spec.get("repository", ""),
        image_spec.get("tag", ""),
        image_spec.get("version", ""),
        image_spec.get("digest") or None,
    )
    below = _limits_below_requests(resources, limits)
    if below:
        return ResolutionFailure("LimitBelowRequest", f"in {' -> '.join(names)}: {below}", names)
    persistence = merge_persistence(specs)
    if isinstance(persistence, str):
        return ResolutionFailure("PersistenceInvalid", f"in {' -> '.join(names)}: {persistence}", names)
    return ResolvedConfig(names, resolved_image, resources, valkey, pod_security, limits, persistence)


def _limits_below_requests(requests: dict[str, str], limits: dict[str, str]) -> str:
    """Admission checks each config alone; merged over a base, a limit may end up below a request,
    which the API server would refuse at pod creation. Empty when every limit is at least its request."""
    problems = []
    for key in sorted(requests.keys() & limits.keys()):
        try:
            if parse_quantity(limits[key]) < parse_quantity(requests[key]):
                problems.append(f"limits.{key} {limits[key]} is below the {key} request {requests[key]}")
        except ValueError:
            continue  # admission rejects a malformed quantity; the API server would at pod creation
    return "; ".join(problems)
