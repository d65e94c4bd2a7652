"""Fixtures of the end-to-end tests: the operator as the chart installs it (the default), the
in-process operator (for the few tests that reach inside), real operator processes, a per-test catalog."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from chart_operator import ChartOperator
from chart_support import RELEASE, helm
from cluster_support import Catalog
from inprocess_operator import Operator
from kubernetes_asyncio import client as k8s
from operator_process import OperatorProcesses

from valkey_operator.core.client import Client
from valkey_operator.core.resource import NAMESPACES
from valkey_testbed import operatorimage

OPERATOR_VALUES = "operator_values"
"""Mark: more chart values for the `operator` fixture, e.g.
`@pytest.mark.operator_values("operatorConfig.secretSyncSeconds=5")` (on a test or a module)."""
IN_PROCESS = "inprocess_operator"
"""Mark: the `operator` fixture is the in-process operator, for a test that must reach inside or
that the operator must outlive; its one argument says why (docs/testing.md lists them)."""
KEEP_LOGS = "VALKEY_E2E_OPERATOR_LOGS"
"""Environment: a directory that keeps each chart operator's whole log, one file per test namespace
(failures show only the last 20,000 characters)."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{OPERATOR_VALUES}(*values): more --set values of the test's chart release"
    )
    config.addinivalue_line("markers", f"{IN_PROCESS}(reason): the operator runs in the test process")


@pytest_asyncio.fixture
async def operator(
    kube: Client,
    kube_api: k8s.ApiClient,
    kubeconfig_path: Path,
    namespace: str,
    request: pytest.FixtureRequest,
) -> AsyncIterator[ChartOperator | Operator]:
    """The operator users install: a release of this checkout's chart in the test's namespace,
    watching it only, its pod run from this checkout's image (chart_operator.py). Marked
    inprocess_operator: the reconcilers in this process instead."""
    values = [value for mark in request.node.iter_markers(OPERATOR_VALUES) for value in mark.args]
    if request.node.get_closest_marker(IN_PROCESS) is not None:
        assert not values, "chart values do not reach the in-process operator"
        inside = Operator(kube_api, namespace)
        await inside.start()
        yield inside
        await inside.stop()
        return
    running = ChartOperator(
        kube, kubeconfig_path, namespace, request.getfixturevalue("operator_image"), values
    )
    try:
        await running.install()
        print(
            f"operator {running.release}: helm install {running.install_seconds:.1f}s, "
            f"its pod leading {running.ready_seconds:.1f}s after install began"
        )
        yield running
    finally:
        try:
            logs = [*running.earlier_logs, await running.logs()]
            for log in logs:
                print(log[-20000:])  # shown by pytest when the test fails
            if kept := os.environ.get(KEEP_LOGS):
                keep_log(Path(kept) / f"{namespace}.log", "".join(logs))
        finally:
            await running.uninstall()


def keep_log(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest_asyncio.fixture
async def inprocess_operator(kube_api: k8s.ApiClient, namespace: str) -> AsyncIterator[Operator]:
    """The operator's reconcilers in this process, for tests that must reach inside it."""
    running = Operator(kube_api, namespace)
    await running.start()
    yield running
    await running.stop()


@pytest_asyncio.fixture
async def catalog(kube: Client, namespace: str) -> AsyncIterator[Catalog]:
    created = Catalog(kube, namespace[-6:])
    yield created
    await created.cleanup()


@pytest.fixture
def operators(kubeconfig_path: Path, namespace: str, tmp_path: Path) -> Iterator[OperatorProcesses]:
    """Real operator processes (python -m valkey_operator) for this test, killed afterwards."""
    started = OperatorProcesses(kubeconfig_path, namespace, tmp_path)
    try:
        yield started
    finally:
        started.kill_all()


@pytest_asyncio.fixture
async def workloads(kube: Client, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A second namespace: where ValkeyClusters live, apart from the chart's release namespace."""
    name = f"{request.module.__name__.rsplit('_', 1)[-1]}-workloads-{uuid.uuid4().hex[:6]}"
    await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield name
    finally:
        await kube.delete(NAMESPACES, name)


@pytest.fixture
def release(kubeconfig_path: Path, namespace: str) -> Iterator[str]:
    """The chart release a test installs in its namespace, uninstalled afterwards if still there (its
    cluster-scoped RBAC outlives the namespace otherwise)."""
    yield RELEASE
    helm(kubeconfig_path, "uninstall", RELEASE, "-n", namespace, "--wait", "--ignore-not-found")


_IMAGE: dict[str, operatorimage.BuiltImage | BaseException] = {}


def built_image() -> operatorimage.BuiltImage:
    """This checkout's operator image, built and loaded once per process (a failure is kept and
    raised again)."""
    if "image" not in _IMAGE:
        try:
            _IMAGE["image"] = operatorimage.build_and_load(lambda _: None)
        except Exception as exc:  # raised again by the fixture, inside the test that needs it
            _IMAGE["image"] = exc
    found = _IMAGE["image"]
    if isinstance(found, BaseException):
        raise found
    return found


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Build the image before the first test that needs it, outside pytest-timeout's timer (this
    wrapper runs first): after a source change the rebuild takes about a minute on an idle 2-core
    machine, several under load, and must not count against one test's timeout."""
    names = set(getattr(item, "fixturenames", ()))
    chart = "operator" in names and item.get_closest_marker(IN_PROCESS) is None
    if chart or "operator_image" in names:
        with contextlib.suppress(Exception):
            built_image()
    yield


@pytest.fixture(scope="session")
def operator_image() -> operatorimage.BuiltImage:
    """The operator image of this checkout, as `python -m valkey_testbed build` built and
    loaded it (cached: rebuilt only when the source changed). Its tag is the chart's default and is
    shared by every checkout on the machine, so tests that must run this checkout's code pin its
    digest (`image.digest`)."""
    return built_image()
