"""Which Kubernetes release the test bed builds and runs.

The default is `versions.KUBERNETES`; another minor of `versions.KUBERNETES_MINORS` is chosen with
the environment variable VALKEY_OPERATOR_KUBERNETES (or the command line's `--kubernetes`), as a
minor (`1.36`) or a full version (`v1.36.3`). The variable reaches everything that asks
`selected()`: the build, the control plane, the pytest plugin and its xdist workers, so the same
tests run against another API server.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import attrs

from valkey_testbed import versions

ENV = "VALKEY_OPERATOR_KUBERNETES"

_VERSION = re.compile(r"^v?(1)\.(\d+)(?:\.(\d+))?$")


class UnknownKubernetesVersion(ValueError):
    """The requested version names no minor the test bed knows; the message lists those it does."""


@attrs.frozen
class KubeRelease:
    """A Kubernetes release (`v1.36.3`) and the etcd release it runs with."""

    kubernetes: str
    etcd: str

    @property
    def major(self) -> int:
        return int(self.kubernetes.lstrip("v").split(".")[0])

    @property
    def minor_number(self) -> int:
        return int(self.kubernetes.lstrip("v").split(".")[1])

    @property
    def minor(self) -> str:
        """`1.36`: the key of versions.KUBERNETES_MINORS."""
        return f"{self.major}.{self.minor_number}"

    @property
    def staging(self) -> str:
        """The published version of its staging modules (k8s.io/api, ...): v1.36.3 -> v0.36.3."""
        return "v0." + self.kubernetes.split(".", 1)[1]

    @property
    def is_default(self) -> bool:
        return self == default_release()


def default_release() -> KubeRelease:
    return KubeRelease(versions.KUBERNETES, versions.ETCD)


def releases() -> list[KubeRelease]:
    """Every tested minor's pinned release, oldest first."""
    return [parse(minor) for minor in sorted(versions.KUBERNETES_MINORS, key=_minor_key)]


def _minor_key(minor: str) -> tuple[int, int]:
    major, number = minor.split(".")
    return int(major), int(number)


def parse(spec: str) -> KubeRelease:
    """`1.36` or `v1.36` -> the pinned patch of that minor; `1.36.1` or `v1.36.1` -> that release,
    with the etcd pinned for its minor. Raises UnknownKubernetesVersion for a minor not pinned."""
    match = _VERSION.match(spec.strip())
    if match is None:
        raise UnknownKubernetesVersion(
            f"{spec!r} is not a Kubernetes version: write a minor (1.36) or a release (v1.36.3)"
        )
    major, number, patch = match.groups()
    minor = f"{major}.{int(number)}"
    pinned = versions.KUBERNETES_MINORS.get(minor)
    if pinned is None:
        known = ", ".join(sorted(versions.KUBERNETES_MINORS, key=_minor_key))
        raise UnknownKubernetesVersion(
            f"Kubernetes {minor} is not a minor the test bed pins (testbed/valkey_testbed/versions.py "
            f"KUBERNETES_MINORS: {known})"
        )
    kubernetes, etcd = pinned
    if patch is not None:
        kubernetes = f"v{minor}.{int(patch)}"
    return KubeRelease(kubernetes, etcd)


def selected(environ: Mapping[str, str] | None = None) -> KubeRelease:
    """The release named by VALKEY_OPERATOR_KUBERNETES, else the default."""
    spec = (os.environ if environ is None else environ).get(ENV, "").strip()
    return parse(spec) if spec else default_release()
