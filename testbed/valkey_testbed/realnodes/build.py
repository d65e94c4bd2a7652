"""Build the real nodes' binaries from Go modules, once, into a cache beside the control plane's.

- kubelet and kube-proxy: one multi-call binary from the control plane's own
  k8s.io/kubernetes release (the same module the control plane links);
- containerd, its runc shim and ctr (to import images) from containerd's module;
- the CNI plugins a bridge network needs (bridge, host-local, loopback);
- CoreDNS with its default plugins;
- runc, from its module with cgo and libseccomp (Debian's libseccomp-dev): Debian bookworm's
  runc 1.1.5 starts no container containerd 2.4 asks for ("can't get final child's PID from
  pipe: EOF");
- pause, the sandbox's init: a few lines of Go of ours (no registry to pull one from).

Each artifact is stamped with what built it and skipped when the stamp matches.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import attrs

from valkey_testbed import build as testbed_build
from valkey_testbed import debian, versions
from valkey_testbed.kubeversion import KubeRelease, selected

Progress = Callable[[str], None]

NODE_COMMANDS = ("kubelet", "kube-proxy")
CONTAINERD_COMMANDS = ("containerd", "containerd-shim-runc-v2", "ctr")
CNI_PLUGINS = ("bridge", "host-local", "loopback")
# containerd leaves out the snapshotters that need cgo (btrfs) or a kernel service we do not run.
CONTAINERD_TAGS = "no_btrfs,no_devmapper,no_zfs"

_NODE_MAIN = """\
// Multi-call binary: the kubelet and kube-proxy link once and dispatch on argv[0].
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	switch name := filepath.Base(os.Args[0]); name {
	case "kubelet":
		os.Exit(cli.Run(kubelet.NewKubeletCommand(context.Background())))
	case "kube-proxy":
		os.Exit(cli.Run(proxy.NewProxyCommand()))
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q: run me as kubelet or kube-proxy\\n", name)
		os.Exit(2)
	}
}
"""

_PAUSE_MAIN = """\
// The pod sandbox's init: sleeps, reaps children, exits on SIGINT or SIGTERM.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for received := range signals {
		if received != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
"""


@attrs.frozen
class NodeBinaries:
    """Where the real nodes' executables are: bin_dir (commands) and cni_dir (CNI plugins)."""

    root: Path

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def cni_dir(self) -> Path:
        return self.root / "cni"

    def path(self, name: str) -> Path:
        return self.bin_dir / name


def node_binaries(release: KubeRelease | None = None) -> NodeBinaries:
    return NodeBinaries(testbed_build.cache_root() / "realnodes" / (release or selected()).kubernetes)


@attrs.frozen
class _Artifact:
    name: str
    stamp: str
    outputs: tuple[str, ...]
    build: Callable[[Path, Path, Progress], None]
    """build(work, out_dir, progress) leaves every name of outputs in out_dir."""


def _go(work: Path, args: list[str], progress: Progress, cgo: bool = False) -> None:
    testbed_build.run_step(["go", *args], work, progress, cgo=cgo)


def _module(work: Path, name: str, requires: dict[str, str], imports: tuple[str, ...] = ()) -> None:
    required = "\n".join(f"\t{module} {version}" for module, version in requires.items())
    (work / "go.mod").write_text(
        f"module valkeyoperator.local/{name}\n\ngo 1.26\n\nrequire (\n{required}\n)\n"
    )
    if imports:
        lines = "\n".join(f'\t_ "{package}"' for package in imports)
        (work / "tools.go").write_text(f"//go:build tools\n\npackage tools\n\nimport (\n{lines}\n)\n")


def _build_node(release: KubeRelease, work: Path, out: Path, progress: Progress) -> None:
    replaces = "\n".join(testbed_build.staging_replacements(release, testbed_build._release_gomod(release)))
    (work / "go.mod").write_text(
        f"module valkeyoperator.local/kubenode\n\ngo 1.26\n\n"
        f"require k8s.io/kubernetes {release.kubernetes}\n\nreplace (\n{replaces}\n)\n"
    )
    (work / "main.go").write_text(_NODE_MAIN)
    _go(work, ["mod", "tidy"], progress)
    ldflags = testbed_build.version_ldflags(release)
    _go(work, ["build", "-trimpath", "-ldflags", ldflags, "-o", str(out / "kube-node"), "."], progress)
    for command in NODE_COMMANDS:
        (out / command).symlink_to("kube-node")


def _build_containerd(work: Path, out: Path, progress: Progress) -> None:
    module = "github.com/containerd/containerd/v2"
    packages = tuple(f"{module}/cmd/{command}" for command in CONTAINERD_COMMANDS)
    _module(work, "containerd", {module: versions.CONTAINERD}, packages)
    _go(work, ["mod", "tidy"], progress)
    ldflags = f"-s -w -X {module}/version.Version={versions.CONTAINERD} -X {module}/version.Revision=testbed"
    flags = ["-trimpath", "-tags", CONTAINERD_TAGS, "-ldflags", ldflags]
    _go(work, ["build", *flags, "-o", str(out) + "/", *packages], progress)


def _build_cni(work: Path, out: Path, progress: Progress) -> None:
    module = "github.com/containernetworking/plugins"
    kinds = {"bridge": "main", "loopback": "main", "host-local": "ipam"}
    packages = tuple(f"{module}/plugins/{kinds[name]}/{name}" for name in CNI_PLUGINS)
    _module(work, "cni", {module: versions.CNI_PLUGINS}, packages)
    _go(work, ["mod", "tidy"], progress)
    _go(work, ["build", "-trimpath", "-ldflags", "-s -w", "-o", str(out) + "/", *packages], progress)


def _build_coredns(work: Path, out: Path, progress: Progress) -> None:
    module = "github.com/coredns/coredns"
    _module(work, "coredns", {module: versions.COREDNS}, (module,))
    _go(work, ["mod", "tidy"], progress)
    _go(work, ["build", "-trimpath", "-ldflags", "-s -w", "-o", str(out / "coredns"), module], progress)


def _build_runc(work: Path, out: Path, progress: Progress) -> None:
    debian.install_packages(debian.not_installed(["libseccomp-dev"]), "runc's seccomp build", progress)
    module = "github.com/opencontainers/runc"
    _module(work, "runc", {module: versions.RUNC}, (module,))
    _go(work, ["mod", "tidy"], progress)
    ldflags = f"-s -w -X main.version={versions.RUNC.removeprefix('v')}"
    flags = ["-trimpath", "-tags", "seccomp", "-ldflags", ldflags]
    _go(work, ["build", *flags, "-o", str(out / "runc"), module], progress, cgo=True)


def _build_pause(work: Path, out: Path, progress: Progress) -> None:
    (work / "go.mod").write_text("module valkeyoperator.local/pause\n\ngo 1.26\n")
    (work / "main.go").write_text(_PAUSE_MAIN)
    _go(work, ["build", "-trimpath", "-ldflags", "-s -w", "-o", str(out / "pause"), "."], progress)


def _artifacts(release: KubeRelease) -> list[_Artifact]:
    return [
        _Artifact("kube-node", f"kubelet {release.kubernetes}", ("kube-node", *NODE_COMMANDS),
                  functools.partial(_build_node, release)),
        _Artifact("containerd", f"containerd {versions.CONTAINERD} ({CONTAINERD_TAGS})", CONTAINERD_COMMANDS,
                  _build_containerd),
        _Artifact("cni", f"cni plugins {versions.CNI_PLUGINS}", CNI_PLUGINS, _build_cni),
        _Artifact("coredns", f"coredns {versions.COREDNS}", ("coredns",), _build_coredns),
        _Artifact("runc", f"runc {versions.RUNC} (seccomp)", ("runc",), _build_runc),
        _Artifact("pause", "pause 1", ("pause",), _build_pause),
    ]  # fmt: skip


def build(progress: Progress = print, release: KubeRelease | None = None) -> NodeBinaries:
    """Build every missing or stale artifact of the real nodes; return where they are.

    Under a lock of their own: a cold build takes minutes, and the control plane's lock is what every
    test bed's start waits on.
    """
    release = release or selected()
    bins = node_binaries(release)
    go = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=True).stdout.strip()
    with testbed_build.file_lock(bins.root / ".lock"):
        for artifact in _artifacts(release):
            out_dir = bins.cni_dir if artifact.name == "cni" else bins.bin_dir
            stamp_file = bins.root / f".{artifact.name}.stamp"
            wanted = f"{artifact.stamp} built by {go}\n"
            present = all((out_dir / name).exists() for name in artifact.outputs)
            if present and stamp_file.exists() and stamp_file.read_text() == wanted:
                progress(f"{artifact.stamp}: cached in {out_dir}")
                continue
            progress(f"{artifact.stamp}: building (cold builds take minutes)...")
            work, staging = bins.root / "src" / artifact.name, bins.root / "staging" / artifact.name
            for path in (work, staging):
                shutil.rmtree(path, ignore_errors=True)
                path.mkdir(parents=True)
            artifact.build(work, staging, progress)
            out_dir.mkdir(parents=True, exist_ok=True)
            for name in artifact.outputs:
                target = out_dir / name
                target.unlink(missing_ok=True)
                (staging / name).rename(target)
            stamp_file.write_text(wanted)
            shutil.rmtree(work, ignore_errors=True)
            shutil.rmtree(staging, ignore_errors=True)
    return bins


def main() -> int:
    try:
        build(lambda line: print(line, flush=True))
    except testbed_build.BuildError as exc:
        print(exc)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
