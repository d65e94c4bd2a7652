"""Health as GitOps tools read it (SPEC 1.8), asked of the real kstatus library about live clusters.

A sampler watches the ValkeyCluster and runs sigs.k8s.io/cli-utils' kstatus
(testbed/valkey_testbed/kstatus) on every version the API server shows, through a new cluster, a
roll, a scale, a runtime setting, a spread move and a blocked config: InProgress while a new
cluster is not yet Ready, Current throughout while it serves, Failed when clients are affected
and the operator cannot go on (a new cluster whose binary is below the version floor serves
nothing) or when only a human can go on (a restore held by an operator started without
--operator-image). `kubectl wait
--for=condition=Ready` returns during a roll. With -s it prints `[kstatus]` lines: samples per
verdict in each phase.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import attrs
import pytest
from backup_support import destination, finished, restore_cluster, start_backup, storage_secret
from chart_operator import ChartOperator
from chart_support import kubectl
from cluster_support import (
    NODE_TIMEOUT_MS,
    NUDGE_ANNOTATION,
    Catalog,
    admin_client,
    create_cluster,
    crowding,
    fail_over_by_hand,
    formed_cluster,
    owned_pods,
    pause,
    resume,
    settled,
    status_of,
)
from inprocess_operator import Operator
from kubernetes_asyncio import client as k8s

from controllers.options import ControllerOptions
from valkey_operator.api.resources import VALKEY_CLUSTERS, VALKEY_CONFIGS
from valkey_operator.core.client import Client
from valkey_operator.core.conditions import find_condition
from valkey_operator.core.informer import FuncHandler, SharedInformer
from valkey_operator.core.rest import Obj
from valkey_testbed import images
from valkey_testbed.images import OPERATOR_IMAGE
from valkey_testbed.kstatus import status_of as kstatus
from valkey_testbed.objectstore import ObjectStoreServer
from valkey_testbed.operatorproc import LOOPBACK_NETWORKS, TEST_BED_ENDPOINTS
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]

OLD = "9.1.0"
SAMPLE_INTERVAL = 0.25


@attrs.frozen
class Sample:
    phase: str
    verdict: str
    message: str
    written: bool
    """The operator has written a status (kstatus calls an object with none Current)."""
    observed: bool
    """status.observedGeneration is metadata.generation (else kstatus says InProgress by design)."""
    state: str | None
    ready: str | None


@attrs.define
class Sampler:
    """kstatus on every version of the cluster the API server shows (a watch: no status write falls
    between two samples), each labelled with the phase the test was in when it arrived; `sample()`
    judges the object as it is now, too."""

    kube: Client
    namespace: str
    name: str
    phase: str = "create"
    samples: list[Sample] = attrs.field(factory=list)
    versions: asyncio.Queue[tuple[str, Obj]] = attrs.field(factory=asyncio.Queue)

    def seen(self, obj: Obj) -> None:
        if obj["metadata"]["name"] == self.name:
            self.versions.put_nowait((self.phase, obj))

    async def sample(self) -> Sample:
        return await self.judge(self.phase, await self.kube.get(VALKEY_CLUSTERS, self.name, self.namespace))

    async def judge(self, phase: str, obj: Obj) -> Sample:
        verdict = await asyncio.to_thread(kstatus, obj)
        status = obj.get("status") or {}
        ready = find_condition(status.get("conditions"), "Ready") or {}
        found = Sample(
            phase=phase,
            verdict=verdict.status,
            message=verdict.message,
            written="observedGeneration" in status,
            observed=status.get("observedGeneration") == obj["metadata"]["generation"],
            state=status.get("state"),
            ready=ready.get("status"),
        )
        self.samples.append(found)
        return found

    async def run(self, deadline: float) -> None:
        informer = SharedInformer(self.kube.rest, VALKEY_CLUSTERS, namespace=self.namespace)
        informer.add_event_handler(FuncHandler(on_add=self.seen, on_update=lambda _old, new: self.seen(new)))
        informer.start()
        try:
            while time.monotonic() < deadline:  # bounded: the test's own timeout is shorter
                try:
                    async with asyncio.timeout(SAMPLE_INTERVAL * 8):
                        phase, obj = await self.versions.get()
                except TimeoutError:
                    continue
                await self.judge(phase, obj)
        finally:
            await informer.stop()

    def of(self, phase: str) -> list[Sample]:
        return [sample for sample in self.samples if sample.phase == phase]

    def report(self) -> None:
        for phase in dict.fromkeys(sample.phase for sample in self.samples):
            taken = self.of(phase)
            verdicts = Counter(sample.verdict for sample in taken if sample.observed)
            unobserved = Counter(sample.verdict for sample in taken if not sample.observed)
            states = Counter(sample.state for sample in taken)
            print(
                f"[kstatus] {self.name} {phase}: {len(taken)} samples, {dict(verdicts)}; "
                f"generation not yet observed {dict(unobserved)}; states {dict(states)}"
            )


@contextlib.asynccontextmanager
async def sampling(kube: Client, namespace: str, name: str, seconds: float) -> AsyncIterator[Sampler]:
    sampler = Sampler(kube, namespace, name)
    task = asyncio.create_task(sampler.run(time.monotonic() + seconds))
    try:
        yield sampler
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        sampler.report()


async def assert_current_while_serving(
    sampler: Sampler, phase: str, changing: str | None = "Updating"
) -> None:
    """One more sample (the phase's end), then: every sample of the phase whose generation the
    operator observed is Current; one it had not observed yet is InProgress (kstatus' generation
    rule). `changing`: a state the phase must have been seen in, so the phase really sampled the
    change and not only its end."""
    await sampler.sample()
    taken = sampler.of(phase)
    observed = [sample for sample in taken if sample.observed]
    assert observed, f"{phase}: no sample of the observed generation: {taken}"
    wrong = [sample for sample in observed if sample.verdict != "Current"]
    assert not wrong, f"{phase}: not Current while serving: {wrong[:3]} ({len(wrong)} of {len(observed)})"
    assert all(sample.verdict == "InProgress" for sample in taken if not sample.observed), taken
    if changing is not None:
        assert any(sample.state == changing for sample in observed), Counter(s.state for s in taken)


async def until(sampler: Sampler, check: str, timeout: float, done: Callable[[Obj], bool]) -> None:
    """Wait until done(the cluster's status) while the sampler runs."""

    async def reached() -> bool | NotYet:
        status = await status_of(sampler.kube, sampler.namespace, sampler.name)
        return True if done(status) else NotYet({key: status.get(key) for key in ("state", "message")})

    await eventually(reached, check, timeout, interval=0.5)


@pytest.mark.timeout(1800)
async def test_kstatus_says_current_while_the_cluster_serves_through_every_change(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str, kubeconfig_path: Path
) -> None:
    newest = images.valkey_version(images.newest_image())
    old_image = await catalog.image("old", OLD)
    new_image = await catalog.image("new", newest)
    config = await catalog.config("cfg", old_image)
    name = "ks"
    # A new cluster: InProgress until Ready, then Current.
    await create_cluster(kube, namespace, name, config, shards=3, replicas=1)
    async with sampling(kube, namespace, name, 1700) as sampler:
        status = await settled(kube, namespace, name, 360)
        await sampler.sample()
        created = [sample for sample in sampler.of("create") if sample.written]
        assert created and created[0].verdict == "InProgress", created[:1]
        for sample in created:
            assert sample.verdict == ("Current" if sample.ready == "True" else "InProgress"), sample
        assert created[-1].verdict == "Current"

        # A roll (a new image): Current throughout; `kubectl wait --for=condition=Ready` returns mid-roll.
        sampler.phase = "roll"
        await kube.patch(VALKEY_CONFIGS, config, {"spec": {"imageRef": new_image}})
        await until(sampler, "the roll under way", 120, lambda s: "rollout" in s)
        started = time.monotonic()
        waited = await asyncio.to_thread(
            kubectl,
            kubeconfig_path,
            "wait",
            "--for=condition=Ready",
            f"valkeyclusters/{name}",
            "-n",
            namespace,
            "--timeout=60s",
        )
        wait_seconds = time.monotonic() - started
        during = await status_of(kube, namespace, name)
        print(f"[kstatus] kubectl wait --for=condition=Ready mid-roll: {wait_seconds:.1f}s: {waited.strip()}")
        assert "condition met" in waited and "rollout" in during, (waited, during.get("state"))
        await until(
            sampler,
            "rolled to the new image",
            600,
            lambda s: s.get("state") == "Active" and s.get("currentImage") == f"valkey/valkey:{newest}",
        )
        await assert_current_while_serving(sampler, "roll")

        # A scale, 3 -> 4 shards (slots migrate onto the new shard).
        sampler.phase = "scale"
        await kube.patch(VALKEY_CLUSTERS, name, {"spec": {"shards": 4}}, namespace)
        status = await settled(kube, namespace, name, 600)
        await assert_current_while_serving(sampler, "scale")

        # A runtime setting (CONFIG SET on every node, no pod replaced).
        sampler.phase = "runtime"
        await kube.patch(
            VALKEY_CONFIGS,
            config,
            {"spec": {"valkey": {"cluster-node-timeout": NODE_TIMEOUT_MS, "slowlog-max-len": "512"}}},
        )

        async def new_hash() -> str | NotYet:
            found = ((await kube.get(VALKEY_CONFIGS, config)).get("status") or {}).get("settingsHash")
            return found if found and found != status.get("configHash") else NotYet(found)

        wanted = await eventually(new_hash, "the config's new settingsHash", 60)
        await until(
            sampler,
            "the runtime setting applied",
            180,
            lambda s: s.get("state") == "Active" and s.get("configHash") == wanted,
        )
        # Applying one setting can take a single pass: Updating need not be written.
        await assert_current_while_serving(sampler, "runtime", changing=None)

        # A spread move: primaries crowded onto one node by hand, moved back by the operator.
        sampler.phase = "spread"
        status = await status_of(kube, namespace, name)
        hosts = {
            pod["metadata"]["name"]: pod["spec"]["nodeName"]
            for pod in await owned_pods(kube, namespace, name)
        }
        share = math.ceil(4 / len(set(hosts.values())))
        crowded, wanted_pods = crowding(hosts, status)
        assert len(wanted_pods) > share, f"no node holds copies of more than {share} shards: {hosts}"
        await pause(kube, namespace, name)
        admin = await admin_client(kube, namespace, name)
        replicas = [n["ip"] for n in status["nodes"] if n["pod"] in wanted_pods and n["role"] == "replica"]
        await fail_over_by_hand(admin, replicas)
        # The paused cluster's status still follows the servers: a pass (nudged) sees the crowding.
        nudge = {"metadata": {"annotations": {NUDGE_ANNOTATION: str(time.time())}}}
        await kube.patch(VALKEY_CLUSTERS, name, nudge, namespace)
        await until(sampler, "the crowding seen", 120, lambda s: s.get("maxPrimariesPerNode", 0) > share)
        await resume(kube, namespace, name)
        await until(
            sampler,
            f"{crowded} relieved",
            300,
            lambda s: s.get("state") == "Active" and s.get("maxPrimariesPerNode") == share,
        )
        await assert_current_while_serving(sampler, "spread")

        # A blocked config on a serving cluster: it keeps serving, Progressing=False says why.
        sampler.phase = "blocked"
        await kube.patch(VALKEY_CLUSTERS, name, {"spec": {"configRef": catalog("missing")}}, namespace)
        await until(
            sampler,
            "blocked on the missing config",
            60,
            lambda s: str(s.get("message")).startswith("ConfigNotFound"),
        )
        for _ in range(12):  # a few seconds of a blocked cluster
            await sampler.sample()
            await asyncio.sleep(SAMPLE_INTERVAL)
        await assert_current_while_serving(sampler, "blocked", changing=None)
        blocked = await status_of(kube, namespace, name)
        progressing = find_condition(blocked["conditions"], "Progressing") or {}
        assert (progressing.get("status"), progressing.get("reason")) == ("False", "ConfigNotFound"), (
            progressing
        )
        sampler.phase = "unblocked"
        await kube.patch(VALKEY_CLUSTERS, name, {"spec": {"configRef": config}}, namespace)
        await settled(kube, namespace, name, 120)
        await assert_current_while_serving(sampler, "unblocked", changing=None)
    assert not [sample for sample in sampler.samples if sample.verdict == "Failed"]


@pytest.mark.timeout(600)
async def test_kstatus_says_failed_only_when_a_new_cluster_cannot_serve(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    """The ValkeyImage declares 9.0.1 (admission accepts it) but its binary is 9.0.0: no node
    joins, no slot is served, and the operator cannot go on by itself."""
    liar = await catalog.image("liar", "9.0.0", version="9.0.1")
    config = await catalog.config("cfg", liar)
    await create_cluster(kube, namespace, "floor", config, shards=1, replicas=0)
    async with sampling(kube, namespace, "floor", 500) as sampler:

        async def failed() -> Sample | NotYet:
            sample = await sampler.sample()
            return sample if sample.verdict == "Failed" else NotYet(sample)

        found = await eventually(failed, "kstatus Failed", 240, interval=0.5)
    status = await status_of(kube, namespace, "floor")
    assert status["state"] == "Failed" and "9.0.0" in found.message, (status.get("state"), found)
    written = [sample for sample in sampler.samples if sample.written]
    first_failed = next(index for index, sample in enumerate(written) if sample.verdict == "Failed")
    assert {sample.verdict for sample in written[:first_failed]} <= {"InProgress"}, written[:first_failed]
    assert all(sample.ready != "True" for sample in written), "Ready while no slot was served"


@pytest.mark.timeout(900)
async def test_kstatus_says_failed_while_a_restore_waits_for_the_operator_s_image_flag(
    kube_api: k8s.ApiClient, kube: Client, catalog: Catalog, namespace: str, object_store: ObjectStoreServer
) -> None:
    """An operator started without --operator-image has no image for a restore's download init
    container: the restore is held with RestoreImageUnknown, and no pass of that operator changes
    it. The cluster is Stalled=True with what to do, so kstatus says Failed (not InProgress until a
    GitOps timeout); the same operator restarted with the flag lifts it and the restore goes on."""
    without = Operator(
        kube_api,
        namespace,
        ControllerOptions(
            node_networks=LOOPBACK_NETWORKS, operator_image="", backup_endpoints=TEST_BED_ENDPOINTS
        ),
    )
    await without.start()
    try:
        await formed_cluster(kube, catalog, namespace, "source", shards=1, replicas=0)
        bucket = object_store.create_bucket()
        await storage_secret(kube, namespace, object_store)
        await start_backup(kube, namespace, "nightly", "source", destination(object_store, bucket))
        backup = await finished(kube, namespace, "nightly")
        assert backup["phase"] == "Completed", backup
        config = catalog("cfg")
        started = time.monotonic()
        await restore_cluster(kube, namespace, "restored", config, "nightly", 1, 0)
        async with sampling(kube, namespace, "restored", 600) as sampler:

            async def failed() -> Sample | NotYet:
                sample = await sampler.sample()
                return sample if sample.verdict == "Failed" else NotYet(sample)

            found = await eventually(failed, "kstatus Failed", 120, interval=0.5)
            seconds = time.monotonic() - started
            held = await status_of(kube, namespace, "restored")
            stalled = find_condition(held["conditions"], "Stalled") or {}
            print(f"[kstatus] restore held by the missing flag: Failed {seconds:.1f}s after creation")
            assert (stalled.get("status"), stalled.get("reason")) == ("True", "RestoreImageUnknown"), stalled
            assert "--operator-image" in stalled.get("message", ""), stalled
            assert "--operator-image" in found.message, found
            assert held["restore"]["phase"] == "Held", held.get("restore")
            written = [sample for sample in sampler.samples if sample.written]
            assert {sample.verdict for sample in written} <= {"InProgress", "Failed"}, written
            assert not await owned_pods(kube, namespace, "restored"), "nothing created while held"
            await without.stop()

            sampler.phase = "flag set"
            with_flag = Operator(
                kube_api,
                namespace,
                ControllerOptions(
                    node_networks=LOOPBACK_NETWORKS,
                    operator_image=OPERATOR_IMAGE,
                    backup_endpoints=TEST_BED_ENDPOINTS,
                ),
            )
            await with_flag.start()
            try:
                restored = await settled(kube, namespace, "restored", 360)
                await sampler.sample()
            finally:
                await with_flag.stop()
        assert restored["restore"]["phase"] == "Verified", restored["restore"]
        assert (find_condition(restored["conditions"], "Stalled") or {}).get("status") == "False"
        assert sampler.of("flag set")[-1].verdict == "Current", sampler.of("flag set")[-1]
    finally:
        await without.stop()
