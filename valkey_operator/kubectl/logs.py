"""`kubectl valkey logs <cluster>`: the operator's log lines about one cluster.

Finds the operator's pods by label (the chart's labels by default, in every namespace unless
--operator-namespace is given), reads their logs through the API server (pods/log, as `kubectl
logs` does) and keeps the lines that name the cluster (logfilter). --file reads a saved log
instead (`-` for stdin), e.g. `kubectl logs deploy/valkey-operator | kubectl valkey logs cache --file -`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator, Iterable
from typing import TextIO

import aiohttp

from valkey_operator.core.resource import PODS
from valkey_operator.core.rest import ApiError
from valkey_operator.kubectl import common, logfilter
from valkey_operator.kubectl.kube import CommandFailed, Session, UsageError

HELP = "print the operator's log lines about one cluster"
DEFAULT_SELECTOR = "app.kubernetes.io/name=valkey-operator,app.kubernetes.io/component=operator"
"""The operator pods' labels as the chart sets them (charts/valkey-operator/templates/_helpers.tpl)."""
CONTAINER = "operator"
EXAMPLES = f"""Lines are kept when their structured fields name the cluster (cluster=<namespace>/<name>, or
the cluster controller's key=<namespace>/<name>).

examples:
  kubectl valkey logs cache -n shop --since 1h
  kubectl valkey logs cache -n shop -f --operator-namespace valkey-system
  kubectl valkey logs cache -l app.kubernetes.io/instance=ops   # another release's operator pods
  kubectl logs deploy/valkey-operator -n valkey-system | kubectl valkey logs cache -n shop --file -

default selector: {DEFAULT_SELECTOR}
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cluster", help="name of the ValkeyCluster")
    parser.add_argument("-f", "--follow", action="store_true", help="keep streaming new lines")
    parser.add_argument("--since", help="only lines newer than this duration (30s, 5m, 1h)")
    parser.add_argument(
        "-l", "--selector", default=DEFAULT_SELECTOR, help="label selector of the operator's pods"
    )
    parser.add_argument(
        "--operator-namespace", help="namespace of the operator's pods (default: search every namespace)"
    )
    parser.add_argument("-c", "--container", default=CONTAINER, help=f"container (default {CONTAINER})")
    parser.add_argument("--file", help="filter this saved log instead of reading pods ('-' for stdin)")
    parser.add_argument(
        "-o",
        "--output",
        choices=("raw", "text"),
        default="raw",
        help="raw lines (default) or text: time level event key=value",
    )


def keep(lines: Iterable[str], namespace: str, name: str) -> Iterable[str]:
    return (line for line in lines if logfilter.matches(line, namespace, name))


async def run(args: argparse.Namespace, session: Session, out: TextIO) -> int:
    since = None
    if args.since is not None:
        try:
            since = logfilter.seconds(args.since)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if args.file is not None:
        source = sys.stdin if args.file == "-" else _open(args.file)
        for line in keep(source, session.namespace, args.cluster):
            out.write(_shown(line.rstrip("\n"), args.output) + "\n")
        return 0
    pods = await _operator_pods(session, args.selector, args.operator_namespace)
    prefix = len(pods) > 1
    await asyncio.gather(*(_relay(session, pod, args, since, out, prefix) for pod in pods))
    return 0


def _shown(line: str, output: str) -> str:
    return logfilter.readable(line) if output == "text" else line


def _open(path: str) -> TextIO:
    try:
        return open(path, encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"--file {path}: {exc.strerror or exc}") from None


async def _operator_pods(session: Session, selector: str, namespace: str | None) -> list[common.Obj]:
    try:
        pods = await session.kube.list(PODS, namespace, label_selector=selector)
    except ApiError as exc:
        where = f"namespace {namespace}" if namespace else "all namespaces"
        hint = "; pass --operator-namespace" if exc.status == 403 and not namespace else ""
        raise CommandFailed(
            common.explain(exc, f"listing operator pods ({selector}) in {where}") + hint
        ) from None
    running = [pod for pod in pods if (pod.get("status") or {}).get("phase") == "Running"]
    if not running:
        where = f"namespace {namespace}" if namespace else "any namespace"
        raise CommandFailed(
            f"no running operator pod matches {selector} in {where}: pass -l with your install's labels "
            "(kubectl get pods -A --show-labels | grep valkey-operator)"
        )
    return running


async def _relay(
    session: Session, pod: common.Obj, args: argparse.Namespace, since: int | None, out: TextIO, prefix: bool
) -> None:
    meta = pod["metadata"]
    label = f"[pod/{meta['name']}] " if prefix else ""
    async for line in _pod_lines(
        session, meta["namespace"], meta["name"], args.container, since, args.follow
    ):
        if logfilter.matches(line, session.namespace, args.cluster):
            out.write(label + _shown(line, args.output) + "\n")
            out.flush()


async def _pod_lines(
    session: Session, namespace: str, pod: str, container: str, since: int | None, follow: bool
) -> AsyncIterator[str]:
    path = PODS.path(namespace, pod, "log")
    query: dict[str, str | int | bool | None] = {
        "container": container,
        "follow": follow,
        "sinceSeconds": since,
    }
    timeout = aiohttp.ClientTimeout(total=None if follow else 300, sock_connect=30)
    try:
        async with session.rest.stream(path, query=query, timeout=timeout, accept="*/*") as response:
            async for raw in response.content:
                yield raw.decode(errors="replace").rstrip("\n")
    except ApiError as exc:
        raise CommandFailed(
            common.explain(exc, f"reading the log of pod {namespace}/{pod}")
            + " (if the API server cannot reach that node's kubelet, save the log elsewhere and use --file)"
        ) from None
