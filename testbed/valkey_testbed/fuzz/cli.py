"""`python -m valkey_testbed fuzz`: a fuzz run on a test bed, its counts printed.

With --state-dir the control plane there is used (started if it is not running, and left running,
as `up` does); without it a fresh one runs in a temporary directory for this run only.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from valkey_testbed.build import build
from valkey_testbed.controlplane import ControlPlane
from valkey_testbed.fuzz.runner import FuzzSettings, run_fuzz


def main(seed: int, examples: int, rounds: int, state_dir: Path | None) -> int:
    """0 when every invariant held, 1 otherwise; the report goes to stdout."""
    build(progress=lambda _line: None)
    temporary = state_dir is None
    root = (
        Path(tempfile.mkdtemp(prefix="valkey-operator-fuzz-")) if state_dir is None else state_dir.resolve()
    )
    plane = ControlPlane(root, nodes=3)
    plane.up()
    try:
        report = run_fuzz(
            plane.kubeconfig,
            FuzzSettings(seed=seed, examples=examples, rounds=rounds),
            root / "fuzz",
            progress=lambda line: print(line, file=sys.stderr, flush=True),
        )
    finally:
        if temporary:
            plane.down()
            shutil.rmtree(root, ignore_errors=True)
    print(report.summary())
    return 1 if report.violations else 0
