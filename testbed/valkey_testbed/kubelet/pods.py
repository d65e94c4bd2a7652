"""A pod's life on a node: sandbox (pod IP), volumes, init and app containers, status, deletion.

One PodWorker per pod bound to one of our nodes. It writes status through
the pods/status subresource as a kubelet does: phase, podIP(s), hostIP(s),
startTime, the PodReadyToStartContainers / Initialized / ContainersReady /
Ready conditions (Ready also waits for every readinessGates condition to be
True; other writers' conditions, such as PodScheduled, DisruptionTarget or a
gate's, are never sent: a strategic merge patch by condition type, see
status_patch), and init and app containerStatuses. Status is recomputed
on every change and on every informer update, and written only when it
differs from what the API server has: whatever overwrote it (the node
lifecycle controller marking pods not ready) is corrected.

Deletion: SIGTERM (after any preStop hook) to every container, up to the
pod's deletionGracePeriodSeconds (a later, shorter delete shortens it),
SIGKILL, a final terminal status, then DELETE with gracePeriodSeconds=0 and
the pod's uid as precondition.

Node failure (`suspend`): every process is killed at once and nothing is
written any more; the pod stays as the API shows it; emptyDirs with `medium:
Memory` (tmpfs) lose their contents, disk emptyDirs keep theirs (all are
emptied when the failure loses the disk). Recovery
(`resume`) starts the same pod again in a new sandbox (a new pod IP), with
restartCount incremented, like a rebooted node.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import structlog

from valkey_operator.core.client import Client
from valkey_operator.core.resource import PODS
from valkey_operator.core.rest import ApiError
from valkey_testbed.images import ImageEntry
from valkey_testbed.kubelet import envvars, podprocs, resize, runtime
from valkey_testbed.kubelet.containers import ContainerRunner, now_rfc3339
from valkey_testbed.kubelet.ipam import IPAllocator
from valkey_testbed.kubelet.volumes import PodVolumes, VolumeError

Obj = dict[str, Any]
log = structlog.get_logger(__name__)

VOLUME_RETRY_SECONDS = 2.0
DEFAULT_GRACE = 30.0
RESIZE_PENDING = "PodResizePending"
RESIZE_IN_PROGRESS = "PodResizeInProgress"
RESIZE_CONDITIONS = (RESIZE_PENDING, RESIZE_IN_PROGRESS)
OUR_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", *RESIZE_CONDITIONS)
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
KEEP_POD_LOGS = "VALKEY_TESTBED_POD_LOGS"
"""Environment: a directory where a removed pod's container logs are kept
(`<namespace>/<pod>-<container>.log`): what a server said before its pod went."""


def status_patch(desired: Obj, current: Obj | None = None) -> Obj:
    """The status write as a strategic merge patch, as a real kubelet's status manager sends it.

    Conditions merge by type and only the kubelet's own are sent, so a condition another writer
    owns (a readiness gate's) is never written over from a stale copy; a reason or message a
    condition no longer has is removed (null); a resize condition the current status (`current`)
    has and the desired one has not is deleted; the IP lists are replaced whole.
    """
    patch = dict(desired)
    patch["conditions"] = [
        {"reason": None, "message": None, **condition}
        for condition in desired.get("conditions") or []
        if condition.get("type") in OUR_CONDITIONS
    ]
    wanted = {c.get("type") for c in desired.get("conditions") or []}
    patch["conditions"] += [
        {"type": kind, "$patch": "delete"}
        for kind in RESIZE_CONDITIONS
        if kind not in wanted and any(c.get("type") == kind for c in (current or {}).get("conditions") or [])
    ]
    for key in ("podIPs", "hostIPs"):
        if key in patch:
            patch[key] = [*patch[key], {"$patch": "replace"}]
    return patch


@attrs.define
class PodContext:
    """What every pod worker shares: the API, the IP pool, caches and settings."""

    client: Client
    kubelet_dir: Path
    ipam: IPAllocator
    configmaps: envvars.Lookup
    secrets: envvars.Lookup
    api_host: str
    api_port: int
    resolve_image: Callable[[str], ImageEntry | None]
    backoff_base: float = 10.0
    backoff_max: float = 300.0
    node_allocatable: Mapping[str, str] = attrs.field(factory=dict)


def _condition(
    current: Sequence[Obj], kind: str, ok: bool, reason: str = "", message: str = "", generation: int = 0
) -> Obj:
    status = "True" if ok else "False"
    previous = next((c for c in current if c.get("type") == kind), None)
    changed_at = previous.get("lastTransitionTime") if previous and previous.get("status") == status else None
    condition: Obj = {
        "type": kind,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": changed_at or now_rfc3339(),
    }
    if generation:  # the pod's metadata.generation this status was computed from, as kubelets 1.35+ write
        condition["observedGeneration"] = generation
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return condition


class PodWorker:
    """Drives one pod: see the module docstring."""

    def __init__(self, ctx: PodContext, node: str, host_ip: str, pod: Obj) -> None:
        self.ctx = ctx
        self.node = node
        self.host_ip = host_ip
        self.pod = pod
        meta = pod["metadata"]
        self.uid: str = meta["uid"]
        self.name: str = meta["name"]
        self.namespace: str = meta["namespace"]
        self.dir: Path = ctx.kubelet_dir / "pods" / self.uid
        self.log_dir: Path = self.dir / "logs"
        self.volumes = PodVolumes(
            self.dir / "volumes", ctx.client, ctx.configmaps, ctx.secrets, ctx.node_allocatable
        )
        spec = pod["spec"]
        policy = spec.get("restartPolicy", "Always")
        self.restart_policy = policy
        self.init_runners = [
            ContainerRunner(
                self,
                c,
                init=True,
                restart_policy=c.get("restartPolicy") or ("Never" if policy == "Never" else "OnFailure"),
            )
            for c in spec.get("initContainers") or []
        ]
        self.runners = [
            ContainerRunner(self, c, init=False, restart_policy=policy) for c in spec["containers"]
        ]
        self.allocation: resize.Allocation = resize.allocation_of(pod)
        """What the kubelet admitted per container; a resize changes it once admitted (resize.py)."""
        self.resize_pending: Obj | None = None
        self.resize_in_progress: Obj | None = None
        self._actuate_after_write = False
        self.ip: str | None = None
        self.start_time: str | None = None
        self.initialized = not self.init_runners
        self.failed_init = False
        self.volume_message = ""
        self.suspended = False
        self.terminating = False
        self.terminated = False
        self.gone = False
        self._tasks: list[asyncio.Task[Any]] = []
        self._main: asyncio.Task[None] | None = None
        self._status: asyncio.Task[None] | None = None
        self._terminate: asyncio.Task[None] | None = None
        self._dirty = asyncio.Event()
        self._term_started = 0.0
        self._grace = DEFAULT_GRACE
        self._log = log.bind(pod=f"{self.namespace}/{self.name}", node=node)
        first = "PodInitializing" if self.init_runners else "ContainerCreating"
        for runner in self.runners:
            runner.state = {"waiting": {"reason": first}}

    # -- identity ----------------------------------------------------------------------

    def describe(self) -> str:
        return f"{self.name}_{self.namespace}({self.uid})"

    @property
    def hostname(self) -> str:
        return str(self.pod["spec"].get("hostname") or self.name)[:63]

    @property
    def all_runners(self) -> list[ContainerRunner]:
        return [*self.init_runners, *self.runners]

    # -- start / events ----------------------------------------------------------------

    def start(self) -> None:
        """Run the pod (unless its node is down); idempotent."""
        if self.suspended or self.gone or (self._main and not self._main.done()):
            return
        loop = asyncio.get_running_loop()
        if self._status is None or self._status.done():
            self._status = loop.create_task(self._status_loop(), name=f"status:{self.name}")
        if self.pod["metadata"].get("deletionTimestamp"):
            self.begin_termination()
            return
        self._main = loop.create_task(self._run(), name=f"pod:{self.namespace}/{self.name}")

    def update(self, pod: Obj) -> None:
        """A newer copy of the pod from the informer."""
        self.pod = pod
        if self.suspended or self.gone:
            return
        if pod["metadata"].get("deletionTimestamp"):
            self.begin_termination()
        self.changed()

    def changed(self) -> None:
        self._dirty.set()

    # -- running -----------------------------------------------------------------------

    def _sandbox(self) -> None:
        if self.pod["spec"].get("hostNetwork"):
            self.ip = self.host_ip
        else:
            self.ip = self.ctx.ipam.allocate()
        self.start_time = self.start_time or now_rfc3339()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o755)
        self.log_dir.mkdir(exist_ok=True)
        self._write_hosts()
        self._log.info("pod_sandbox_ready", ip=self.ip)
        self.changed()

    def _write_hosts(self) -> None:
        """The pod's /etc/hosts, as a kubelet writes one, except that `localhost` is the pod IP.

        Pods share the host's network here, so the host's loopback is not the pod's own: with
        `localhost` resolving to the pod IP, a probe or sidecar dialling `localhost:PORT` reaches
        this pod's listener (bound to `$(POD_IP)`), still on 127.0.0.0/8. A literal 127.0.0.1 or
        ::1 still reaches the host. hostNetwork pods keep the host's loopback, as on a real node.
        """
        spec = self.pod["spec"]
        names = [self.hostname]
        if spec.get("subdomain"):
            names.insert(0, f"{self.hostname}.{spec['subdomain']}.{self.namespace}.svc.cluster.local")
        if spec.get("hostNetwork") or not self.ip:
            loopback = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        else:
            loopback = [f"{self.ip}\tlocalhost", "::1\tip6-localhost ip6-loopback"]
        lines = [
            "# Kubernetes-managed hosts file (test-bed kubelet).",
            *loopback,
            f"{self.ip}\t{' '.join(names)}",
        ]
        for alias in spec.get("hostAliases") or []:
            lines.append(f"{alias['ip']}\t{' '.join(alias.get('hostnames') or [])}")
        (self.dir / "etc-hosts").write_text("\n".join(lines) + "\n")
        (self.dir / "etc-hosts").chmod(0o644)

    async def _run(self) -> None:
        try:
            self._sandbox()
            while True:
                try:
                    await self.volumes.setup(self.pod, self.ip or "", self.host_ip)
                    self.volume_message = ""
                    break
                except (VolumeError, OSError) as exc:
                    self.volume_message = f"MountVolume.SetUp failed: {exc}"
                    self._log.info("volume_setup_waiting", error=str(exc))
                    self.changed()
                    await asyncio.sleep(VOLUME_RETRY_SECONDS)
            self.changed()
            sidecars: list[ContainerRunner] = []
            for runner in self.init_runners:
                task = self._spawn(runner)
                if runner.restart_policy == "Always":  # a native sidecar: started, not awaited
                    sidecars.append(runner)
                    waiter = asyncio.ensure_future(runner.started_event.wait())
                    await asyncio.wait({waiter, task}, return_when=asyncio.FIRST_COMPLETED)
                    waiter.cancel()
                    continue
                code = await task
                if code != 0:
                    if code is not None:
                        self.failed_init = True
                        self.changed()
                    return
            self.initialized = True
            for runner in self.runners:
                runner.set_waiting("ContainerCreating")
            await asyncio.gather(*(self._spawn(runner) for runner in self.runners))
            for sidecar in sidecars:  # the app containers are done: sidecars go too
                await sidecar.stop(lambda: DEFAULT_GRACE)
            self.changed()
        except asyncio.CancelledError:
            raise
        except Exception:
            self._log.exception("pod_worker_failed")

    def _spawn(self, runner: ContainerRunner) -> asyncio.Task[int | None]:
        task = asyncio.get_running_loop().create_task(
            runner.run(), name=f"container:{self.name}/{runner.name}"
        )
        self._tasks.append(task)
        return task

    def container_env(self, spec: Obj, image: ImageEntry) -> dict[str, str]:
        declared = envvars.container_env(
            self.pod,
            spec,
            pod_ip=self.ip or "",
            host_ip=self.host_ip,
            base=envvars.service_env(self.ctx.api_host, self.ctx.api_port),
            configmaps=self.ctx.configmaps,
            secrets=self.ctx.secrets,
            node_allocatable=self.ctx.node_allocatable,
        )
        env = {"HOSTNAME": self.hostname, "HOME": "/", **image.env, **declared}
        if "PATH" not in declared and image.oci is None:
            env["PATH"] = f"{image.bin_dir}:{image.env.get('PATH', runtime.DEFAULT_PATH)}"
        return env

    def mounts(self, spec: Obj, env: Mapping[str, str]) -> list[runtime.Mount]:
        """The container's volumeMounts as bind mounts, plus the pod's /etc/hosts."""
        volumes = {v["name"]: v for v in self.pod["spec"].get("volumes") or []}
        mounts: list[runtime.Mount] = []
        for mount in spec.get("volumeMounts") or []:
            volume = volumes.get(mount["name"])
            if volume is None:
                raise runtime.ConfigError(f"volume {mount['name']!r} not found")
            if "hostPath" in volume:
                source = Path(volume["hostPath"]["path"])
                if volume["hostPath"].get("type") == "DirectoryOrCreate":
                    source.mkdir(parents=True, exist_ok=True)
            else:
                source = self.volumes.path(mount["name"])
            claim_read_only = bool((volume.get("persistentVolumeClaim") or {}).get("readOnly"))
            sub_path = mount.get("subPath") or envvars.expand(mount.get("subPathExpr", ""), env)
            if sub_path:
                source = source / sub_path
                if "emptyDir" in volume:
                    source.mkdir(parents=True, exist_ok=True)
                    source.chmod(0o777)
                elif "persistentVolumeClaim" in volume and not source.exists():
                    # As the kubelet's SafeMakeDir: missing subPath directories get the volume root's mode.
                    root_mode = self.volumes.path(mount["name"]).stat().st_mode & 0o7777
                    source.mkdir(parents=True)
                    source.chmod(root_mode)
                elif not source.exists():
                    raise runtime.ConfigError(
                        f"subPath {sub_path!r} of volume {mount['name']!r} does not exist"
                    )
                source = source.resolve()
            read_only = bool(mount.get("readOnly")) or claim_read_only
            mounts.append(runtime.Mount(source, mount["mountPath"], read_only))
        if not any(m.target == "/etc/hosts" for m in mounts):
            mounts.append(runtime.Mount(self.dir / "etc-hosts", "/etc/hosts", False))
        runtime.make_nested_mount_points(mounts)
        return mounts

    def record_process(self, runner: ContainerRunner) -> None:
        if runner.process is not None:
            key = f"{self.uid}.{runner.name}"
            podprocs.write_record(self.ctx.kubelet_dir, key, runner.process.record(key))

    def forget_process(self, runner: ContainerRunner) -> None:
        podprocs.remove_record(self.ctx.kubelet_dir, f"{self.uid}.{runner.name}")

    async def refresh_volumes(self) -> None:
        """Re-render configMap/secret/projected/downwardAPI volumes (after the sync delay)."""
        if self.suspended or self.gone or self.ip is None:
            return
        try:
            if await self.volumes.refresh(self.pod, self.ip, self.host_ip):
                self._log.info("volumes_refreshed")
        except OSError as exc:
            self._log.warning("volume_refresh_failed", error=str(exc))

    async def exec(self, container: str, argv: Sequence[str], timeout: float) -> tuple[int, bytes]:
        """Run argv inside a running container, as its user (kubectl exec, minus the API)."""
        runner = next((r for r in self.all_runners if r.name == container), None)
        if runner is None or runner.process is None or not runner.process.running or runner.identity is None:
            raise LookupError(f"container {container!r} of {self.namespace}/{self.name} is not running")
        return await runtime.exec_in(runner.process, argv, runner.env, runner.identity, timeout)

    # -- in-place resize (resize.py) ----------------------------------------------------

    @property
    def generation(self) -> int:
        return int(self.pod["metadata"].get("generation") or 0)

    @property
    def can_resize(self) -> bool:
        """The kubelet evaluates resizes of a pod it runs: not on a failed node, not once it stops."""
        return not (
            self.suspended or self.gone or self.terminating or self.phase() in ("Succeeded", "Failed")
        )

    def requests(self) -> dict[str, Any]:
        """The pod's allocated requests, as counted against its node."""
        return resize.pod_requests(self.pod, self.allocation)

    def allocate(self, allocation: resize.Allocation) -> None:
        """The resize was admitted: allocate it, report PodResizeInProgress, then actuate it (after
        the status with the new allocation is written, as a kubelet writes it before the runtime
        resizes the containers)."""
        self.allocation = allocation
        for runner in self.all_runners:
            runner.spec = {**runner.spec, "resources": allocation.get(runner.name) or {}}
        self.resize_pending = None
        now = now_rfc3339()
        self.resize_in_progress = {
            "type": RESIZE_IN_PROGRESS,
            "status": "True",
            "observedGeneration": self.generation,
            "lastProbeTime": now,
            "lastTransitionTime": now,
        }
        self._actuate_after_write = True
        self._log.info("resize_allocated", generation=self.generation)
        self.changed()

    def defer_resize(self, verdict: resize.Verdict) -> None:
        """The resize is not admitted (Infeasible or Deferred): PodResizePending, old allocation kept."""
        old = self.resize_pending
        if old and (old.get("reason"), old.get("message"), old.get("observedGeneration")) == (
            verdict.reason,
            verdict.message,
            self.generation,
        ):
            return
        now = now_rfc3339()
        self.resize_pending = {
            "type": RESIZE_PENDING,
            "status": "True",
            "observedGeneration": self.generation,
            "lastProbeTime": now,
            "lastTransitionTime": old["lastTransitionTime"]
            if old and old.get("reason") == verdict.reason
            else now,
            "reason": verdict.reason,
            "message": verdict.message,
        }
        self._log.info("resize_pending", reason=verdict.reason, message=verdict.message)
        self.changed()

    def resize_settled(self) -> None:
        """The spec asks for what is allocated: no resize is pending."""
        if self.resize_pending is not None:
            self.resize_pending = None
            self.changed()

    def _actuate(self) -> None:
        """Bring each running container to its allocation: in place, or by a restart where the
        container's resizePolicy asks for one. Nothing is enforced here (no cgroups): in place only
        changes what the container reports."""
        for runner in self.all_runners:
            target = self.allocation.get(runner.name) or {}
            if not runner.running or resize.same(runner.actuated, target):
                continue
            if resize.needs_restart(runner.spec, runner.actuated, target):
                self._log.info("resize_restarts_container", container=runner.name)
                runner.restart_for_resize()
            else:
                runner.actuated = target
        self.changed()

    def _resizing(self) -> bool:
        """Whether a running container still runs with other resources than allocated."""
        return any(
            r.resize_restart or (r.running and not resize.same(r.actuated, self.allocation.get(r.name) or {}))
            for r in self.all_runners
        )

    def _resize_conditions(self) -> list[Obj]:
        if self.resize_in_progress is not None and not self._actuate_after_write and not self._resizing():
            self.resize_in_progress = None
            self._log.info("resize_actuated", generation=self.generation)
        return [c for c in (self.resize_pending, self.resize_in_progress) if c is not None]

    # -- deletion ----------------------------------------------------------------------

    def begin_termination(self) -> None:
        grace = self.pod["metadata"].get("deletionGracePeriodSeconds")
        grace = DEFAULT_GRACE if grace is None else float(grace)
        if self.terminating:
            self._grace = min(self._grace, grace)  # a second, shorter delete shortens the wait
            return
        self.terminating = True
        self._grace = grace
        self._term_started = time.monotonic()
        self._terminate = asyncio.get_running_loop().create_task(self._terminate_gracefully())

    def _grace_left(self) -> float:
        return self._term_started + self._grace - time.monotonic()

    async def _terminate_gracefully(self) -> None:
        self._log.info("pod_terminating", grace=self._grace)
        sidecars = [r for r in self.init_runners if r.restart_policy == "Always"]
        others = [r for r in self.all_runners if r not in sidecars]
        await asyncio.gather(*(r.stop(self._grace_left) for r in others))
        await asyncio.gather(*(r.stop(self._grace_left) for r in sidecars))
        self.terminated = True
        if self._main is not None:
            self._main.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._main
        self._release_ip()
        try:
            await self._write_status()
        except ApiError as exc:
            if not exc.not_found:
                self._log.warning("final_status_failed", error=str(exc))
        with contextlib.suppress(ApiError):
            await self.ctx.client.delete(
                PODS, self.name, self.namespace, uid=self.uid, grace_period_seconds=0
            )
        self._log.info("pod_deleted")

    async def _kill_all(self) -> None:
        for runner in self.all_runners:
            runner.kill()
        for runner in self.all_runners:
            if runner.process is not None:
                await runner.process.exited
        tasks = [t for t in (self._main, self._terminate, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()

    async def forget(self) -> None:
        """The pod object is gone: kill what is left and remove the pod's directory."""
        self.gone = True
        await self._kill_all()
        await self._stop_status_writer()
        self._release_ip()
        for runner in self.all_runners:
            self.forget_process(runner)
        if kept := os.environ.get(KEEP_POD_LOGS):
            await asyncio.to_thread(keep_logs, self.log_dir, Path(kept) / self.namespace, self.name)
        await asyncio.to_thread(shutil.rmtree, self.dir, ignore_errors=True)  # emptyDirs may be large

    async def _stop_status_writer(self) -> None:
        if self._status is not None:
            self._status.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._status

    def _release_ip(self) -> None:
        if self.ip and self.ip != self.host_ip:
            self.ctx.ipam.release(self.ip)

    async def shutdown(self, grace: float) -> None:
        """The kubelet stops (test bed going down): stop every container within grace, write nothing."""
        self.suspended = True
        deadline = time.monotonic() + grace
        await asyncio.gather(*(r.stop(lambda: deadline - time.monotonic()) for r in self.all_runners))
        await self._kill_all()
        await self._stop_status_writer()

    # -- node failure and recovery -----------------------------------------------------

    def adopt_previous_status(self) -> None:
        """A pod that already ran (a restarted kubelet): continue its restart counts."""
        status = self.pod.get("status") or {}
        previous = {
            s["name"]: s
            for s in [*(status.get("containerStatuses") or []), *(status.get("initContainerStatuses") or [])]
        }
        for runner in self.all_runners:
            before = previous.get(runner.name)
            if before and runner.name in self.allocation and before.get("allocatedResources"):
                # A restarted kubelet: what it had allocated (its checkpoint), not a resize not yet admitted.
                allocated = {"requests": dict(before["allocatedResources"])}
                limits = (before.get("resources") or {}).get("limits") or self.allocation[runner.name].get(
                    "limits"
                )
                if limits:
                    allocated["limits"] = dict(limits)
                self.allocation[runner.name] = allocated
                runner.spec = {**runner.spec, "resources": allocated}
            if before and (
                "running" in (before.get("state") or {}) or "terminated" in (before.get("state") or {})
            ):
                runner.restart_count = int(before.get("restartCount", 0))
                runner.state = before["state"]
                runner.mark_restarted_after_node_failure()

    async def suspend(self, lose_disk: bool = False) -> None:
        """The node died: kill every process now and stop writing status (the pod stays in the API).

        Memory emptyDirs go with the node's memory; disk emptyDirs stay (volumes.drop_memory), unless
        the disk is lost too (volumes.drop_disk).
        """
        self.suspended = True
        await self._kill_all()
        await self._stop_status_writer()
        drop = self.volumes.drop_disk if lose_disk else self.volumes.drop_memory
        dropped = await asyncio.to_thread(drop, self.pod)
        if dropped:
            self._log.info("disk_volumes_lost" if lose_disk else "memory_volumes_lost", volumes=dropped)
        self._release_ip()
        self.ip = None
        self.terminating = False
        self.terminated = False

    def resume(self) -> None:
        """The node is back: the same pod in a new sandbox (new IP); disk emptyDirs as they were."""
        if not self.suspended:
            return
        self.suspended = False
        self.initialized = not self.init_runners
        for runner in self.all_runners:
            runner.mark_restarted_after_node_failure()
        self.start()

    # -- status ------------------------------------------------------------------------

    async def _status_loop(self) -> None:
        while True:
            await self._dirty.wait()
            await asyncio.sleep(0.05)  # coalesce bursts of changes into one write
            self._dirty.clear()
            if self.suspended or self.gone:
                continue
            try:
                await self._write_status()
                if self._actuate_after_write:
                    self._actuate_after_write = False
                    self._actuate()
            except ApiError as exc:
                if exc.not_found:
                    return
                self._log.warning("status_write_failed", error=str(exc))
                await asyncio.sleep(1.0)
                self._dirty.set()
            except Exception as exc:
                self._log.warning("status_write_failed", error=repr(exc))
                await asyncio.sleep(1.0)
                self._dirty.set()

    async def _write_status(self) -> None:
        desired = self.desired_status()
        current = self.pod.get("status") or {}
        if all(current.get(key) == value for key, value in desired.items()):
            return
        written_over = self.pod
        updated = await self.ctx.client.patch_status(
            PODS,
            self.name,
            {"status": status_patch(desired, current)},
            self.namespace,
            patch_type=STRATEGIC_MERGE_PATCH,
        )
        # The reply is the newest copy only if the watch brought none meanwhile (update() replaces
        # self.pod): one that did may carry a later write (the node lifecycle controller marking the
        # pod not ready), which the reply must not hide from the next comparison.
        if updated.get("metadata", {}).get("uid") == self.uid and self.pod is written_over:
            self.pod = {**self.pod, "status": updated.get("status", {})}

    def phase(self) -> str:
        if self.failed_init and self.restart_policy == "Never":
            return "Failed"
        if not self.initialized:
            return "Pending"
        running = waiting = stopped = succeeded = 0
        for runner in self.runners:
            if "running" in runner.state or runner.resize_restart:
                running += 1
            elif "terminated" in runner.state:
                stopped += 1
                succeeded += runner.state["terminated"].get("exitCode") == 0
            elif runner.last_state.get("terminated") and self.restart_policy != "Never":
                stopped += 1  # backing off before its restart: the pod still runs (Running)
            else:
                # Waiting to start; under Never also a container that runs again after its node came
                # back: a real kubelet never reports such a pod Failed and then runs it again.
                waiting += 1
        if self.terminated:  # deleted, and every container has stopped
            return "Succeeded" if waiting == 0 and stopped == succeeded else "Failed"
        if waiting:
            return "Pending"
        if running:
            return "Running"
        if stopped:
            if self.restart_policy == "Always":
                return "Running"
            if stopped == succeeded:
                return "Succeeded"
            if self.restart_policy == "Never":
                return "Failed"
            return "Running"
        return "Pending"

    def desired_status(self) -> Obj:
        current = self.pod.get("status") or {}
        conditions: list[Obj] = current.get("conditions") or []
        phase = self.phase()
        terminal = phase in ("Succeeded", "Failed")
        unready = [r.name for r in self.runners if not r.ready]
        uninitialized = [r.name for r in self.init_runners if "terminated" not in r.state and not r.started]
        containers_ready = not unready and self.initialized
        gates = [g["conditionType"] for g in self.pod["spec"].get("readinessGates") or []]
        gates_ok = all(
            any(c.get("type") == gate and c.get("status") == "True" for c in conditions) for gate in gates
        )
        not_ready_message = f"containers with unready status: [{' '.join(unready)}]" if unready else ""
        generation = self.generation
        ours = [
            _condition(
                conditions,
                "PodReadyToStartContainers",
                self.ip is not None and not terminal,
                generation=generation,
            ),
            _condition(
                conditions,
                "Initialized",
                self.initialized,
                "" if self.initialized else "ContainersNotInitialized",
                "" if self.initialized else f"containers with incomplete status: [{' '.join(uninitialized)}]",
                generation,
            ),
            _condition(
                conditions,
                "Ready",
                containers_ready and gates_ok and not terminal,
                "PodCompleted" if terminal else ("" if containers_ready else "ContainersNotReady"),
                "" if terminal else not_ready_message,
                generation,
            ),
            _condition(
                conditions,
                "ContainersReady",
                containers_ready and not terminal,
                "PodCompleted" if terminal else ("" if containers_ready else "ContainersNotReady"),
                "" if terminal else not_ready_message,
                generation,
            ),
            *self._resize_conditions(),
        ]
        others = [c for c in conditions if c.get("type") not in OUR_CONDITIONS]
        status: Obj = {
            "phase": phase,
            "conditions": ours + others,
            "observedGeneration": generation or None,
            "hostIP": self.host_ip,
            "hostIPs": [{"ip": self.host_ip}],
            "startTime": current.get("startTime") or self.start_time or now_rfc3339(),
            "containerStatuses": [r.status() for r in self.runners],
        }
        if self.init_runners:
            status["initContainerStatuses"] = [r.status() for r in self.init_runners]
        if self.ip:
            status["podIP"] = self.ip
            status["podIPs"] = [{"ip": self.ip}]
        # A volume that cannot be set up yet (a claim not bound yet) is explained here, where a real
        # kubelet posts a FailedMount Event; None clears an old explanation.
        status["message"] = self.volume_message or None
        return status

    def snapshot(self) -> Obj:
        """What the control channel reports about this pod (pids, logs, IP)."""
        return {
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
            "node": self.node,
            "ip": self.ip,
            "phase": self.phase(),
            "suspended": self.suspended,
            "containers": [
                {
                    "name": r.name,
                    "init": r.init,
                    "pid": r.process.main_pid if r.process is not None and r.process.running else None,
                    "log": str(r.log_file),
                    "restartCount": r.restart_count,
                }
                for r in self.all_runners
            ],
        }


def keep_logs(log_dir: Path, target: Path, pod: str) -> None:
    """Copy each container log of a pod being removed into target."""
    if not log_dir.is_dir():
        return
    target.mkdir(parents=True, exist_ok=True)
    for log in log_dir.glob("*.log"):
        shutil.copyfile(log, target / f"{pod}-{log.name}")
