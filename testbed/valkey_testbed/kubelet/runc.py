"""Run a container of a real OCI image with runc, as a kubelet's container runtime would.

The image's unpacked root filesystem (`ocistore`) is the lower layer of an
overlay per container, so containers never change the image. The OCI runtime
config carries what the pod spec asks for and the runtime enforces: the user
and groups, a read-only root filesystem, capabilities (containerd's default
set, minus drops, plus adds), no_new_privs, a seccomp profile for
RuntimeDefault, the volumes as bind mounts, the hostname and env. Pods keep
the host network (their loopback pod IPs), so there is no network namespace;
pid, ipc, uts and mount namespaces are the container's own.

`runc run` stays in the foreground as our child: it forwards signals to the
container's init and exits with its status. The init's pid (from --pid-file)
is what the kubelet records, so a sweep after a crash kills the container,
and what `kill` signals, so runc still cleans up after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from valkey_testbed.kubelet import runtime
from valkey_testbed.ocistore import OciImage
from valkey_testbed.processes import ProcessRecord, _proc_stat

Obj = dict[str, Any]

# containerd's default capabilities for a container (what a pod gets unless it drops them).
DEFAULT_CAPABILITIES = (
    "CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID", "SETFCAP",
    "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE",
)  # fmt: skip
ALL_CAPABILITIES = (
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
    "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
    "IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
    "SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD",
    "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
    "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
)  # fmt: skip
# RuntimeDefault here: everything allowed but what container runtimes' default profiles refuse
# to every container (kernel modules, reboot, mounts, namespaces, clocks, keyrings, bpf, ...).
# It is a deny list, coarser than containerd's allow list; the docs say so.
RUNTIME_DEFAULT_DENIED = (
    "acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "create_module", "delete_module",
    "finit_module", "fsconfig", "fsmount", "fsopen", "fspick", "get_kernel_syms", "init_module",
    "ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie", "mount",
    "mount_setattr", "move_mount", "name_to_handle_at", "nfsservctl", "open_by_handle_at",
    "open_tree", "perf_event_open", "personality", "pivot_root", "query_module", "quotactl",
    "reboot", "request_key", "setns", "settimeofday", "stime", "swapoff", "swapon", "syslog",
    "umount", "umount2", "unshare", "uselib", "userfaultfd", "ustat", "vhangup", "_sysctl",
)  # fmt: skip
# Open files: what the machine's container tools are allowed here (runc's default 1024 is too few
# for a Valkey server).
NOFILE = 20000
_MASKED = (
    "/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
    "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware",
    "/sys/devices/virtual/powercap",
)  # fmt: skip
_READONLY = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")


@attrs.frozen
class Security:
    """What a container's securityContext asks the runtime to enforce."""

    read_only_root: bool = False
    capabilities: tuple[str, ...] = tuple(f"CAP_{name}" for name in DEFAULT_CAPABILITIES)
    seccomp_runtime_default: bool = False


def security(pod: Obj, container: Obj) -> Security:
    """readOnlyRootFilesystem, capabilities and seccomp, or ConfigError for what we cannot do."""
    pod_context = pod["spec"].get("securityContext") or {}
    context = container.get("securityContext") or {}
    if context.get("privileged"):
        raise runtime.ConfigError("privileged containers are not supported by the test-bed runtime")
    caps = context.get("capabilities") or {}
    drop = {str(name).upper().removeprefix("CAP_") for name in caps.get("drop") or []}
    add = {str(name).upper().removeprefix("CAP_") for name in caps.get("add") or []}
    unknown = sorted((drop | add) - {"ALL", *ALL_CAPABILITIES})
    if unknown:
        raise runtime.ConfigError(f"unknown capabilities: {', '.join(unknown)}")
    kept = [] if "ALL" in drop else [name for name in DEFAULT_CAPABILITIES if name not in drop]
    added = ALL_CAPABILITIES if "ALL" in add else tuple(sorted(add))
    names = tuple(dict.fromkeys([*kept, *added]))
    profile = (context.get("seccompProfile") or pod_context.get("seccompProfile") or {}).get("type")
    if profile == "Localhost":
        raise runtime.ConfigError("seccomp profile type Localhost is not supported by the test-bed runtime")
    return Security(
        read_only_root=bool(context.get("readOnlyRootFilesystem")),
        capabilities=tuple(f"CAP_{name}" for name in names),
        seccomp_runtime_default=profile == "RuntimeDefault",
    )


def image_user(image: OciImage) -> tuple[int, int]:
    """The image's USER as uid and gid, names looked up in the image's /etc/passwd and /etc/group."""
    user, _, group = image.user.partition(":")
    uid = _lookup(image.rootfs / "etc" / "passwd", user or "0", 2)
    if group:
        gid = _lookup(image.rootfs / "etc" / "group", group, 2)
    else:
        gid = _primary_group(image.rootfs / "etc" / "passwd", uid)
    return uid, gid


def _lookup(table: Path, name: str, field: int) -> int:
    if name.isdigit():
        return int(name)
    with contextlib.suppress(OSError):
        for line in table.read_text().splitlines():
            parts = line.split(":")
            if len(parts) > field and parts[0] == name:
                return int(parts[field])
    raise runtime.ConfigError(f"unable to find user {name}: no matching entries in {table.name} file")


def _primary_group(passwd: Path, uid: int) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in passwd.read_text().splitlines():
            parts = line.split(":")
            if len(parts) > 3 and int(parts[2]) == uid:
                return int(parts[3])
    return uid if uid else 0


def runtime_config(
    *,
    argv: Sequence[str],
    env: Mapping[str, str],
    who: runtime.Identity,
    mounts: Sequence[runtime.Mount],
    secure: Security,
    hostname: str,
    working_dir: str,
    rootfs: Path,
) -> Obj:
    """The OCI runtime spec (config.json) of one container."""
    caps = list(secure.capabilities)
    process: Obj = {
        "terminal": False,
        "user": {"uid": who.uid, "gid": who.gid, "additionalGids": list(who.groups)},
        "args": list(argv),
        "env": [f"{name}={value}" for name, value in env.items()],
        "cwd": working_dir or "/",
        "capabilities": {"bounding": caps, "effective": caps, "permitted": caps},
        "rlimits": [{"type": "RLIMIT_NOFILE", "hard": NOFILE, "soft": NOFILE}],
        "noNewPrivileges": who.no_new_privs,
    }
    linux: Obj = {
        "namespaces": [{"type": kind} for kind in ("pid", "ipc", "uts", "mount")],
        "maskedPaths": list(_MASKED),
        "readonlyPaths": list(_READONLY),
    }
    if secure.seccomp_runtime_default:
        linux["seccomp"] = {
            "defaultAction": "SCMP_ACT_ALLOW",
            "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
            "syscalls": [{"names": list(RUNTIME_DEFAULT_DENIED), "action": "SCMP_ACT_ERRNO", "errnoRet": 1}],
        }
    return {
        "ociVersion": "1.0.2",
        "process": process,
        "root": {"path": str(rootfs), "readonly": secure.read_only_root},
        "hostname": hostname,
        "mounts": [*_system_mounts(), *_volume_mounts(mounts)],
        "linux": linux,
    }


def _system_mounts() -> list[Obj]:
    def mount(destination: str, kind: str, options: list[str]) -> Obj:
        return {"destination": destination, "type": kind, "source": kind, "options": options}

    mounts = [
        mount("/proc", "proc", ["nosuid", "noexec", "nodev"]),
        mount("/dev", "tmpfs", ["nosuid", "strictatime", "mode=755", "size=65536k"]),
        mount("/dev/pts", "devpts", ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]),
        mount("/dev/shm", "tmpfs", ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]),
        mount("/dev/mqueue", "mqueue", ["nosuid", "noexec", "nodev"]),
        mount("/sys", "sysfs", ["nosuid", "noexec", "nodev", "ro"]),
    ]
    resolv = Path("/etc/resolv.conf")
    if resolv.exists():
        mounts.append(
            {"destination": "/etc/resolv.conf", "type": "bind", "source": str(resolv.resolve()),
             "options": ["rbind", "ro"]}
        )  # fmt: skip
    return mounts


def _volume_mounts(mounts: Sequence[runtime.Mount]) -> list[Obj]:
    """Volumes as bind mounts, parents before the mount points nested in them."""
    ordered = sorted(mounts, key=lambda m: m.target.rstrip("/").count("/"))
    return [
        {
            "destination": mount.target,
            "type": "bind",
            "source": str(mount.source),
            "options": ["rbind", "ro" if mount.read_only else "rw"],
        }
        for mount in ordered
    ]


class Bundle:
    """A container's bundle directory: config.json and an overlay of the image as its root."""

    def __init__(self, directory: Path, image: OciImage) -> None:
        self.directory = directory
        self.image = image
        self.rootfs = directory / "rootfs"

    def prepare(self, config: Obj) -> None:
        self.remove()
        for name in ("rootfs", "upper", "work"):
            (self.directory / name).mkdir(parents=True)
        lower, upper, work = self.image.rootfs, self.directory / "upper", self.directory / "work"
        options = f"lowerdir={lower},upperdir={upper},workdir={work}"
        _checked(["mount", "-t", "overlay", "overlay", "-o", options, str(self.rootfs)])
        (self.directory / "config.json").write_text(json.dumps(config))

    def remove(self) -> None:
        """Unmount the root and delete the bundle (after the container has exited)."""
        if self.rootfs.is_mount():
            subprocess.run(["umount", "-l", str(self.rootfs)], capture_output=True, check=False)
        shutil.rmtree(self.directory, ignore_errors=True)


def _checked(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise runtime.StartError(f"{' '.join(argv)}: {done.stderr.strip()}")


def runc() -> str:
    found = shutil.which("runc", path=runtime.DEFAULT_PATH)
    if found is None:
        raise runtime.StartError("runc is required to run OCI images (apt-get install runc)")
    return found


class RuncProcess(runtime.ContainerProcess):
    """A container run by `runc run` in the foreground; `pid` is runc's, `init_pid` the container's."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        log_file: Path,
        *,
        state: Path,
        container_id: str,
        bundle: Bundle,
    ) -> None:
        super().__init__(popen, bundle.image.reference, log_file)
        self.state = state
        self.container_id = container_id
        self.bundle = bundle
        self.init_pid = 0
        self.init_ticks = 0

    @classmethod
    async def launch(
        cls, *, state: Path, container_id: str, bundle: Bundle, config: Obj, log_file: Path
    ) -> RuncProcess:
        """Create the bundle, start runc and wait until the container's init exists."""
        await asyncio.to_thread(bundle.prepare, config)
        log_file.parent.mkdir(parents=True, exist_ok=True)
        pid_file = bundle.directory / "init.pid"
        argv = [runc(), "--root", str(state), "run", "--bundle", str(bundle.directory)]
        argv += ["--pid-file", str(pid_file), container_id]
        try:
            popen = _spawn(argv, log_file)
        except OSError:
            bundle.remove()
            raise
        process = cls(popen, log_file, state=state, container_id=container_id, bundle=bundle)
        process.exited.add_done_callback(lambda _: bundle.remove())
        while process.running and not pid_file.is_file():
            await asyncio.wait([process.exited], timeout=0.01)
        if pid_file.is_file():
            process.init_pid = int(pid_file.read_text().strip() or 0)
            process.init_ticks = _proc_stat(process.init_pid)[0] or 0
        return process

    @property
    def main_pid(self) -> int:
        return self.init_pid or self.pid

    def record(self, name: str) -> ProcessRecord:
        # The init leads its own session; killing its group (a sweep) ends the container.
        if self.init_pid:
            return ProcessRecord(name, self.init_pid, self.executable, self.init_ticks)
        return super().record(name)

    def kill(self) -> None:
        """SIGKILL the container's init (its pid namespace dies with it); runc then cleans up."""
        if not self.running:
            return
        if self.init_pid and _proc_stat(self.init_pid)[0] == self.init_ticks:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.init_pid, signal.SIGKILL)
        else:
            super().kill()

    def exec_argv(self, argv: Sequence[str], env: Mapping[str, str], who: runtime.Identity) -> list[str]:
        user = f"{who.uid}:{who.gid}"
        full = [runc(), "--root", str(self.state), "exec", "--user", user]
        for gid in who.groups:
            full += ["--additional-gids", str(gid)]
        for name, value in env.items():
            full += ["--env", f"{name}={value}"]
        return [*full, self.container_id, *argv]


def _spawn(argv: list[str], log_file: Path) -> subprocess.Popen[bytes]:
    with log_file.open("ab") as log:
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, cwd="/",
        )  # fmt: skip


def sweep(state: Path, *, mounts_under: Path) -> None:
    """Force-delete containers a crashed kubelet left in runc's state dir, and unmount their
    overlays (every mount point under `mounts_under`)."""
    if state.is_dir():
        for entry in state.iterdir():
            if entry.is_dir():
                subprocess.run(
                    [runc(), "--root", str(state), "delete", "--force", entry.name],
                    capture_output=True,
                    check=False,
                )
        shutil.rmtree(state, ignore_errors=True)
    for mount_point in sorted(mount_points_under(mounts_under), reverse=True):
        subprocess.run(["umount", "-l", mount_point], capture_output=True, check=False)


def mount_points_under(directory: Path) -> list[str]:
    """Every mount point below directory (from /proc/self/mountinfo), for a lazy unmount."""
    prefix = str(directory.resolve()).rstrip("/") + "/"
    points = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(prefix):
                points.append(point)
    return points
