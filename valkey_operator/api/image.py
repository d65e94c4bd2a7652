"""ValkeyImage: one allowlisted Valkey image and the version it promises (SPEC 1.1)."""

from __future__ import annotations

import re
from typing import ClassVar, Self

import attrs

from valkey_operator.api.meta import ObjectMeta, kind_fields, omitempty, render_kind
from valkey_operator.api.resources import VALKEY_IMAGES, VERSION_FLOOR
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import Obj

_VERSION = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")

Version = tuple[int, int, int]


def parse_version(text: str) -> Version | None:
    """MAJOR.MINOR.PATCH exactly as admission accepts it (no prefix, suffix or leading zeros), else None.

    Also used on a running binary's `valkey_version`, where the same strictness applies.
    """
    match = _VERSION.fullmatch(text)
    if match is None:
        return None
    major, minor, patch = (int(group) for group in match.groups())
    return major, minor, patch


def meets_floor(version: Version | None) -> bool:
    """Whether a version is runnable by the operator; unknown (None) never is."""
    return version is not None and version >= VERSION_FLOOR


@attrs.frozen(kw_only=True)
class ValkeyImageSpec:
    repository: str
    tag: str
    version: str
    digest: str | None = None
    """`sha256:<64 hex>`: when set, pods run `repository@digest` and the tag is informational."""

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(
            repository=obj["repository"], tag=obj["tag"], version=obj["version"], digest=obj.get("digest")
        )

    def to_dict(self) -> Obj:
        return omitempty(repository=self.repository, tag=self.tag, version=self.version, digest=self.digest)


def image_reference(repository: str, tag: str, digest: str | None) -> str:
    """The reference pods run: pinned by digest when one is declared, else by tag."""
    return f"{repository}@{digest}" if digest else f"{repository}:{tag}"


@attrs.frozen
class ValkeyImageStatus:
    """Intentionally empty: the kind has a status subresource but nothing to report yet."""

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls()

    def to_dict(self) -> Obj:
        return {}


@attrs.frozen(kw_only=True)
class ValkeyImage:
    RESOURCE: ClassVar[Resource] = VALKEY_IMAGES

    metadata: ObjectMeta
    spec: ValkeyImageSpec
    status: ValkeyImageStatus | None = None

    @property
    def reference(self) -> str:
        """The container image reference pods run."""
        return image_reference(self.spec.repository, self.spec.tag, self.spec.digest)

    @property
    def parsed_version(self) -> Version | None:
        return parse_version(self.spec.version)

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(**kind_fields(obj, ValkeyImageSpec.from_dict, ValkeyImageStatus.from_dict))

    def to_dict(self) -> Obj:
        return render_kind(self.RESOURCE.kind, self.metadata, self.spec, self.status)
