"""`valkey-operator selftest`: what the chart's `helm test` pod runs, from the operator image.

With the pod's own service account it checks that every operator pod the label selector finds
(not being deleted) is Running and answers 200 on /readyz at its pod IP and health port (the
listeners bind the pod IP; a Service address is never dialled), and that every named
CustomResourceDefinition is Established.
One line per check on stdout; exit 0 when every check passes, 1 when one fails, 2 for a bad flag
or a client configuration that cannot be loaded.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
from collections.abc import Mapping, Sequence
from typing import NoReturn

import aiohttp
import attrs

from valkey_operator import validation
from valkey_operator.core.client import Client
from valkey_operator.core.conditions import is_true
from valkey_operator.core.resource import CUSTOM_RESOURCE_DEFINITIONS, PODS
from valkey_operator.core.rest import ApiError, Obj, RestClient, TransportError
from valkey_operator.core.restconfig import load_config
from valkey_operator.settings import POD_NAMESPACE_ENV, UsageError
from valkey_operator.validation import InvalidValue, fail

COMMAND = "selftest"
FIELD_MANAGER = "valkey-operator-selftest"


@attrs.frozen
class Outcome:
    ok: bool
    what: str
    detail: str

    def __str__(self) -> str:
        return f"{'ok' if self.ok else 'FAILED'} {self.what}: {self.detail}"


@attrs.frozen(kw_only=True)
class Options:
    namespace: str
    selector: str
    port: int
    crds: tuple[str, ...]
    timeout: float
    kubeconfig: str | None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line instead of argparse's usage block."""
        raise UsageError(f"{message} (see valkey-operator {COMMAND} --help)")


def parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=f"valkey-operator {COMMAND}",
        description="Check that the operator pods answer /readyz and that the CRDs are Established.",
    )
    parser.add_argument("--namespace", help=f"the operator pods' namespace (default: ${POD_NAMESPACE_ENV})")
    parser.add_argument("--selector", required=True, help="label selector of the operator pods")
    parser.add_argument("--port", required=True, help="the operator's health probe port")
    parser.add_argument("--crds", default="", help="comma-separated CRD names that must be Established")
    parser.add_argument("--timeout", default="5", help="seconds each request may take (default 5)")
    parser.add_argument("--kubeconfig", help="kubeconfig path (default: as the operator finds one)")
    return parser


def parse(argv: Sequence[str], environ: Mapping[str, str]) -> Options:
    """The validated options; raises InvalidValue or UsageError (one line each)."""
    args = parser().parse_args(argv)
    namespace = args.namespace if args.namespace is not None else environ.get(POD_NAMESPACE_ENV, "")
    port = validation.integer("--port", args.port, minimum=1)
    if port > 65535:
        raise InvalidValue("--port", args.port, "an integer 1..65535")
    return Options(
        namespace=validation.dns1123_label("--namespace", namespace),
        selector=args.selector,
        port=port,
        crds=tuple(name for name in args.crds.split(",") if name),
        timeout=float(validation.integer("--timeout", args.timeout, minimum=1)),
        kubeconfig=args.kubeconfig,
    )


def readyz_url(pod_ip: str, port: int) -> str:
    """http://<ip>:<port>/readyz, an IPv6 address in brackets."""
    host = f"[{pod_ip}]" if ipaddress.ip_address(pod_ip).version == 6 else pod_ip
    return f"http://{host}:{port}/readyz"


def current(pods: Sequence[Obj]) -> list[Obj]:
    """The pods that should answer: every one not being deleted."""
    return [pod for pod in pods if not pod["metadata"].get("deletionTimestamp")]


def crd_outcome(name: str, crd: Obj | None) -> Outcome:
    what = f"crd {name}"
    if crd is None:
        return Outcome(False, what, "not found")
    if is_true(crd.get("status", {}).get("conditions"), "Established"):
        return Outcome(True, what, "Established")
    return Outcome(False, what, "not Established")


async def probe(session: aiohttp.ClientSession, name: str, pod_ip: str, port: int) -> Outcome:
    url = readyz_url(pod_ip, port)
    what = f"pod {name} {url}"
    try:
        async with session.get(url) as response:
            body = (await response.text()).strip()
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        return Outcome(False, what, f"{type(exc).__name__}: {exc}")
    return Outcome(response.status == 200, what, f"{response.status} {body}")


async def check(client: Client, options: Options) -> list[Outcome]:
    """Every check's outcome: one per operator pod (none found, or one not Running, is a failure), one
    per CRD."""
    outcomes = []
    pods = current(await client.list(PODS, options.namespace, label_selector=options.selector))
    if not pods:
        outcomes.append(Outcome(False, f"pods {options.selector}", f"none in namespace {options.namespace}"))
    timeout = aiohttp.ClientTimeout(total=options.timeout)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for pod in pods:
            name, status = pod["metadata"]["name"], pod.get("status", {})
            if status.get("phase") != "Running" or not status.get("podIP"):
                outcomes.append(
                    Outcome(False, f"pod {name}", f"phase {status.get('phase')}, IP {status.get('podIP')}")
                )
                continue
            outcomes.append(await probe(session, name, status["podIP"], options.port))
    for name in options.crds:
        outcomes.append(crd_outcome(name, await client.get_or_none(CUSTOM_RESOURCE_DEFINITIONS, name)))
    return outcomes


async def _run(options: Options) -> int:
    try:
        config = await load_config(options.kubeconfig)
    except Exception as exc:  # a broken kubeconfig or service account: one line, not a traceback
        fail(f"cannot load the Kubernetes client configuration: {type(exc).__name__}: {exc}")
        return 2
    async with RestClient(config) as rest:
        try:
            outcomes = await check(Client(rest, FIELD_MANAGER), options)
        except (ApiError, TransportError) as exc:  # forbidden, unreachable: the reason, in one line
            outcomes = [Outcome(False, "api", f"{type(exc).__name__}: {' '.join(str(exc).split())}")]
    for outcome in outcomes:
        print(outcome, flush=True)
    return 0 if all(outcome.ok for outcome in outcomes) else 1


def main(argv: Sequence[str]) -> int:
    try:
        options = parse(argv, os.environ)
    except (InvalidValue, UsageError) as exc:
        fail(str(exc))
        return 2
    return asyncio.run(_run(options))
