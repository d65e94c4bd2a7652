"""docs/metrics.md shows the sidecar's costs exactly as bench/exporter_sidecar.py recorded them, and the
record says what the sidecar renders (its flags and ACL rules)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

from controllers.cluster.render import exporter
from controllers.shared import layout
from valkey_testbed import versions

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "bench" / "results" / "exporter-sidecar.json"


def load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "bench_exporter_sidecar", ROOT / "bench" / "exporter_sidecar.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_table_is_the_bench_record() -> None:
    record = json.loads(RECORD.read_text())
    table = load_bench().markdown(record)
    assert table in (ROOT / "docs" / "metrics.md").read_text(), f"rewrite docs/metrics.md's table:\n{table}"


def test_the_record_measured_what_the_sidecar_runs() -> None:
    record = json.loads(RECORD.read_text())
    assert record["redis_exporter"] == versions.REDIS_EXPORTER
    assert layout.DEFAULT_EXPORTER_IMAGE.endswith(":" + record["redis_exporter"])
    assert tuple(record["flags"]) == exporter.FLAGS
    assert tuple(record["acl_rules"]) == exporter.EXPORTER_RULES
    for run in record["runs"]:
        assert run["redis_up"] == 1 and run["freshness"]["visible_in_next_scrape"]
        assert run["acl_denials"] == ["slowlog|get (command)"], "only the denial left out on purpose"
