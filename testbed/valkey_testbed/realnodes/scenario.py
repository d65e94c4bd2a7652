"""`python -m valkey_testbed realnodes`: the users' scenario on real nodes and on the process kubelet.

Runs tests/e2e/test_real_nodes.py (real kubelets on containerd) and
tests/e2e/test_process_nodes_scenario.py (the test bed's process kubelet) through pytest, one
module at a time as the suite does, reads the table of steps each prints ("scenario on <kind>:")
and prints them side by side: each step's seconds on both, and what real nodes saw. Needs a
checkout (the scenario is tests/e2e/scenario_support.py), root, and the real nodes' build
(`python -m valkey_testbed build --nodes-runtime containerd`).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
MODULES = ("tests/e2e/test_real_nodes.py", "tests/e2e/test_process_nodes_scenario.py")
REAL, PROCESS = "real nodes", "process kubelet"
_TITLE = re.compile(r"^scenario on (.+):$")
_ROW = re.compile(r"^  (\S.*?)\s{2,}(\d+\.\d)s(?:  (.*))?$")

Table = dict[str, tuple[float, str]]
"""step -> (seconds, outcome), in the order the scenario ran them."""


def parse_tables(output: str) -> dict[str, Table]:
    """Every "scenario on <kind>:" table in pytest's output, by kind."""
    tables: dict[str, Table] = {}
    current: Table | None = None
    for line in output.splitlines():
        title = _TITLE.match(line)
        if title:
            current = tables.setdefault(title.group(1), {})
            continue
        row = _ROW.match(line) if current is not None else None
        if row is None:
            current = None
            continue
        assert current is not None
        current[row.group(1)] = (float(row.group(2)), row.group(3) or "")
    return tables


def side_by_side(tables: dict[str, Table]) -> str:
    """Real nodes' steps in their order (then any only the process kubelet ran), both columns."""
    real, process = tables.get(REAL, {}), tables.get(PROCESS, {})
    steps = [*real, *(step for step in process if step not in real)]
    width = max((len(step) for step in steps), default=4)

    def seconds(table: Table, step: str) -> str:
        return f"{table[step][0]:7.1f}s" if step in table else "       -"

    rows = [f"{'step':<{width}}  {'real':>8}  {'process':>8}  on real nodes"]
    rows += [
        f"{step:<{width}}  {seconds(real, step)}  {seconds(process, step)}  {real.get(step, (0.0, ''))[1]}"
        for step in steps
    ]
    return "\n".join(rows)


def main(repo: Path = REPO) -> int:
    """pytest on both modules (its output as it goes, to stdout), then the side-by-side table; pytest's
    exit status."""
    argv = [sys.executable, "-m", "pytest", "-n", "1", "-rP", "-p", "no:cacheprovider", *MODULES]
    done = subprocess.run(
        argv, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False
    )
    print(done.stdout)
    tables = parse_tables(done.stdout)
    print(side_by_side(tables) if tables else "no scenario table in pytest's output (see above)")
    return done.returncode
