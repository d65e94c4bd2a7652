"""One container's life: image "pull", start, probes, exit, restart with backoff, stop.

The states and reasons are the kubelet's, so what the API shows is what a
real cluster would show: waiting ContainerCreating / PodInitializing /
ErrImagePull / ImagePullBackOff / CreateContainerConfigError /
CrashLoopBackOff, running, terminated Completed / Error / StartError, with
lastState and restartCount. Restarts back off like the kubelet: the first is
immediate, then base, 2*base, ... capped at max, and the backoff resets after
a container ran for 2*max.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from valkey_testbed import ocistore
from valkey_testbed.images import ImageEntry
from valkey_testbed.kubelet import envvars, runc, runtime
from valkey_testbed.kubelet.probes import Probe

if TYPE_CHECKING:
    from valkey_testbed.kubelet.pods import PodWorker

Obj = dict[str, Any]
log = structlog.get_logger(__name__)

CONFIG_RETRY_SECONDS = 2.0


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ContainerRunner:
    """Runs one container of a pod until its restart policy says it is done."""

    def __init__(self, worker: PodWorker, spec: Obj, *, init: bool, restart_policy: str) -> None:
        self.worker = worker
        self.spec = spec
        self.name: str = spec["name"]
        self.init = init
        self.restart_policy = restart_policy
        self.restart_count = 0
        self.state: Obj = {"waiting": {"reason": "PodInitializing" if not init else "ContainerCreating"}}
        self.last_state: Obj = {}
        self.ready = False
        self.started = False
        self.process: runtime.ContainerProcess | None = None
        self.env: dict[str, str] = {}
        self.identity: runtime.Identity | None = None
        self.mounts: list[runtime.Mount] = []
        self.security: runc.Security | None = None
        self.image: ImageEntry | None = None
        self.exit_code: int | None = None
        self.stopping = False
        self._stop = asyncio.Event()
        self._backoff_step = 0
        self._probes: list[asyncio.Task[None]] = []
        self.started_event = asyncio.Event()
        self.actuated: Obj | None = None
        """The resources the running process was started with or resized to (status.resources)."""
        self.resize_restart = False
        """A resize with resizePolicy RestartContainer stopped the process: start it again."""
        self._resize_kill: asyncio.Task[None] | None = None

    # -- status ------------------------------------------------------------------

    def status(self) -> Obj:
        status: Obj = {
            "name": self.name,
            "image": self.spec.get("image", ""),
            "imageID": self._image_id(),
            "ready": self.ready,
            "restartCount": self.restart_count,
            "started": self.started,
            "state": self.state,
            "lastState": self.last_state,
        }
        allocated = self.worker.allocation.get(self.name) or {}
        if allocated.get("requests"):
            status["allocatedResources"] = dict(allocated["requests"])
        if self.running and self.actuated:
            status["resources"] = {kind: dict(values) for kind, values in self.actuated.items()}
        if isinstance(self.process, runc.RuncProcess):
            status["containerID"] = f"runc://{self.process.container_id}"
        elif self.process is not None:
            status["containerID"] = f"testbed://{self.process.pid}"
        return status

    def _image_id(self) -> str:
        if self.image is None:
            return ""
        if self.image.oci is not None:
            return f"{ocistore.repository(self.image.reference)}@{self.image.oci.digest}"
        return f"testbed://{self.image.reference}"

    def _set_state(self, state: Obj) -> None:
        self.state = state
        self.worker.changed()

    def set_waiting(self, reason: str, message: str = "") -> None:
        waiting: Obj = {"reason": reason}
        if message:
            waiting["message"] = message
        self._set_state({"waiting": waiting})

    # -- life cycle ----------------------------------------------------------------

    async def run(self) -> int | None:
        """Start, watch, restart per policy; returns the final exit code (None if stopped early)."""
        while not self.stopping:
            code = await self._run_once()
            if code is None or self.stopping:
                return code
            if self.resize_restart:  # whatever the restart policy, as the kubelet's resize does
                self.restart_count += 1  # (the flag stays up until the new process starts)
                continue
            if self.restart_policy == "Never" or (self.restart_policy == "OnFailure" and code == 0):
                return code
            delay = self._next_backoff()
            if delay > 0:
                self.set_waiting(
                    "CrashLoopBackOff",
                    f"back-off {delay:g}s restarting failed "
                    f"container={self.name} pod={self.worker.describe()}",
                )
                if await self._sleep(delay):
                    return code
            self.restart_count += 1
        return self.exit_code

    def _next_backoff(self) -> float:
        base, maximum = self.worker.ctx.backoff_base, self.worker.ctx.backoff_max
        step = self._backoff_step
        self._backoff_step += 1
        return 0.0 if step == 0 else min(base * 2 ** (step - 1), maximum)

    async def _sleep(self, seconds: float) -> bool:
        """Sleep unless stopped first; True if stopped."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)
        return self._stop.is_set()

    async def _prepare(self) -> list[str] | None:
        """Image, environment, identity and command; None while waiting (stopped)."""
        pull_failures = 0
        while not self.stopping:
            self.image = self.worker.ctx.resolve_image(self.spec.get("image", ""))
            if self.image is not None:
                break
            pull_failures += 1
            message = (
                f'Failed to pull image "{self.spec.get("image", "")}": not in the test-bed image catalog'
            )
            self.set_waiting("ErrImagePull", message)
            if await self._sleep(min(2.0, self.worker.ctx.backoff_base)):
                return None
            delay = min(self.worker.ctx.backoff_base * 2 ** (pull_failures - 1), self.worker.ctx.backoff_max)
            self.set_waiting("ImagePullBackOff", f'Back-off pulling image "{self.spec.get("image", "")}"')
            if await self._sleep(delay):
                return None
        while not self.stopping and self.image is not None:
            try:
                self.env = self.worker.container_env(self.spec, self.image)
                user, group = self.image.user, self.image.group
                if self.image.oci is not None:
                    user, group = runc.image_user(self.image.oci)
                    self.security = runc.security(self.worker.pod, self.spec)
                self.identity = runtime.identity(
                    self.worker.pod,
                    self.spec,
                    user,
                    group,
                    root_after_check=self.image.run_as_root_after_check,
                )
                self.mounts = self.worker.mounts(self.spec, self.env)
                return self.command(self.image, self.env)
            except (envvars.EnvError, runtime.ConfigError) as exc:
                self.set_waiting("CreateContainerConfigError", str(exc))
                if await self._sleep(CONFIG_RETRY_SECONDS):
                    return None
        return None

    def command(self, image: ImageEntry, env: Mapping[str, str]) -> list[str]:
        """command + args as Kubernetes combines them with the image's ENTRYPOINT and CMD."""
        command = list(self.spec.get("command") or image.entrypoint)
        if self.spec.get("command"):
            args = list(self.spec.get("args") or [])
        else:
            args = list(self.spec.get("args") or image.cmd)
        return [envvars.expand(part, env) for part in [*command, *args]]

    async def _run_once(self) -> int | None:
        command = await self._prepare()
        if command is None or self.stopping or self.identity is None:
            return None
        started_at = now_rfc3339()
        try:
            if self.image is not None and self.image.oci is not None:
                self.process = await self._start_oci(self.image, command)
            else:
                argv = runtime.resolve_command(command, self.env.get("PATH", runtime.DEFAULT_PATH))
                host_files = [Path(argv[0]), *([self.image.bin_dir] if self.image is not None else [])]
                runtime.check_mounts_keep(host_files, self.mounts)
                full = runtime.launch_argv(
                    argv,
                    self.identity,
                    self.mounts,
                    hostname=self.worker.hostname,
                    working_dir=self.spec.get("workingDir") or "/",
                )
                self.process = runtime.ContainerProcess.start(full, self.env, self.log_file)
        except (runtime.StartError, OSError) as exc:
            self.resize_restart = False
            self._terminated(128, "StartError", started_at, str(exc))
            return 128
        self.resize_restart = False
        self.worker.record_process(self)
        self.actuated = self.worker.allocation.get(self.name)
        ran_since = time.monotonic()
        self.exit_code = None
        self._set_state({"running": {"startedAt": started_at}})
        self._start_probes()
        code = await self.process.exited
        self._stop_probes()
        self.worker.forget_process(self)
        if time.monotonic() - ran_since >= 2 * self.worker.ctx.backoff_max:
            self._backoff_step = 0
        self._terminated(code, "Completed" if code == 0 else "Error", started_at)
        return code

    async def _start_oci(self, image: ImageEntry, command: list[str]) -> runc.RuncProcess:
        assert image.oci is not None and self.identity is not None
        bundle = runc.Bundle(self.worker.dir / "containers" / f"{self.name}-{self.restart_count}", image.oci)
        config = runc.runtime_config(
            argv=command,
            env=self.env,
            who=self.identity,
            mounts=self.mounts,
            secure=self.security or runc.Security(),
            hostname=self.worker.hostname,
            working_dir=self.spec.get("workingDir") or image.working_dir,
            rootfs=bundle.rootfs,
        )
        container_id = f"{self.worker.uid}-{self.name}-{self.restart_count}"
        return await runc.RuncProcess.launch(
            state=self.worker.ctx.kubelet_dir / "runc",
            container_id=container_id,
            bundle=bundle,
            config=config,
            log_file=self.log_file,
        )

    def _terminated(self, code: int, reason: str, started_at: str, message: str = "") -> None:
        self.exit_code = code
        self.ready = False
        self.started = False
        terminated: Obj = {
            "exitCode": code,
            "reason": reason,
            "startedAt": started_at,
            "finishedAt": now_rfc3339(),
            "containerID": f"testbed://{self.process.pid}" if self.process else "",
        }
        if not message and code != 0 and self.spec.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            message = self._log_tail()
        if message:
            terminated["message"] = message
        if code > 128 and reason == "Error":
            terminated["signal"] = code - 128
        self.last_state = {"terminated": terminated}
        self._set_state({"terminated": terminated})

    def _log_tail(self, lines: int = 80, limit: int = 2048) -> str:
        """What a kubelet reports for FallbackToLogsOnError: the end of the container's log."""
        try:
            text = self.log_file.read_bytes()[-64 * 1024 :].decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])[-limit:]

    def mark_restarted_after_node_failure(self) -> None:
        """A node came back: the container runs again as a new instance (restartCount + 1)."""
        if self.state.get("running") or self.state.get("terminated"):
            running = self.state.get("running") or self.state["terminated"]
            self.last_state = {
                "terminated": {
                    "exitCode": 137,
                    "reason": "Error",
                    "message": "the node stopped",
                    "startedAt": running.get("startedAt", now_rfc3339()),
                    "finishedAt": now_rfc3339(),
                }
            }
            self.restart_count += 1
        self.ready = False
        self.started = False
        self.stopping = False
        self._stop = asyncio.Event()
        self.started_event = asyncio.Event()
        self.set_waiting("ContainerCreating")

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.running and "running" in self.state

    def restart_for_resize(self) -> None:
        """Stop the process as the kubelet kills a container (preStop, SIGTERM, the pod's grace
        period, SIGKILL) and start it again with its new resources, restartCount + 1."""
        process = self.process
        if process is None or not process.running or self.resize_restart:
            return
        self.resize_restart = True
        grace = float(self.worker.pod["spec"].get("terminationGracePeriodSeconds", 30))
        deadline = time.monotonic() + grace
        task = asyncio.get_running_loop().create_task(
            self._terminate(process, lambda: deadline - time.monotonic())
        )
        self._resize_kill = task

    @property
    def log_file(self) -> Path:
        return self.worker.log_dir / f"{self.name}.log"

    # -- probes ----------------------------------------------------------------------

    def _start_probes(self) -> None:
        process = self.process
        assert process is not None and self.identity is not None
        identity, env = self.identity, dict(self.env)

        async def exec_(argv: Sequence[str], timeout: float) -> tuple[int, bytes]:
            return await runtime.exec_in(process, argv, env, identity, timeout)

        specs = {kind: self.spec.get(f"{kind}Probe") for kind in ("startup", "readiness", "liveness")}
        if not specs["startup"]:
            self._on_started()
        self.worker.changed()
        probes = [
            Probe(kind, spec, self.spec, self.worker.ip or "", exec_) for kind, spec in specs.items() if spec
        ]
        startup = next((p for p in probes if p.kind == "startup"), None)
        others = [p for p in probes if p.kind != "startup"]
        loop = asyncio.get_running_loop()
        if startup is not None:
            self._probes.append(loop.create_task(self._probe_startup(startup, others)))
        else:
            self._probes += [loop.create_task(p.loop(self._on_verdict)) for p in others]

    def _on_started(self) -> None:
        self.started = True
        self.started_event.set()
        if not self.spec.get("readinessProbe"):
            self.ready = not self.init or self.restart_policy == "Always"

    async def _probe_startup(self, startup: Probe, others: list[Probe]) -> None:
        await asyncio.sleep(startup.initial_delay)
        while True:
            verdict = startup.observe(await startup.run_once())
            if verdict is True:
                self._on_started()
                self.worker.changed()
                loop = asyncio.get_running_loop()
                self._probes += [loop.create_task(p.loop(self._on_verdict)) for p in others]
                return
            if verdict is False:
                self._on_verdict(startup, False)
                return
            await asyncio.sleep(startup.period)

    def _on_verdict(self, probe: Probe, verdict: bool) -> None:
        if probe.kind == "readiness":
            self.ready = verdict and self.started
            self.worker.changed()
        elif not verdict:  # liveness or startup failed: restart the container
            log.info(
                "probe_failed_killing", pod=self.worker.describe(), container=self.name, probe=probe.kind
            )
            grace = probe.spec.get("terminationGracePeriodSeconds")
            if grace is None:
                grace = self.worker.pod["spec"].get("terminationGracePeriodSeconds", 30)
            if self.process is not None:
                asyncio.get_running_loop().create_task(self.process.stop(float(grace)))

    def _stop_probes(self) -> None:
        for task in self._probes:
            task.cancel()
        self._probes.clear()

    # -- stopping ----------------------------------------------------------------------

    async def stop(self, grace: Callable[[], float]) -> None:
        """Graceful stop, no restart: preStop hook, SIGTERM, SIGKILL once `grace()` (seconds left) is 0."""
        self.stopping = True
        self._stop.set()
        process = self.process
        if process is None or not process.running:
            return
        await self._terminate(process, grace)

    async def _terminate(self, process: runtime.ContainerProcess, grace: Callable[[], float]) -> None:
        deadline_left = grace()
        hook = (self.spec.get("lifecycle") or {}).get("preStop")
        if hook:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._pre_stop(hook, process), max(deadline_left, 0.0))
        process.signal(15)
        while process.running:
            left = grace()
            if left <= 0:
                process.kill()
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(process.exited), min(left, 0.5))
        await process.exited

    async def _pre_stop(self, hook: Obj, process: runtime.ContainerProcess) -> None:
        if "exec" in hook and self.identity is not None:
            await runtime.exec_in(process, hook["exec"].get("command") or [], self.env, self.identity, 3600)
        elif "sleep" in hook:
            await asyncio.sleep(float(hook["sleep"].get("seconds", 0)))
        elif "httpGet" in hook:
            probe = Probe(
                "preStop",
                {"httpGet": hook["httpGet"], "timeoutSeconds": 30},
                self.spec,
                self.worker.ip or "",
                _no_exec,
            )
            await probe.run_once()

    def kill(self) -> None:
        """Kill at once, no restart (node failure, force deletion)."""
        self.stopping = True
        self._stop.set()
        self._stop_probes()
        if self.process is not None:
            self.process.kill()


async def _no_exec(argv: Sequence[str], timeout: float) -> tuple[int, bytes]:
    return 1, b""
