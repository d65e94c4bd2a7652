"""What kstatus (sigs.k8s.io/cli-utils/pkg/kstatus) says about our objects: the real library.

Flux, kpt and other GitOps tools read a custom resource's health through kstatus: an
unobserved generation or `Reconciling=True` is InProgress, `Stalled=True` is Failed, then a
`Ready` condition decides (True: Current, False: InProgress), and no condition at all is
Current. Rather than restate those rules, the tests ask the library: main.go, built once
from its Go module (go.mod.tmpl pins the version) into the test bed's cache by
`python -m valkey_testbed build`.
"""

from __future__ import annotations

import hashlib
import json
import string
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from valkey_testbed import versions

CLI_UTILS = versions.CLI_UTILS

SOURCE = Path(__file__).resolve().parent

Progress = Callable[[str], None]


@attrs.frozen
class Verdict:
    """kstatus's answer for one object."""

    status: str
    """Current, InProgress, Failed, Terminating or Unknown."""
    message: str


def _cache_dir() -> Path:
    from valkey_testbed.build import cache_root

    return cache_root() / "kstatus" / CLI_UTILS


def checker_path() -> Path:
    """Where the built checker is (built or not)."""
    return _cache_dir() / "kstatus"


def _stamp() -> str:
    go_mod = string.Template((SOURCE / "go.mod.tmpl").read_text()).substitute(cli_utils=CLI_UTILS)
    digest = hashlib.sha256((SOURCE / "main.go").read_bytes() + go_mod.encode()).hexdigest()[:16]
    go_version = subprocess.run(
        ["go", "env", "GOVERSION"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return f"cli-utils {CLI_UTILS} source {digest} built by {go_version}\n"


def build_checker(progress: Progress = print) -> Path:
    """Build the checker when missing or stale (idempotent; the caller holds the build lock)."""
    from valkey_testbed.build import build_go_tool

    files = {
        "go.mod": string.Template((SOURCE / "go.mod.tmpl").read_text()).substitute(cli_utils=CLI_UTILS),
        "main.go": (SOURCE / "main.go").read_text(),
    }
    label = f"kstatus (cli-utils {CLI_UTILS})"
    return build_go_tool(checker_path(), _stamp(), label, files, ".", "-s -w", progress)


def compute(objects: Sequence[dict[str, Any]]) -> list[Verdict]:
    """kstatus.Compute for each object (as the API server returned it), in order."""
    binary = checker_path()
    if not binary.exists():
        raise FileNotFoundError(f"{binary}: run `python -m valkey_testbed build` first")
    result = subprocess.run(
        [str(binary)],
        input="\n".join(json.dumps(obj) for obj in objects),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return [Verdict(**json.loads(line)) for line in result.stdout.splitlines()]


def status_of(obj: dict[str, Any]) -> Verdict:
    """kstatus.Compute for one object."""
    return compute([obj])[0]
