"""`valkey-operator selftest`, the chart's `helm test` check: what it dials, what it calls a pass, and
its one-line refusals. The probe runs against the operator's own probe endpoint on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import aiohttp
import pytest

from valkey_operator import selftest
from valkey_operator.__main__ import main
from valkey_operator.core.httpserver import HttpEndpoint, probes_app
from valkey_operator.validation import InvalidValue


@asynccontextmanager
async def probe_endpoint(host: str, ready: Callable[[], bool]) -> AsyncIterator[int]:
    endpoint = HttpEndpoint(probes_app(lambda: True, ready), host, 0)
    await endpoint.start()
    try:
        yield endpoint.port
    finally:
        await endpoint.stop()


@pytest.mark.parametrize(
    ("pod_ip", "url"),
    [("10.244.1.7", "http://10.244.1.7:8081/readyz"), ("fd00::7", "http://[fd00::7]:8081/readyz")],
)
def test_the_readyz_url_dials_the_pod_ip_itself(pod_ip: str, url: str) -> None:
    assert selftest.readyz_url(pod_ip, 8081) == url


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
async def test_a_ready_pod_passes_and_a_not_ready_one_fails(host: str) -> None:
    state = {"ready": True}
    async with (
        probe_endpoint(host, lambda: state["ready"]) as port,
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
    ):
        passed = await selftest.probe(session, "vo-a", host, port)
        state["ready"] = False
        failed = await selftest.probe(session, "vo-a", host, port)
    assert passed.ok and passed.detail == "200 ok", passed
    assert not failed.ok and failed.detail == "503 not ready", failed
    assert str(failed).startswith("FAILED pod vo-a http://")


async def test_a_pod_that_does_not_answer_fails() -> None:
    async with probe_endpoint("127.0.0.1", lambda: True) as port:
        pass  # closed again: nothing listens on the port
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        outcome = await selftest.probe(session, "vo-a", "127.0.0.1", port)
    assert not outcome.ok and "ClientConnectorError" in outcome.detail, outcome


def test_a_crd_passes_only_when_established() -> None:
    def crd(status: str) -> dict[str, object]:
        return {"status": {"conditions": [{"type": "Established", "status": status}]}}

    assert selftest.crd_outcome("a.example.com", crd("True")).ok
    assert not selftest.crd_outcome("a.example.com", crd("False")).ok
    assert not selftest.crd_outcome("a.example.com", {}).ok
    assert str(selftest.crd_outcome("a.example.com", None)) == "FAILED crd a.example.com: not found"


def test_pods_being_deleted_are_not_checked() -> None:
    pods = [
        {"metadata": {"name": "old", "deletionTimestamp": "2026-01-01T00:00:00Z"}},
        {"metadata": {"name": "new"}},
    ]
    assert [pod["metadata"]["name"] for pod in selftest.current(pods)] == ["new"]


def test_options_default_to_the_pods_namespace() -> None:
    options = selftest.parse(
        ["--selector=a=b", "--port=8081", "--crds=x.example.com,y.example.com"], {"POD_NAMESPACE": "ops"}
    )
    assert (options.namespace, options.selector, options.port) == ("ops", "a=b", 8081)
    assert options.crds == ("x.example.com", "y.example.com") and options.timeout == 5.0


@pytest.mark.parametrize(
    ("argv", "setting"),
    [(["--port=0"], "--port"), (["--port=65536"], "--port"), (["--port=1", "--timeout=0"], "--timeout")],
)
def test_bad_options_are_refused(argv: list[str], setting: str) -> None:
    with pytest.raises(InvalidValue) as caught:
        selftest.parse(["--selector=a=b", *argv], {"POD_NAMESPACE": "ops"})
    assert caught.value.setting == setting


def test_the_operator_command_runs_it_and_a_bad_flag_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    assert main(["selftest", "--port=8081", "--namespace=ops"]) == 2
    assert main(["selftest", "--selector=a=b", "--port=8081"]) == 2  # no namespace known
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "valkey-operator: the following arguments are required: --selector (see valkey-operator selftest "
        "--help)",
        "valkey-operator: invalid --namespace \"\": allowed a DNS-1123 label (lowercase a-z, 0-9 and '-', "
        "alphanumeric at both ends, <= 63)",
    ]
