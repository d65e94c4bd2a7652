"""The README's run command works as written (on a state dir of its own)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from valkey_testbed.controlplane import ControlPlane

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def test_demo_shows_the_operator_at_work(kube_control_plane: ControlPlane, tmp_path: Path) -> None:
    state = tmp_path / "demo"
    try:
        result = subprocess.run(
            [sys.executable, "-m", "valkey_testbed", "demo", "--state-dir", str(state)],
            capture_output=True,
            text=True,
            timeout=540,
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        out = result.stdout
        assert "valkeyconfig.valkey.gomomento.com/cache-large condition met" in out
        assert re.search(r"valkeyconfig\S*/cache-large\s+valkey-9-1\s+cache-base\s+True", out), out
        assert "+@read +@write -@dangerous" in out
        assert '["valkey.gomomento.com/image-protection"]' in out
        assert re.search(r"default\s+demo\s+Active\s+6/6\s+3\s+1\s+cache-base", out), out
        lines = out.splitlines()
        get = next(i for i, line in enumerate(lines) if line.endswith("GET greeting"))
        assert lines[get + 1] == "hello from valkey", lines[get - 3 : get + 2]
    finally:
        ControlPlane(state).down()
    assert not ControlPlane(state).records()
