"""A real exec credential plugin for tests: a tiny script that prints the ExecCredentials it is told
to, one per run, and records each run's KUBERNETES_EXEC_INFO, arguments and environment."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import attrs

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"

SCRIPT = """#!{python}
import json, os, pathlib, sys

here = pathlib.Path(__file__).parent
runs = here / "{name}.runs"
done = len(runs.read_text().splitlines()) if runs.exists() else 0
record = {{"exec_info": os.environ.get("KUBERNETES_EXEC_INFO"), "args": sys.argv[1:],
           "greeting": os.environ.get("GREETING"), "path": os.environ.get("PATH")}}
with runs.open("a") as log:
    log.write(json.dumps(record) + "\\n")
answers = json.loads((here / "{name}.json").read_text())
answer = answers[min(done, len(answers) - 1)]
if answer is None:
    sys.exit(3)
print(json.dumps(answer))
"""


def exec_credential(token: str, expires: str | None = None, api_version: str = V1) -> dict[str, Any]:
    status: dict[str, Any] = {"token": token}
    if expires:
        status["expirationTimestamp"] = expires
    return {"apiVersion": api_version, "kind": "ExecCredential", "status": status}


@attrs.frozen
class ExecPluginScript:
    """The script at `path`; run n prints answers[n] (the last one again after that; None exits 3)."""

    path: Path

    @classmethod
    def write(
        cls, directory: Path, answers: list[dict[str, Any] | None], name: str = "plugin"
    ) -> ExecPluginScript:
        script = cls(directory / name)
        script.path.write_text(SCRIPT.format(python=sys.executable, name=name))
        script.path.chmod(0o755)
        script.answer(answers)
        return script

    def answer(self, answers: list[dict[str, Any] | None]) -> None:
        self.path.with_suffix(".json").write_text(json.dumps(answers))

    def runs(self) -> list[dict[str, Any]]:
        log = self.path.with_suffix(".runs")
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
