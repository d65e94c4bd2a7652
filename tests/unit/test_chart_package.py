"""The chart as a self-contained package, without helm: its CRD copies are the generated CRDs, every
value is described by the schema and listed in the chart's README (generated from the schema and
values.yaml), and the Artifact Hub metadata names what the chart really ships."""

from __future__ import annotations

import configparser
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from valkey_operator.api import crdgen

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "valkey-operator"
README = CHART / "README.md"
BEGIN = "<!-- values table: generated, see tests/unit/test_chart_package.py -->"
END = "<!-- end of values table -->"
UPDATE_ENV = "UPDATE_CHART_README"


def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text())
    return loaded


def values() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    return loaded


def keys(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every value key (dotted) with its schema, parents before children; list items are not keys."""
    for name, child in node.get("properties", {}).items():
        dotted = f"{path}.{name}" if path else name
        yield dotted, child
        yield from keys(child, dotted)


def default(path: str) -> str:
    node: Any = values()
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return "unset"
        node = node[part]
    return "unset" if node is None else f"`{json.dumps(node, separators=(',', ':'))}`"


def values_table() -> str:
    """One row per leaf key of the schema: key, default from values.yaml, the schema's description."""
    rows = ["| Key | Default | Description |", "|---|---|---|"]
    for path, node in keys(schema()):
        if "properties" in node:
            continue
        description = " ".join(node["description"].split())
        description = description.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
        rows.append(f"| `{path}` | {default(path)} | {description} |")
    return "\n".join(rows)


def test_chart_crds_are_regular_files_equal_to_the_generated_ones() -> None:
    """A link out of the chart is not packaged: `helm package` output would render no CRD."""
    chart_crds = CHART / "files" / "crds"
    assert chart_crds.is_dir() and not chart_crds.is_symlink()
    generated = crdgen.all_crds()
    assert sorted(path.name for path in chart_crds.glob("*.yaml")) == sorted(generated)
    for name, document in generated.items():
        copy, source = chart_crds / name, ROOT / "crds" / name
        assert not copy.is_symlink(), copy
        assert copy.read_bytes() == source.read_bytes() == crdgen.render(document).encode(), (
            f"{copy} differs from crds/{name}: run `python -m valkey_operator.api.crdgen`"
        )


def test_crdgen_writes_and_checks_both_places(tmp_path: Path) -> None:
    repo, chart = tmp_path / "crds", tmp_path / "chart"
    repo.mkdir()
    chart.mkdir()
    (chart / "valkeyimages.yaml").symlink_to(repo / "valkeyimages.yaml")
    assert crdgen.main(["--out", str(repo), "--out", str(chart)]) == 0
    for name, document in crdgen.all_crds().items():
        assert (repo / name).read_text() == (chart / name).read_text() == crdgen.render(document)
        assert not (chart / name).is_symlink()
    assert crdgen.main(["--check", "--out", str(repo), "--out", str(chart)]) == 0
    (chart / "valkeyroles.yaml").write_text("stale\n")
    assert crdgen.main(["--check", "--out", str(repo), "--out", str(chart)]) == 1
    assert crdgen.OUTPUT_DIRS == (ROOT / "crds", CHART / "files" / "crds")


def test_every_value_key_is_described_and_global_is_allowed() -> None:
    described = dict(keys(schema()))
    assert "global" in described and described["global"]["type"] == "object"
    undescribed = [path for path, node in described.items() if not node.get("description", "").strip()]
    assert undescribed == []

    def value_keys(node: Any, path: str = "") -> Iterator[str]:
        for name, child in node.items():
            dotted = f"{path}.{name}" if path else name
            yield dotted
            if isinstance(child, dict) and "properties" in described[dotted]:
                yield from value_keys(child, dotted)

    assert set(value_keys(values())) <= set(described)


def test_the_readme_values_table_is_generated_from_the_schema() -> None:
    text = README.read_text()
    head, rest = text.split(BEGIN + "\n")
    _, tail = rest.split(END)
    current = f"{head}{BEGIN}\n{values_table()}\n{END}{tail}"
    if os.environ.get(UPDATE_ENV):
        README.write_text(current)
    assert text == current, f"{README} is stale ({UPDATE_ENV}=1 rewrites its values table)"
    for path, node in keys(schema()):
        assert "properties" in node or f"| `{path}` |" in text, path


def test_artifact_hub_metadata_names_what_the_chart_ships() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    annotations = chart["annotations"]
    crds = [yaml.safe_load(path.read_text()) for path in sorted((CHART / "files" / "crds").glob("*.yaml"))]
    listed = yaml.safe_load(annotations["artifacthub.io/crds"])
    assert [(c["kind"], c["version"], c["name"]) for c in listed] == [
        (crd["spec"]["names"]["kind"], crd["spec"]["versions"][0]["name"], crd["metadata"]["name"])
        for crd in crds
    ]
    assert all(entry["displayName"] and entry["description"] for entry in listed)
    image = values()["image"]
    assert yaml.safe_load(annotations["artifacthub.io/images"]) == [
        {"name": "valkey-operator", "image": f"{image['repository']}:{chart['appVersion']}"}
    ]
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    assert annotations["artifacthub.io/license"] == setup["metadata"]["license"]
    assert chart["appVersion"] == setup["metadata"]["version"]
    assert chart["maintainers"] and (CHART / "icon.svg").is_file()
    # No invented addresses: home, sources and icon wait for the project's public repository.
    assert not {"home", "sources", "icon"} & set(chart)
