"""`kubectl valkey` end to end: the console script, run by the real kubectl as a plugin, against a
cluster the operator formed on the test bed, installed by the chart and run from its image.

The executable is what pip writes for setup.cfg's `kubectl-valkey` entry point (a script calling
it with this checkout's interpreter), put on PATH next to the test bed's kubectl, so `kubectl
valkey ...` exercises kubectl's plugin discovery too.
"""

from __future__ import annotations

import asyncio
import configparser
import datetime
import json
import os
import sys
from pathlib import Path

import pytest
import yaml
from backup_support import destination, storage_secret
from chart_operator import ChartOperator
from cluster_support import Catalog, create_cluster, formed_cluster, owned_pods
from operator_process import ROOT

from valkey_operator.api.resources import (
    PAUSED_ANNOTATION,
    RESTARTED_AT_ANNOTATION,
    SWITCHOVER_ANNOTATION,
    VALKEY_BACKUPS,
    VALKEY_CLUSTERS,
)
from valkey_operator.api.switchover import Request, parse
from valkey_operator.core.client import Client
from valkey_operator.core.resource import EVENTS
from valkey_testbed.build import binaries
from valkey_testbed.objectstore import ObjectStoreServer
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]

NAME = "plug"
OTHER = "other"


def plugin_dir(tmp_path: Path) -> Path:
    """A bin directory holding kubectl-valkey as pip installs it from setup.cfg's entry point."""
    entry = configparser.ConfigParser()
    entry.read(ROOT / "setup.cfg")
    scripts = dict(
        line.split(" = ", 1) for line in entry["options.entry_points"]["console_scripts"].strip().splitlines()
    )
    module, function = scripts["kubectl-valkey"].split(":")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "kubectl-valkey"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom {module} import {function}\nsys.exit({function}())\n"
    )
    script.chmod(0o755)
    return bin_dir


class Plugin:
    """Runs `kubectl valkey ARGS` (the real kubectl finding the plugin on PATH)."""

    def __init__(self, kubeconfig: Path, tmp_path: Path) -> None:
        self.kubeconfig = kubeconfig
        self.env = {
            **os.environ,
            "PATH": f"{plugin_dir(tmp_path)}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(ROOT),
        }
        self.env.pop("KUBECONFIG", None)

    async def __call__(
        self, *args: str, kubeconfig: Path | None = None, stdin: bytes | None = None
    ) -> tuple[int, str, str]:
        argv = [str(binaries().kubectl), "valkey", *args, f"--kubeconfig={kubeconfig or self.kubeconfig}"]
        process = await asyncio.create_subprocess_exec(
            *argv,
            env=self.env,
            cwd=ROOT,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(stdin), 120)
        assert process.returncode is not None
        return process.returncode, out.decode(), err.decode()

    async def ok(self, *args: str, stdin: bytes | None = None) -> str:
        code, out, err = await self(*args, stdin=stdin)
        assert code == 0, f"kubectl valkey {' '.join(args)} exited {code}:\n{out}\n{err}"
        return out


@pytest.fixture
def plugin(kubeconfig_path: Path, tmp_path: Path) -> Plugin:
    return Plugin(kubeconfig_path, tmp_path)


def with_namespace(kubeconfig: Path, namespace: str, target: Path) -> Path:
    """A copy of kubeconfig whose current context names namespace (what `kubectl config set-context
    --current --namespace` writes)."""
    config = yaml.safe_load(kubeconfig.read_text())
    current = config["current-context"]
    for context in config["contexts"]:
        if context["name"] == current:
            context["context"]["namespace"] = namespace
    target.write_text(yaml.safe_dump(config))
    return target


async def progressing_reason(plugin: Plugin, namespace: str) -> str:
    doc = json.loads(await plugin.ok("status", NAME, "-n", namespace, "-o", "json"))
    return next(c["reason"] for c in doc["conditions"] if c["type"] == "Progressing")


@pytest.mark.timeout(600)
async def test_status_pause_resume_logs_and_backup_of_a_live_cluster(
    plugin: Plugin,
    kube: Client,
    catalog: Catalog,
    namespace: str,
    operator: ChartOperator,
    kubeconfig_path: Path,
    tmp_path: Path,
    object_store: ObjectStoreServer,
) -> None:
    status, _ = await formed_cluster(kube, catalog, namespace, NAME, shards=2, replicas=1)
    # A second cluster the operator logs about (its config does not exist: no pods).
    await create_cluster(kube, namespace, OTHER, "no-such-config", shards=1, replicas=0)

    # status -o json: the same facts the operator recorded, plus each pod's Kubernetes node.
    doc = json.loads(await plugin.ok("status", NAME, "-n", namespace, "-o", "json"))
    assert doc["cluster"]["phase"] == "Active" and doc["cluster"]["ready"] == "4/4", doc["cluster"]
    assert [shard["shard"] for shard in doc["shards"]] == [0, 1]
    recorded = {node["pod"]: node for node in status["nodes"]}
    for shard in doc["shards"]:
        assert [node["role"] for node in shard["nodes"]] == ["primary", "replica"], shard
        for node in shard["nodes"]:
            assert node["ip"] == recorded[node["pod"]]["ip"] and node["slots"] == recorded[node["pod"]].get(
                "slots"
            )
            assert node["version"] == recorded[node["pod"]]["version"] and node["node"], node
    assert {c["type"] for c in doc["conditions"]} >= {"Ready", "Progressing"}
    assert doc["rollout"] is None

    # The table: one line for the cluster, one row per node, the conditions, no rollout.
    table = await plugin.ok("status", NAME, "-n", namespace)
    assert table.splitlines()[0].startswith(f"{namespace}/{NAME}: Active, ready 4/4, 2 shards x 1 replica,")
    for shard in doc["shards"]:
        for node in shard["nodes"]:
            row = next(line for line in table.splitlines() if f" {node['pod']} " in line)
            assert node["role"] in row and node["node"] in row and node["ip"] in row, row
    assert "CONDITION" in table and "Rollout: none" in table

    # The namespace comes from the kubeconfig context when -n is not given.
    scoped = with_namespace(kubeconfig_path, namespace, tmp_path / "scoped.kubeconfig")
    code, out, err = await plugin("status", NAME, kubeconfig=scoped)
    assert code == 0 and out.split(", age")[0] == table.split(", age")[0], (out, err)

    # pause shows in the conditions (Progressing: Paused); resume takes it back.
    assert "paused" in await plugin.ok("pause", NAME, "-n", namespace)
    cluster = await kube.get(VALKEY_CLUSTERS, NAME, namespace)
    assert cluster["metadata"]["annotations"][PAUSED_ANNOTATION] == "true"

    async def reason_is(expected: str) -> str | NotYet:
        reason = await progressing_reason(plugin, namespace)
        return reason if reason == expected else NotYet(reason)

    await eventually(lambda: reason_is("Paused"), "Progressing=Paused", 60)
    assert "PAUSED" in (await plugin.ok("status", NAME, "-n", namespace)).splitlines()[0]
    assert "resumed" in await plugin.ok("resume", NAME, "-n", namespace)
    cluster = await kube.get(VALKEY_CLUSTERS, NAME, namespace)
    assert PAUSED_ANNOTATION not in (cluster["metadata"].get("annotations") or {})
    await eventually(lambda: reason_is("Reconciled"), "Progressing=Reconciled", 60)

    # logs: the operator's lines about this cluster only, read from the operator pod's log through
    # the API server (pods/log), as users run it; then from a file and from stdin.
    where = ("-n", namespace, "--operator-namespace", namespace)
    lines = (await plugin.ok("logs", NAME, *where)).splitlines()
    others = (await plugin.ok("logs", OTHER, *where)).splitlines()
    assert lines and others
    for line in lines:
        record = json.loads(line)
        assert f"{namespace}/{NAME}" in (record.get("cluster"), record.get("key")), record
    for line in others:
        assert f"{namespace}/{OTHER}" in (json.loads(line).get("cluster"), json.loads(line).get("key")), line
    assert any(json.loads(line)["event"] == "created pod" for line in lines)
    log = tmp_path / "operator.log"
    log.write_text(await operator.logs())
    assert len(lines) + len(others) < len(log.read_text().splitlines())
    from_file = (await plugin.ok("logs", NAME, "-n", namespace, "--file", str(log))).splitlines()
    assert from_file[: len(lines)] == lines
    piped = await plugin.ok("logs", NAME, "-n", namespace, "--file", "-", stdin=log.read_bytes())
    assert piped.splitlines()[: len(lines)] == lines

    # A selector no operator pod matches: one line saying what to pass.
    code, _, err = await plugin("logs", NAME, *where, "-l", "app.kubernetes.io/name=not-the-operator")
    assert code == 1 and "no running operator pod matches" in err, err

    # backup: refused without a destination; with spec.backup, a ValkeyBackup taken to Completed.
    code, _, err = await plugin("backup", NAME, "-n", namespace)
    assert code == 2 and "has no spec.backup.destination" in err, err
    bucket = object_store.create_bucket()
    await storage_secret(kube, namespace, object_store)
    scheduled = {"schedule": "0 3 * * *", "keep": 1, "destination": destination(object_store, bucket)}
    await kube.patch(VALKEY_CLUSTERS, NAME, {"spec": {"backup": scheduled}}, namespace)
    out = await plugin.ok("backup", NAME, "-n", namespace, "--name", "by-plugin", "--timeout", "4m")
    assert out.splitlines()[-1].startswith(f"valkeybackup {namespace}/by-plugin Completed"), out
    taken = await kube.get(VALKEY_BACKUPS, "by-plugin", namespace)
    assert taken["spec"] == {"clusterName": NAME, "destination": scheduled["destination"]}
    assert taken["status"]["phase"] == "Completed"


@pytest.mark.timeout(600)
async def test_switchover_and_restart_are_carried_out_by_the_operator(
    plugin: Plugin, kube: Client, catalog: Catalog, namespace: str, operator: ChartOperator
) -> None:
    """The plugin asks, the operator acts, and the plugin waits for its answer in the status."""
    await formed_cluster(kube, catalog, namespace, NAME, shards=2, replicas=1)
    doc = json.loads(await plugin.ok("status", NAME, "-n", namespace, "-o", "json"))
    shard = next(shard for shard in doc["shards"] if shard["shard"] == 1)
    primary, replica = (node["pod"] for node in shard["nodes"])  # primary first

    out = await plugin.ok("switchover", NAME, "1", "--to", replica, "-n", namespace, "--timeout", "3m")
    print(f"[plugin] switchover:\n{out}")
    assert "Succeeded" in out.splitlines()[-1], out
    doc = json.loads(await plugin.ok("status", NAME, "-n", namespace, "-o", "json"))
    shard = next(shard for shard in doc["shards"] if shard["shard"] == 1)
    assert [(node["pod"], node["role"]) for node in shard["nodes"]] == [
        (replica, "primary"),
        (primary, "replica"),
    ], shard
    assert doc["switchover"]["phase"] == "Succeeded", doc["switchover"]
    assert (doc["switchover"]["from"], doc["switchover"]["to"]) == (primary, replica)
    events = [e for e in await kube.list(EVENTS, namespace) if e.get("reason") == "SwitchoverSucceeded"]
    assert len(events) == 1 and replica in events[0]["note"], events

    before = {pod["metadata"]["uid"] for pod in await owned_pods(kube, namespace, NAME)}
    out = await plugin.ok("restart", NAME, "-n", namespace, "--timeout", "5m")
    print(f"[plugin] restart:\n{out}")
    after = {pod["metadata"]["uid"] for pod in await owned_pods(kube, namespace, NAME)}
    assert len(after) == 4 and not before & after, (before, after, out)


@pytest.mark.timeout(120)
async def test_switchover_and_restart_write_the_requests(
    plugin: Plugin, kube: Client, namespace: str
) -> None:
    """Without an operator: the annotations' values, and the checks made before asking."""
    await create_cluster(kube, namespace, NAME, "some-config", shards=3, replicas=1)
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)

    out = await plugin.ok("switchover", NAME, "1", "-n", namespace, "--no-wait")
    value = (await kube.get(VALKEY_CLUSTERS, NAME, namespace))["metadata"]["annotations"][
        SWITCHOVER_ANNOTATION
    ]
    request = parse(value)
    assert isinstance(request, Request) and (request.shard, request.pod) == (1, None) and value in out
    stamp = datetime.datetime.strptime(request.token or "", "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.UTC)
    assert before <= stamp <= datetime.datetime.now(datetime.UTC)

    code, _, err = await plugin("switchover", NAME, "3", "-n", namespace, "--no-wait")
    assert code == 2 and "shards 0 to 2" in err, err
    code, _, err = await plugin("switchover", NAME, "0", "--to", "plug-9-z", "-n", namespace, "--no-wait")
    assert code == 2 and "not a node of shard 0" in err, err

    # --wait with nobody to answer: exit 3 after the timeout, saying the request stands.
    code, out, err = await plugin("switchover", NAME, "2", "-n", namespace, "--timeout", "2")
    assert code == 3 and "timed out" in err and "request stands" in err, err

    await plugin.ok("restart", NAME, "-n", namespace, "--no-wait")
    written = (await kube.get(VALKEY_CLUSTERS, NAME, namespace))["metadata"]["annotations"][
        RESTARTED_AT_ANNOTATION
    ]
    restarted = datetime.datetime.fromisoformat(written.replace("Z", "+00:00"))
    assert written.endswith("Z") and before <= restarted <= datetime.datetime.now(datetime.UTC)


@pytest.mark.timeout(60)
async def test_errors_say_what_to_do(plugin: Plugin, namespace: str, tmp_path: Path) -> None:
    code, _, err = await plugin("status", "missing", "-n", namespace)
    assert code == 1 and f'valkeycluster "missing" not found in namespace "{namespace}"' in err, err
    code, _, err = await plugin("status", "missing", "--context", "nowhere")
    assert code == 2 and "context 'nowhere' is not in the kubeconfig" in err, err
    code, _, err = await plugin("status", "x", kubeconfig=tmp_path / "absent")
    assert code == 2 and "no kubeconfig at" in err, err
