"""The operator and its test bed are two distributions: the operator's wheel and image carry no
test-bed module, and the operator imports nothing of the test bed (it would break a plain install).

The package lists are setuptools' own reading of each setup.cfg (the `find:` directive expanded as a
wheel build expands it), so a change of `[options.packages.find]` that pulled the test bed back in
fails here without building a wheel.
"""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

from setuptools.config.setupcfg import read_configuration

from valkey_testbed import operatorimage

ROOT = Path(__file__).resolve().parents[2]
TESTBED = ROOT / "testbed"
OPERATOR_PACKAGES = ("valkey_operator", "controllers")
TESTBED_PACKAGE = "valkey_testbed"


def packages(setup_cfg: Path) -> list[str]:
    """The packages a wheel built from setup_cfg's directory holds."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # setuptools warns that setup.cfg is the older format
        found = read_configuration(setup_cfg)["options"]["packages"]
    return sorted(found)


def bed_modules() -> set[str]:
    """Every module of the test bed, by dotted name, from its directory."""
    return {
        ".".join(path.relative_to(TESTBED).with_suffix("").parts).removesuffix(".__init__")
        for path in (TESTBED / TESTBED_PACKAGE).rglob("*.py")
    }


def test_the_operator_wheel_holds_no_test_bed_package() -> None:
    operator = packages(ROOT / "setup.cfg")
    assert "valkey_operator" in operator and "controllers.cluster" in operator, operator
    leaked = [name for name in operator if name.split(".")[0] not in OPERATOR_PACKAGES]
    assert not leaked, f"the operator's wheel would carry {leaked}"
    assert not set(operator) & bed_modules()
    assert not (ROOT / "valkey_operator" / "testing").exists(), "the old test-bed package is back"


def test_the_test_bed_wheel_holds_the_whole_test_bed_and_nothing_else() -> None:
    testbed = packages(TESTBED / "setup.cfg")
    directories = {
        ".".join(path.parent.relative_to(TESTBED).parts)
        for path in (TESTBED / TESTBED_PACKAGE).rglob("__init__.py")
    }
    assert set(testbed) == directories, set(testbed) ^ directories
    assert all(name.split(".")[0] == TESTBED_PACKAGE for name in testbed), testbed


def test_the_operator_imports_nothing_of_the_test_bed() -> None:
    """A plain install has no valkey_testbed: an import of it anywhere in the product fails there."""
    offenders = []
    for package in OPERATOR_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                offenders += [
                    f"{path.relative_to(ROOT)}:{node.lineno} imports {name}"
                    for name in names
                    if name.split(".")[0] == TESTBED_PACKAGE
                ]
    assert not offenders, "\n".join(offenders)


def test_the_operator_image_context_holds_no_test_bed_file() -> None:
    """What the image build copies into its context (.containerignore applied, as podman build does):
    no test-bed source, so a change to the test bed neither lands in nor rebuilds the image."""
    files = operatorimage._context_files(ROOT)
    assert "Containerfile" in files and "setup.cfg" in files, files[:10]
    assert any(name.startswith("valkey_operator/") for name in files)
    leaked = [name for name in files if name.startswith("testbed/") or TESTBED_PACKAGE in name]
    assert not leaked, leaked


def _requirements(setup_cfg: Path) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(read_configuration(setup_cfg)["options"]["install_requires"])


def test_the_test_bed_requires_this_operator_by_name_and_version() -> None:
    """By name only (pip refuses a relative-path URL), pinned to the operator's own version, so a
    version bump of one without the other fails here rather than at install time."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        version = read_configuration(ROOT / "setup.cfg")["metadata"]["version"]
    operator = [r for r in _requirements(TESTBED / "setup.cfg") if r.startswith("valkey-operator")]
    assert operator == [f"valkey-operator=={version}"], operator
    assert not any("@" in r for r in _requirements(ROOT / "setup.cfg")), "a direct reference"


def test_ci_runs_the_readme_test_command_and_both_install_the_test_bed() -> None:
    """The README's two commands install the test bed next to the operator, and .ci/run runs the
    second one as written."""
    readme = (ROOT / "README.md").read_text()
    commands = [line for line in readme.splitlines() if line.startswith("pip install")]
    assert len(commands) == 2, commands
    assert all(" -e testbed " in command and "python -m valkey_testbed " in command for command in commands)
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("pip install")]
    assert ci == commands[1:], (ci, commands)
