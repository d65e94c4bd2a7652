"""`kubectl valkey pause|resume <cluster>`: the paused annotation, which stops every change the
operator would make to the cluster (its status is still updated) until it is removed."""

from __future__ import annotations

import argparse
from typing import TextIO

from valkey_operator.api.resources import PAUSED_ANNOTATION
from valkey_operator.kubectl import common
from valkey_operator.kubectl.kube import Session
from valkey_operator.kubectl.requests import pause_patch

PAUSE_HELP = "stop the operator from changing a cluster (the paused annotation)"
RESUME_HELP = "let the operator change a paused cluster again"
PAUSE_EXAMPLES = f"""The operator finishes the step in flight, then changes nothing until resumed; the
cluster's Progressing condition says Paused. Same as:
  kubectl annotate valkeycluster <cluster> {PAUSED_ANNOTATION}=true

examples:
  kubectl valkey pause cache -n shop
"""
RESUME_EXAMPLES = f"""Same as:
  kubectl annotate valkeycluster <cluster> {PAUSED_ANNOTATION}-

examples:
  kubectl valkey resume cache -n shop
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cluster", help="name of the ValkeyCluster")


async def _set(args: argparse.Namespace, session: Session, out: TextIO, paused: bool) -> int:
    cluster = await common.get_cluster(session, args.cluster)
    was = ((cluster["metadata"].get("annotations") or {}).get(PAUSED_ANNOTATION)) == "true"
    where = f"valkeycluster {session.namespace}/{args.cluster}"
    if was == paused:
        out.write(f"{where} was already {'paused' if paused else 'not paused'}\n")
        return 0
    await common.annotate(session, args.cluster, pause_patch(paused))
    out.write(f"{where} {'paused' if paused else 'resumed'}\n")
    return 0


async def run_pause(args: argparse.Namespace, session: Session, out: TextIO) -> int:
    return await _set(args, session, out, True)


async def run_resume(args: argparse.Namespace, session: Session, out: TextIO) -> int:
    return await _set(args, session, out, False)
