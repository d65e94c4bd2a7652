"""The Grafana dashboard and the alert rules only name metrics the operator exports (docs/metrics.md).

A renamed metric leaves a dashboard panel empty and an alert silent without any
error, so every PromQL expression of both files is parsed for metric names and
checked against the documented families (histograms with their _bucket, _sum
and _count series). test_metrics_doc.py keeps the document equal to what the
operator registers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from valkey_operator.api.cluster import ClusterState

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "charts" / "valkey-operator" / "files" / "dashboard.json"
ALERTS = ROOT / "charts" / "valkey-operator" / "files" / "alerts.yaml"
DOC = ROOT / "docs" / "metrics.md"

_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_IDENTIFIER = re.compile(r"(?<![\w:$.])([a-zA-Z_:][\w:]*+)(?!\s*\()")


def exported() -> set[str]:
    """Every series name the documented families produce."""
    rows = re.findall(r"^\| `([a-z_]+)` \| (\w+) \|", DOC.read_text(), flags=re.MULTILINE)
    assert rows, f"no metric table rows found in {DOC}"
    names = set()
    for name, kind in rows:
        names.add(name)
        if kind == "histogram":
            names.update(f"{name}{suffix}" for suffix in ("_bucket", "_sum", "_count"))
    return names


def metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression: identifiers outside label matchers, ranges, groupings,
    strings and function calls, minus operators and keywords."""
    text = _STRING.sub('""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = _GROUPING.sub("", text)
    text = re.sub(r"\b(?:\d+(?:ms|[smhdwy]))+\b", " ", text)  # durations: offset 30m
    text = re.sub(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?", " ", text)  # numbers, including 1e8
    return {name for name in _IDENTIFIER.findall(text) if name.lower() not in _KEYWORDS}


def panel_exprs(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, expr) of every target, including panels nested in collapsed rows."""
    found = []
    stack = list(dashboard["panels"])
    while stack:
        panel = stack.pop()
        stack.extend(panel.get("panels", []))
        found.extend((panel["title"], target["expr"]) for target in panel.get("targets", []))
    return found


def variable_exprs(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """The series selectors inside the template variables' label_values(...) queries."""
    found = []
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
        match = re.fullmatch(r"label_values\((.+),\s*\w+\)", query)
        assert match, f"variable {variable['name']}: unexpected query {query!r}"
        found.append((f"variable {variable['name']}", match.group(1)))
    return found


def alert_exprs() -> list[tuple[str, str]]:
    rules = yaml.safe_load(ALERTS.read_text())
    return [(rule["alert"], rule["expr"]) for group in rules["groups"] for rule in group["rules"]]


def unknown_names(exprs: list[tuple[str, str]]) -> list[str]:
    known = exported()
    problems = []
    for where, expr in exprs:
        names = metric_names(expr)
        if not names:
            problems.append(f"{where}: no metric name found in {expr!r}")
        problems.extend(f"{where}: {name} is not exported" for name in sorted(names - known))
    return problems


def test_the_extractor_finds_metric_names_and_nothing_else() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (controller, le) (rate(a_bucket{x=~"$ns", y!="b c"}[5m]))) '
        '/ ignoring(le) b_total offset 1h > bool 1e8 unless on (pod) c == 7 * 86400 or absent(d{e="f"})'
    )
    assert metric_names(expr) == {"a_bucket", "b_total", "c", "d"}
    assert unknown_names([("made up", "rate(valkey_node_made_up_total[5m])")]) == [
        "made up: valkey_node_made_up_total is not exported"
    ]


def test_every_dashboard_expression_names_exported_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = panel_exprs(dashboard)
    assert len(exprs) >= 15
    assert unknown_names(exprs + variable_exprs(dashboard)) == []


def test_dashboard_panels_use_the_datasource_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    stack = list(dashboard["panels"])
    while stack:
        panel = stack.pop()
        stack.extend(panel.get("panels", []))
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"


def test_the_cluster_state_timeline_names_every_state_by_the_code_its_query_gives_it() -> None:
    """The timeline's query turns each state into a number; its value mappings turn the number back
    into the state's name. A state added to ValkeyClusters, or a code mapped to the wrong name,
    would show as a bare number or a wrong state."""
    dashboard = json.loads(DASHBOARD.read_text())
    (panel,) = [p for p in dashboard["panels"] if p["title"] == "Cluster state"]
    (target,) = panel["targets"]
    coded = dict(re.findall(r'state="(\w+)"\} \* (\d+)', target["expr"]))
    assert set(coded) == {state.value for state in ClusterState}
    assert len(set(coded.values())) == len(coded), coded
    (mapping,) = panel["fieldConfig"]["defaults"]["mappings"]
    named = {code: option["text"] for code, option in mapping["options"].items()}
    assert named == {code: state for state, code in coded.items()}


def test_every_alert_expression_names_exported_metrics() -> None:
    exprs = alert_exprs()
    assert len(exprs) >= 10
    assert unknown_names(exprs) == []


def test_every_alert_has_a_severity_a_summary_and_a_description() -> None:
    rules = yaml.safe_load(ALERTS.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            assert rule["labels"]["severity"] in {"critical", "warning", "info"}, rule["alert"]
            assert {"summary", "description"} <= set(rule["annotations"]), rule["alert"]
