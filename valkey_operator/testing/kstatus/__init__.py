"""What kstatus (sigs.k8s.io/cli-utils/pkg/kstatus) says about our objects: the real library.

Flux, kpt and other GitOps tools read a custom resource's health through kstatus: an
unobserved generation or `Reconciling=True` is InProgress, `Stalled=True` is Failed, then a
`Ready` condition decides (True: Current, False: InProgress), and no condition at all is
Current. Rather than restate those rules, the tests ask the library: main.go, built once
from its Go module (go.mod.tmpl pins the version) into the test bed's cache by
`python -m valkey_operator.testing build`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import string
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from valkey_operator.testing import versions

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
    from valkey_operator.testing.build import cache_root

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
    from valkey_operator.testing.build import BuildError, go_env

    binary = checker_path()
    stamp_file = binary.parent / ".stamp"
    stamp = _stamp()
    if binary.exists() and stamp_file.exists() and stamp_file.read_text() == stamp:
        progress(f"kstatus (cli-utils {CLI_UTILS}): cached at {binary}")
        return binary
    progress(f"kstatus (cli-utils {CLI_UTILS}): building {binary}...")
    work, go_cache = binary.parent / "src", binary.parent / "go-build"
    for path in (work, go_cache):
        shutil.rmtree(path, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "go.mod").write_text(
        string.Template((SOURCE / "go.mod.tmpl").read_text()).substitute(cli_utils=CLI_UTILS)
    )
    shutil.copyfile(SOURCE / "main.go", work / "main.go")
    partial = binary.with_suffix(".partial")
    for args in (["mod", "tidy"], ["build", "-trimpath", "-ldflags", "-s -w", "-o", str(partial), "."]):
        progress("  $ go " + " ".join(args))
        result = subprocess.run(
            ["go", *args], cwd=work, env=go_env(work, go_cache), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=3600,
        )  # fmt: skip
        if result.returncode != 0:
            raise BuildError(
                f"go {' '.join(args)} failed in {work} (exit {result.returncode}):\n{result.stdout}"
            )
    partial.replace(binary)
    stamp_file.write_text(stamp)
    shutil.rmtree(go_cache, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    return binary


def compute(objects: Sequence[dict[str, Any]]) -> list[Verdict]:
    """kstatus.Compute for each object (as the API server returned it), in order."""
    binary = checker_path()
    if not binary.exists():
        raise FileNotFoundError(f"{binary}: run `python -m valkey_operator.testing build` first")
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
