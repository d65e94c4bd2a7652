"""The CRD files: generated and current, fully described, bounded, consistent with the code and the docs.

These tests read crds/*.yaml and docs/reference/*.md; the admission tests next
to them prove the same files on the real API server.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from valkey_operator.api import crdgen, tunables
from valkey_operator.api.resources import (
    GROUP,
    RESERVED_ANNOTATION_PREFIX,
    RESERVED_USERNAMES,
    VALKEY_BACKUPS,
    VALKEY_CLUSTERS,
    VALKEY_CONFIGS,
    VALKEY_IMAGES,
    VALKEY_ROLES,
    VERSION,
    VERSION_FLOOR_TEXT,
)

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[3]
CRDS = ROOT / "crds"
DOCS = ROOT / "docs" / "reference"
RESOURCES = {
    "valkeyimages.yaml": VALKEY_IMAGES,
    "valkeyconfigs.yaml": VALKEY_CONFIGS,
    "valkeyroles.yaml": VALKEY_ROLES,
    "valkeyclusters.yaml": VALKEY_CLUSTERS,
    "valkeybackups.yaml": VALKEY_BACKUPS,
}
PAGES = {
    "ValkeyImage": "valkeyimage.md",
    "ValkeyConfig": "valkeyconfig.md",
    "ValkeyRole": "valkeyrole.md",
    "ValkeyCluster": "valkeycluster.md",
    "ValkeyBackup": "valkeybackup.md",
}


def load(file_name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((CRDS / file_name).read_text())
    return document


def root_schema(file_name: str) -> dict[str, Any]:
    schema: dict[str, Any] = load(file_name)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def walk(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with its path: properties, list items ([]) and map values ({})."""
    yield path, schema
    for name, child in schema.get("properties", {}).items():
        yield from walk(child, f"{path}.{name}" if path else name)
    if "items" in schema:
        yield from walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from walk(schema["additionalProperties"], f"{path}{{}}")


def rules(file_name: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, node in walk(root_schema(file_name)):
        for entry in node.get("x-kubernetes-validations", ()):
            yield path, entry


def test_generated_crds_are_current() -> None:
    generated = crdgen.all_crds()
    assert set(generated) == set(RESOURCES)
    for file_name, document in generated.items():
        assert (CRDS / file_name).read_text() == crdgen.render(document), (
            f"crds/{file_name} is stale: run `python -m valkey_operator.api.crdgen`"
        )
    assert crdgen.main(["--check"]) == 0


@pytest.mark.parametrize("file_name", RESOURCES)
def test_names_scope_and_versions(file_name: str) -> None:
    resource = RESOURCES[file_name]
    crd = load(file_name)
    assert crd["metadata"]["name"] == f"{resource.plural}.{GROUP}"
    spec = crd["spec"]
    assert spec["group"] == GROUP
    assert spec["names"]["kind"] == resource.kind
    assert spec["names"]["plural"] == resource.plural
    assert spec["scope"] == ("Namespaced" if resource.namespaced else "Cluster")
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == (VERSION, True, True)
    assert version["subresources"] == {"status": {}}
    assert root_schema(file_name)["required"] == ["spec"]


def test_printer_columns_follow_the_spec() -> None:
    def columns(file_name: str) -> list[tuple[str, str]]:
        version = load(file_name)["spec"]["versions"][0]
        return [(column["name"], column["jsonPath"]) for column in version["additionalPrinterColumns"]]

    age = ("Age", ".metadata.creationTimestamp")
    assert columns("valkeyimages.yaml") == [
        ("Repository", ".spec.repository"),
        ("Tag", ".spec.tag"),
        ("Version", ".spec.version"),
        age,
    ]
    assert columns("valkeyconfigs.yaml") == [
        ("Image", ".status.resolvedImage.name"),
        ("Base", ".spec.baseRef"),
        ("Resolved", '.status.conditions[?(@.type=="Resolved")].status'),
        age,
    ]
    assert columns("valkeyroles.yaml") == [("Categories", ".status.summary"), age]
    assert columns("valkeyclusters.yaml") == [
        ("State", ".status.state"),
        ("Ready", ".status.ready"),
        ("Shards", ".spec.shards"),
        ("Replicas", ".spec.replicasPerShard"),
        ("Config", ".spec.configRef"),
        age,
        ("Endpoint", ".status.endpoint"),
        ("Image", ".status.currentImage"),
        ("Message", ".status.message"),
    ]
    assert columns("valkeybackups.yaml") == [
        ("Cluster", ".spec.clusterName"),
        ("Phase", ".status.phase"),
        ("Size", ".status.size"),
        age,
    ]
    wide = load("valkeyclusters.yaml")["spec"]["versions"][0]["additionalPrinterColumns"][-3:]
    assert [column.get("priority") for column in wide] == [1, 1, 1]


@pytest.mark.parametrize("file_name", RESOURCES)
def test_every_field_has_a_description(file_name: str) -> None:
    for path, node in walk(root_schema(file_name)):
        if path == "metadata" or path.startswith("metadata."):
            continue  # the API server forbids anything but name/generateName constraints there
        description = node.get("description", "")
        assert len(description) >= 10, f"{file_name}: {path or '<root>'} has no description"


@pytest.mark.parametrize("file_name", RESOURCES)
def test_every_string_list_and_map_is_bounded(file_name: str) -> None:
    for path, node in walk(root_schema(file_name)):
        if node.get("type") == "string" or node.get("x-kubernetes-int-or-string"):
            assert "maxLength" in node or "enum" in node, f"{file_name}: {path} has no maxLength"
        if node.get("type") == "array":
            assert "maxItems" in node, f"{file_name}: {path} has no maxItems"
            assert node.get("x-kubernetes-list-type") in {"atomic", "set", "map"}, path
        if node.get("type") == "object" and "additionalProperties" in node:
            assert "maxProperties" in node, f"{file_name}: {path} has no maxProperties"


@pytest.mark.parametrize("file_name", RESOURCES)
def test_every_rule_has_a_message(file_name: str) -> None:
    for path, entry in rules(file_name):
        assert len(entry["message"]) >= 20, (path, entry)


def test_allowlist_in_the_crd_is_exactly_tunables() -> None:
    (rule,) = [
        entry
        for path, entry in rules("valkeyconfigs.yaml")
        if path == "spec.valkey" and "in [" in entry["rule"]
    ]
    listed = re.search(r"in \[(.*?)\]", rule["rule"])
    assert listed is not None
    names = re.findall(r'"([^"]+)"', listed.group(1))
    assert len(names) == len(set(names))
    assert set(names) == set(tunables.TUNABLES)
    assert all(name == name.lower() for name in names)  # compared with lowerAscii()
    assert "k.lowerAscii() in" in rule["rule"]


def test_rules_use_the_operator_constants() -> None:
    (version_rule,) = [entry for path, entry in rules("valkeyimages.yaml") if path == "spec.version"]
    assert f'semver("{VERSION_FLOOR_TEXT}")' in version_rule["rule"]
    assert f"at least {VERSION_FLOOR_TEXT}" in version_rule["message"]
    assert f"at least {VERSION_FLOOR_TEXT}" in version_rule["messageExpression"]
    reserved = [entry for path, entry in rules("valkeyclusters.yaml") if path == "spec.acl[].username"]
    expected = "[" + ", ".join(f'"{name}"' for name in RESERVED_USERNAMES) + "]"
    assert any(expected in entry["rule"] for entry in reserved), reserved
    prefix_rules = [entry for path, entry in rules("valkeyclusters.yaml") if path == "spec.podAnnotations"]
    assert any(f'startsWith("{RESERVED_ANNOTATION_PREFIX}")' in entry["rule"] for entry in prefix_rules)


def test_tls_transition_rule_is_on_spec() -> None:
    """A rule on spec.tls itself would never run when tls is added or removed; it must sit on spec."""
    spec_rules = [entry for path, entry in rules("valkeyclusters.yaml") if path == "spec"]
    (tls_rule,) = [entry for entry in spec_rules if "oldSelf.tls" in entry["rule"]]
    assert tls_rule["rule"] == "has(self.tls) == has(oldSelf.tls)"
    assert tls_rule["fieldPath"] == ".tls"
    assert tls_rule["reason"] == "FieldValueForbidden"
    assert not list(rules_under("valkeyclusters.yaml", "spec.tls", "oldSelf"))


def test_fixed_at_creation_rules_are_on_spec() -> None:
    """restore (on the cluster's spec, like tls) and a backup's whole spec: a rule on the field itself
    would never run when it is added or removed."""
    spec_rules = [entry for path, entry in rules("valkeyclusters.yaml") if path == "spec"]
    restore_rules = [entry for entry in spec_rules if "oldSelf.restore" in entry["rule"]]
    assert [entry["rule"] for entry in restore_rules] == [
        "has(self.restore) == has(oldSelf.restore)",
        "!has(self.restore) || !has(oldSelf.restore) || self.restore == oldSelf.restore",
    ]
    assert [entry["fieldPath"] for entry in restore_rules] == [".restore", ".restore"]
    assert not list(rules_under("valkeyclusters.yaml", "spec.restore", "oldSelf"))
    backup_spec = [entry["rule"] for path, entry in rules("valkeybackups.yaml") if path == "spec"]
    assert backup_spec == ["self == oldSelf"]
    assert [path for path, entry in rules("valkeybackups.yaml") if "oldSelf" in entry["rule"]] == ["spec"]


def test_both_destinations_are_one_type() -> None:
    """A ValkeyBackup's destination and a schedule's are the same schema, so a schedule's backups
    are ValkeyBackups like any other."""
    backup = root_schema("valkeybackups.yaml")["properties"]["spec"]["properties"]["destination"]
    schedule = root_schema("valkeyclusters.yaml")["properties"]["spec"]["properties"]["backup"]
    scheduled = schedule["properties"]["destination"]
    assert {**backup, "description": ""} == {**scheduled, "description": ""}


def rules_under(file_name: str, prefix: str, fragment: str) -> Iterator[str]:
    for path, entry in rules(file_name):
        if path.startswith(prefix) and fragment in entry["rule"]:
            yield path


# Functions (and macros) CEL rules may call, with the Kubernetes minor that introduced them.
CEL_FUNCTION_INTRODUCED = {
    # CEL standard definitions and macros
    "has": (1, 25),
    "size": (1, 25),
    "all": (1, 25),
    "exists": (1, 25),
    "exists_one": (1, 25),
    "filter": (1, 25),
    "map": (1, 25),
    "matches": (1, 25),
    "startsWith": (1, 25),
    "endsWith": (1, 25),
    "contains": (1, 25),
    "type": (1, 25),
    "string": (1, 25),
    "int": (1, 25),
    # CEL strings extension
    "lowerAscii": (1, 25),
    "join": (1, 25),
    # Kubernetes quantity library
    "isQuantity": (1, 28),
    "quantity": (1, 28),
    "isGreaterThan": (1, 28),
    "isLessThan": (1, 28),
    # Kubernetes CIDR library
    "isCIDR": (1, 31),
    "cidr": (1, 31),
    "containsCIDR": (1, 31),
    "prefixLength": (1, 31),
    # Kubernetes semver library: introduced in 1.33, usable in new CRDs from 1.34
    "semver": (1, 34),
    "compareTo": (1, 34),
}


def called_functions(expression: str) -> set[str]:
    without_strings = re.sub(r"r?'[^']*'|\"(?:[^\"\\]|\\.)*\"", "''", expression)
    return set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(", without_strings))


@pytest.mark.parametrize("file_name", RESOURCES)
def test_cel_functions_exist_in_the_oldest_supported_kubernetes(file_name: str) -> None:
    minimum = tuple(int(part) for part in crdgen.MIN_KUBERNETES_VERSION.split("."))
    used: set[str] = set()
    for _, entry in rules(file_name):
        for expression in (entry["rule"], entry.get("messageExpression", "")):
            used |= called_functions(expression)
    unknown = used - set(CEL_FUNCTION_INTRODUCED)
    assert not unknown, f"CEL functions without a known introduction version: {unknown}"
    too_new = {name for name in used if CEL_FUNCTION_INTRODUCED[name] > minimum}
    assert not too_new, f"not available on Kubernetes {crdgen.MIN_KUBERNETES_VERSION}: {too_new}"


def test_cel_function_table_in_crdgen_covers_what_is_used() -> None:
    documented = {name.strip() for names in crdgen.CEL_FUNCTIONS for name in names.split(",")}
    used: set[str] = set()
    for file_name in RESOURCES:
        for _, entry in rules(file_name):
            used |= called_functions(entry["rule"]) | called_functions(entry.get("messageExpression", ""))
    assert used <= documented, used - documented


# ---- reference docs -----------------------------------------------------------------------------------
def plain(markdown: str) -> str:
    """Markdown reduced to its words: links to their text, no emphasis or code marks, one space."""
    text = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", markdown)
    text = re.sub(r"[`*]", "", text)
    return " ".join(text.split())


SEED_STATEMENTS = (
    "ValkeyImage registers a Valkey container image the Momento Valkey Operator is allowed to run.",
    "It is the allowlist: if no ValkeyImage exists for an image, no ValkeyCluster can use it.",
    "Platform teams manage these resources; see Curating images and configs for the workflow.",
    "API group/version | valkey.gomomento.com/v1alpha1",
    "Kind | ValkeyImage",
    "Plural | valkeyimages",
    "Scope | Cluster",
    "repository | string | Yes | — | none | Container image repository, for example valkey/valkey.",
    "tag | string | Yes | — | none | Container image tag, for example 9.0.1.",
    "version | string | Yes | — | Full MAJOR.MINOR.PATCH, at least 9.0.1. | The Valkey version the image "
    "provides, for example 9.0.1. Older declared versions are rejected at admission.",
    "The operator resolves a cluster's image at reconcile time by following ValkeyCluster.spec.configRef "
    "to a ValkeyConfig, then the config's imageRef to a ValkeyImage.",
    "If the referenced ValkeyImage does not exist, resolution fails and the cluster does not progress.",
    "This is where the allowlist is enforced.",
    "The operator checks the running binary against the supported version floor before a node joins.",
    "An image containing an older binary causes provisioning to report Failed with a message, even if its "
    "declared version passes admission.",
    "See Compatibility.",
    "A ValkeyImage referenced by a ValkeyConfig is protected from deletion.",
    "A delete request marks it for deletion; it is released only after the last referencing config is gone.",
    "ValkeyImage has a status subresource, but it defines no fields today.",
    "kubectl get valkeyimages shows:",
    "Repository | .spec.repository",
    "Tag | .spec.tag",
    "Version | .spec.version",
    "Referenced by ValkeyConfig via spec.imageRef. "
    "A config may also inherit its image from a base config's imageRef.",
    "References no other resources.",
    "A ValkeyImage for the valkey-9-0 image:",
)


def test_valkeyimage_page_carries_every_seed_statement() -> None:
    page = plain((DOCS / "valkeyimage.md").read_text())
    missing = [statement for statement in SEED_STATEMENTS if statement not in page]
    assert not missing, missing
    example = re.findall(r"```yaml\n(.*?)```", (DOCS / "valkeyimage.md").read_text(), re.DOTALL)
    assert yaml.safe_load(example[0]) == {
        "apiVersion": "valkey.gomomento.com/v1alpha1",
        "kind": "ValkeyImage",
        "metadata": {"name": "valkey-9-0"},
        "spec": {"repository": "valkey/valkey", "tag": "9.0.1", "version": "9.0.1"},
    }


def spec_fields(file_name: str) -> set[str]:
    """Dotted spec field paths as the reference tables name them (lists as [], map values skipped)."""
    fields = set()
    for path, _ in walk(root_schema(file_name)):
        if path.startswith("spec.") and "{}" not in path and not path.endswith("[]"):
            fields.add(path.removeprefix("spec."))
    return fields


@pytest.mark.parametrize("kind", PAGES)
def test_reference_page_documents_every_spec_and_status_field(kind: str) -> None:
    file_name = next(name for name, resource in RESOURCES.items() if resource.kind == kind)
    page = (DOCS / PAGES[kind]).read_text()
    rows = {match.strip("` ") for match in re.findall(r"^\|\s*(`[^|]+`)\s*\|", page, re.MULTILINE)}
    missing = spec_fields(file_name) - rows
    assert not missing, f"{PAGES[kind]} spec table lacks {sorted(missing)}"
    for path, _ in walk(root_schema(file_name)):
        if path.startswith("status.") and path.count(".") == 1 and not path.endswith("[]"):
            assert f"`{path.removeprefix('status.')}`" in page, f"{PAGES[kind]} does not document {path}"
    for heading in ("## Resource metadata", "## Spec", "## Status", "## Printer columns", "## Example"):
        assert heading in page, (PAGES[kind], heading)
    assert "## References and referenced by" in page


def test_valkeyconfig_page_lists_every_tunable_with_how_it_applies() -> None:
    page = (DOCS / "valkeyconfig.md").read_text()
    runtime = page.split("### Applied at runtime", 1)[1].split("###", 1)[0]
    rolling = page.split("### Startup-only directives", 1)[1].split("###", 1)[0]
    assert set(re.findall(r"`([a-z0-9-]+)`", runtime)) == set(tunables.RUNTIME_TUNABLES)
    assert set(re.findall(r"`([a-z0-9-]+)`", rolling)) == set(tunables.STARTUP_TUNABLES)
    text = plain(page)
    for reason in ("ImageNotFound", "BaseNotFound", "BaseCycle", "TooDeep"):
        assert reason in text
    assert "8 configs" in text
    assert "key by key" in text


def test_reference_index_states_supported_kubernetes_versions() -> None:
    text = plain((DOCS / "README.md").read_text())
    assert "Kubernetes 1.34 to 1.37 are supported" in text
    assert f"at least {VERSION_FLOOR_TEXT}" in text
    for page in PAGES.values():
        assert page in (DOCS / "README.md").read_text()
    assert "## Compatibility" in (DOCS / "README.md").read_text()
    assert "## Curating images and configs" in (DOCS / "README.md").read_text()
