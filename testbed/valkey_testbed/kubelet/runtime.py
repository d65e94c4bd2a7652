"""Run one container as a local process: its own mount namespace, volumes, user and log.

The process is started as

    unshare --mount --uts --propagation private -- /bin/sh -c SCRIPT

where SCRIPT (running as root in the new namespaces) bind-mounts each volume
at its mountPath (so the mounts exist only for this container), sets the
hostname, changes to the working directory and finally execs

    setpriv --reuid UID --regid GID --groups G,... -- COMMAND ARGS...

Every exec keeps the pid, so the pid we spawn is the container's main process
(its PID 1), and it leads its own session and process group: SIGTERM goes to
the main process, SIGKILL to the whole group, as a runtime would do. Exit is
noticed through a pidfd, so the group is killed while the pid is still ours.
Mount points missing on the host are created there, empty, as a runtime
creates them in an image's root filesystem (we have no image root). A mount
point inside another volume's mount (a Secret at /config/users inside a
read-only ConfigMap at /config) is created in that volume's directory before
anything is mounted (`make_nested_mount_points`), as a kubelet's runtime
does: once the parent is bound read-only nothing can be created in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import posixpath
import shlex
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from valkey_testbed.processes import ProcessRecord, _proc_stat

Obj = dict[str, Any]

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _tool(name: str) -> str:
    found = shutil.which(name, path=DEFAULT_PATH)
    if found is None:
        raise RuntimeError(f"{name} (util-linux) is required by the test-bed kubelet")
    return found


class ConfigError(Exception):
    """The container cannot be created as specified (CreateContainerConfigError)."""


class StartError(Exception):
    """The command cannot be started (StartError, exit code 128)."""


@attrs.frozen
class Mount:
    source: Path
    target: str
    read_only: bool = False


@attrs.frozen
class Identity:
    uid: int
    gid: int
    groups: tuple[int, ...] = ()
    no_new_privs: bool = False


def make_nested_mount_points(mounts: Sequence[Mount]) -> None:
    """Create every mount point that lies inside another mount's volume, in that volume's directory.

    Runs before the container's mounts are made, for the plain-process and the runc path alike:
    a mount point inside a read-only parent cannot be created once the parent is bound. The empty
    directory (or file) stays in the volume's host directory, as with a real runtime; the atomic
    writer of content volumes only replaces its own `..data` entries and key symlinks.
    """
    targets = [(posixpath.normpath(m.target), m) for m in mounts]
    for target, mount in targets:
        parents = [
            (parent_target, parent)
            for parent_target, parent in targets
            if parent is not mount
            and target.startswith(parent_target.rstrip("/") + "/")
            and parent.source.is_dir()
        ]
        if not parents:
            continue
        parent_target, parent = max(parents, key=lambda item: len(item[0]))
        point = parent.source / posixpath.relpath(target, parent_target)
        if point.exists() or point.is_symlink():
            continue
        try:
            if mount.source.is_dir():
                point.mkdir(mode=0o755, parents=True)
            else:
                point.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
                point.touch(mode=0o644)
        except OSError as exc:
            raise ConfigError(f"cannot create mount point {target} inside {parent_target}: {exc}") from exc


def identity(
    pod: Obj, container: Obj, image_user: int, image_group: int, *, root_after_check: bool
) -> Identity:
    """runAsUser/runAsGroup/fsGroup/supplementalGroups, with the kubelet's runAsNonRoot check.

    The check runs against runAsUser, or else the user the catalog records for
    the image. An image whose runtime cannot run as that user here runs as root
    once the check has passed (`root_after_check`).
    """
    pod_context = pod["spec"].get("securityContext") or {}
    context = container.get("securityContext") or {}

    def setting(name: str) -> Any:
        value = context.get(name)
        return pod_context.get(name) if value is None else value

    run_as_user = setting("runAsUser")
    run_as_group = setting("runAsGroup")
    uid = int(run_as_user) if run_as_user is not None else image_user
    if setting("runAsNonRoot") and uid == 0:
        meta = pod["metadata"]
        what = (
            "container's runAsUser breaks non-root policy"
            if run_as_user is not None
            else ("container has runAsNonRoot and image will run as root")
        )
        pod_ref = f"{meta['name']}_{meta['namespace']}({meta['uid']})"
        raise ConfigError(f'{what} (pod: "{pod_ref}", container: {container["name"]})')
    # Without runAsGroup: the image's group for the image's user, else root's group (as runtimes do).
    gid = int(run_as_group) if run_as_group is not None else (image_group if run_as_user is None else 0)
    groups = [int(g) for g in pod_context.get("supplementalGroups") or []]
    if pod_context.get("fsGroup") is not None:
        groups.insert(0, int(pod_context["fsGroup"]))
    no_new_privs = context.get("allowPrivilegeEscalation") is False
    if root_after_check:
        return Identity(0, 0, (), no_new_privs)
    return Identity(uid, gid, tuple(dict.fromkeys(groups)), no_new_privs)


def resolve_command(argv: Sequence[str], path: str) -> list[str]:
    """argv with its executable resolved against the container's PATH, or StartError."""
    if not argv:
        raise StartError("no command specified")
    executable = argv[0]
    if "/" in executable:
        return list(argv)
    for directory in path.split(":"):
        candidate = Path(directory or ".") / executable
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return [str(candidate), *argv[1:]]
    raise StartError(f'exec: "{executable}": executable file not found in $PATH')


def check_mounts_keep(files: Sequence[Path], mounts: Sequence[Mount]) -> None:
    """StartError when a volume would be mounted over files the container runs from the host.

    A container of an image that is not OCI runs this machine's files (its bin_dir, under the
    image prefix) in a mount namespace of the host's own tree: a volume mounted at /work hides
    everything under /work, the image's executables included when the prefix is there. A real
    kubelet mounts into the image's own root and has no such clash; here it is refused by name
    rather than left to fail as an executable not found.
    """
    for mount in mounts:
        target = Path(mount.target)
        for path in files:
            if path == target or target in path.parents:
                raise StartError(
                    f"the volume mounted at {mount.target} would hide {path}, which this container runs "
                    "from the host (the test bed's process runtime): mount it at another path"
                )


def launch_argv(
    command: Sequence[str],
    who: Identity,
    mounts: Sequence[Mount],
    *,
    hostname: str,
    working_dir: str,
) -> list[str]:
    """The full argv: unshare, the mount script, setpriv, then the container's command."""
    lines = ["set -e"]
    for mount in sorted(mounts, key=lambda m: m.target.rstrip("/").count("/")):
        target = shlex.quote(mount.target)
        source = shlex.quote(str(mount.source))
        if mount.source.is_dir():
            lines.append(f"mkdir -p {target}")
        else:
            lines.append(f"mkdir -p {shlex.quote(os.path.dirname(mount.target) or '/')}")
            lines.append(f"[ -e {target} ] || : > {target}")
        mount_tool = _tool("mount")
        lines.append(f"{mount_tool} --bind {source} {target}")
        if mount.read_only:
            lines.append(f"{mount_tool} -o remount,bind,ro {target}")
    lines.append(f"{_tool('hostname')} {shlex.quote(hostname)}")
    lines.append(f"cd {shlex.quote(working_dir)}")
    lines.append('exec "$@"')
    return [
        _tool("unshare"),
        "--mount",
        "--uts",
        "--propagation",
        "private",
        "--",
        "/bin/sh",
        "-c",
        "\n".join(lines),
        "container-setup",
        *setpriv_argv(who),
        *command,
    ]


def setpriv_argv(who: Identity) -> list[str]:
    argv = [_tool("setpriv"), "--reuid", str(who.uid), "--regid", str(who.gid)]
    if who.groups:
        argv += ["--groups", ",".join(str(g) for g in who.groups)]
    else:
        argv.append("--clear-groups")
    if who.no_new_privs:
        argv.append("--no-new-privs")
    argv.append("--")
    return argv


def exit_code(status: int) -> int:
    """A wait status as Kubernetes reports it: the exit code, or 128 + signal number."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.waitstatus_to_exitcode(status)


class ContainerProcess:
    """A running container's main process; `exited` resolves to its exit code."""

    def __init__(self, popen: subprocess.Popen[bytes], executable: str, log_file: Path) -> None:
        self._popen = popen
        self.executable = executable
        self.pid = popen.pid
        ticks, _ = _proc_stat(self.pid)
        self.start_ticks = ticks or 0
        self.log_file = log_file
        loop = asyncio.get_running_loop()
        self.exited: asyncio.Future[int] = loop.create_future()
        self._pidfd = os.pidfd_open(self.pid)
        loop.add_reader(self._pidfd, self._on_exit)

    @classmethod
    def start(cls, argv: Sequence[str], env: Mapping[str, str], log_file: Path) -> ContainerProcess:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with log_file.open("ab") as log:
            popen = subprocess.Popen(
                list(argv),
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd="/",
            )
        return cls(popen, str(argv[0]), log_file)

    def record(self, name: str) -> ProcessRecord:
        return ProcessRecord(name, self.pid, self.executable, self.start_ticks)

    def _on_exit(self) -> None:
        """The main process has exited but is not reaped: kill the rest of its group, then reap."""
        loop = asyncio.get_running_loop()
        loop.remove_reader(self._pidfd)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        try:
            _, status = os.waitpid(self.pid, 0)
            code = exit_code(status)
        except ChildProcessError:
            code = 255
        self._popen.returncode = code
        os.close(self._pidfd)
        if not self.exited.done():
            self.exited.set_result(code)

    @property
    def running(self) -> bool:
        return not self.exited.done()

    @property
    def main_pid(self) -> int:
        """The container's main process (what /proc tells about the container)."""
        return self.pid

    def signal(self, signum: int) -> None:
        if self.running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def kill(self) -> None:
        """SIGKILL the whole group at once (a node dying, or the end of a grace period)."""
        if self.running:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)

    def exec_argv(self, argv: Sequence[str], env: Mapping[str, str], who: Identity) -> list[str]:
        """The command that runs argv inside this container's namespaces, as who."""
        enter = [_tool("nsenter"), "--target", str(self.pid), "--mount", "--uts", "--wd", "--"]
        return [*enter, *setpriv_argv(who), *argv]

    async def stop(self, grace: float) -> int:
        """SIGTERM, up to `grace` seconds, then SIGKILL; returns the exit code."""
        self.signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(asyncio.shield(self.exited), max(grace, 0.0))
        except TimeoutError:
            self.kill()
            return await self.exited


async def exec_in(
    container: ContainerProcess, argv: Sequence[str], env: Mapping[str, str], who: Identity, timeout: float
) -> tuple[int, bytes]:
    """Run argv inside a running container's namespaces, as its user: (exit code, output).

    Exit code -1 means the timeout passed (the command is killed).
    """
    full = container.exec_argv(argv, env, who)
    process = await asyncio.create_subprocess_exec(
        *full,
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        return -1, b""
    return exit_code_from_returncode(process.returncode), output


def exit_code_from_returncode(returncode: int | None) -> int:
    if returncode is None:
        return -1
    return 128 - returncode if returncode < 0 else returncode
