"""`kubectl valkey status <cluster> [-o json]`: shards, nodes, roles, slots, versions, replica sync,
conditions, the rollout and the last switchover, from the cluster's status and its pods."""

from __future__ import annotations

import argparse
from typing import TextIO

import orjson

from valkey_operator.core.resource import PODS
from valkey_operator.core.rest import ApiError
from valkey_operator.kubectl import common, view
from valkey_operator.kubectl.kube import Session
from valkey_operator.kubectl.requests import CLUSTER_LABEL

HELP = "show a cluster's shards, nodes, conditions and rollout"
EXAMPLES = """examples:
  kubectl valkey status cache -n shop
  kubectl valkey status cache -o json | jq '.shards[].nodes[] | select(.role == "primary") | .pod'
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cluster", help="name of the ValkeyCluster")
    parser.add_argument(
        "-o", "--output", choices=("table", "json"), default="table", help="table (default) or json"
    )


async def document(session: Session, name: str) -> common.Obj:
    """The status document (view.summarize) of a live cluster: one GET and one LIST of its pods."""
    cluster = await common.get_cluster(session, name)
    try:
        pods = await session.kube.list(PODS, session.namespace, label_selector=f"{CLUSTER_LABEL}={name}")
    except ApiError as exc:
        if exc.status != 403:
            raise
        pods = []  # allowed to read the cluster but not its pods: show what the status says
    return view.summarize(cluster, pods, common.now())


async def run(args: argparse.Namespace, session: Session, out: TextIO) -> int:
    doc = await document(session, args.cluster)
    if args.output == "json":
        out.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        out.write(view.render(doc, common.now()) + "\n")
    return 0
