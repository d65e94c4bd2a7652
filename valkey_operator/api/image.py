"""ValkeyImage: one allowlisted Valkey image and the version it promises (SPEC 1.1)."""

from __future__ import annotations

import re
from typing import ClassVar

import attrs

from valkey_operator.api.convert import Model
from valkey_operator.api.fields import described, lit, raw, rule, schema
from valkey_operator.api.limits import IMAGE_DIGEST, RELEASE_VERSION
from valkey_operator.api.meta import ObjectMeta
from valkey_operator.api.resources import VALKEY_IMAGES, VERSION_FLOOR, VERSION_FLOOR_TEXT
from valkey_operator.core.resource import Resource

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


_FLOOR = VERSION_FLOOR_TEXT
_VERSION_RULE = rule(
    f"self.matches({raw(RELEASE_VERSION)}) && semver(self).compareTo(semver({lit(_FLOOR)})) >= 0",
    f"must be a full MAJOR.MINOR.PATCH Valkey release of at least {_FLOOR}, for example {_FLOOR} "
    "(no 'v' prefix, no leading zeros, no pre-release or build suffix)",
    message_expression=lit("must be a full MAJOR.MINOR.PATCH Valkey release of at least " + _FLOOR + ", got ")
    + " + self + "
    + lit(
        f" (the operator runs Valkey {_FLOOR} or newer; write the version as, for example, {_FLOOR}: "
        "no 'v' prefix, no leading zeros, no pre-release or build suffix)"
    ),
)


_DIGEST_MESSAGE = "a digest is sha256: followed by exactly 64 lowercase hex characters"


def image_reference(repository: str, tag: str, digest: str | None) -> str:
    """The reference pods run: pinned by digest when one is declared, else by tag."""
    return f"{repository}@{digest}" if digest else f"{repository}:{tag}"


@described("ValkeyImageSpec names a container image and the Valkey version it provides.")
@attrs.frozen(kw_only=True)
class ValkeyImageSpec(Model):
    repository: str = attrs.field(
        metadata=schema(
            "Container image repository, for example valkey/valkey.", min_length=1, max_length=512
        )
    )
    tag: str = attrs.field(
        metadata=schema("Container image tag, for example 9.0.1.", min_length=1, max_length=128)
    )
    version: str = attrs.field(
        metadata=schema(
            "The Valkey version the image provides, for example 9.0.1: full MAJOR.MINOR.PATCH, "
            f"at least {_FLOOR}. Older declared versions are rejected at admission. It is a promise, "
            "not proof: the operator also checks the running binary before a node joins a cluster.",
            max_length=32,
            rules=[_VERSION_RULE],
        )
    )
    digest: str | None = attrs.field(
        default=None,
        metadata=schema(
            "Optional content digest of the image, sha256:<64 lowercase hex>. When set, pods run "
            "repository@digest (the tag is then informational), so a moved tag never changes what "
            "runs. A change of digest rolls the clusters that use the image.",
            max_length=71,
            rules=[
                rule(
                    f"self.matches({raw(IMAGE_DIGEST)})",
                    _DIGEST_MESSAGE,
                    message_expression=lit(_DIGEST_MESSAGE + "; got ") + " + self",
                )
            ],
        ),
    )


@described("ValkeyImage has a status subresource, but it defines no fields today.")
@attrs.frozen
class ValkeyImageStatus(Model):
    """Intentionally empty: the kind has a status subresource but nothing to report yet."""


@described(
    "ValkeyImage registers a Valkey container image the operator is allowed to run. It is the "
    "allowlist: if no ValkeyImage exists for an image, no ValkeyCluster can use it. Referenced by "
    "ValkeyConfig.spec.imageRef; protected from deletion while referenced."
)
@attrs.frozen(kw_only=True)
class ValkeyImage(Model):
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
