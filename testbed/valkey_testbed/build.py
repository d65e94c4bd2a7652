"""Build the test bed's control-plane binaries from Go modules, once, into a cache.

There is no Docker engine or image registry here, so the real kube-apiserver,
kube-controller-manager, kube-scheduler, kubectl, etcd, helm, prometheus,
promtool and local-path-provisioner are compiled from the Go module proxy, and so are the kstatus
checker (testing/kstatus), the S3-compatible object store backups go to (versitygw,
testing/objectstore.py) and the metrics sidecar's redis_exporter
(testing/redisexporter.py). Each artifact is stamped with what built it; a build whose
stamp matches is skipped, so the command is idempotent and cheap when warm.
Builds run under a file lock so concurrent callers wait, not race.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import attrs

from valkey_testbed import versions
from valkey_testbed.kubeversion import KubeRelease, default_release, selected

Progress = Callable[[str], None]

KUBE_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
TOOLS = ("helm", "prometheus", "promtool", "local-path-provisioner")
"""Built once, in the default release's directory; another release's directory links to them."""

_KUBE_MAIN = """\
// Multi-call binary: links the control plane once and dispatches on argv[0].
package main

import (
	"fmt"
	"os"
	"path/filepath"

	_ "time/tzdata"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	switch name := filepath.Base(os.Args[0]); name {
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	case "kubectl":
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) // nolint:errcheck
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q: run me as kube-apiserver, kube-controller-manager, "+
			"kube-scheduler or kubectl\\n", name)
		os.Exit(2)
	}
}
"""

_ETCD_MAIN = """\
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
"""


def cache_root() -> Path:
    """Where built binaries live: outside the repository, shared by checkouts."""
    explicit = os.environ.get("VALKEY_OPERATOR_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "valkey-operator"


@attrs.frozen
class Binaries:
    """Paths of the built control-plane executables."""

    bin_dir: Path

    def path(self, name: str) -> Path:
        return self.bin_dir / name

    @property
    def etcd(self) -> Path:
        return self.path("etcd")

    @property
    def kube_apiserver(self) -> Path:
        return self.path("kube-apiserver")

    @property
    def kube_controller_manager(self) -> Path:
        return self.path("kube-controller-manager")

    @property
    def kube_scheduler(self) -> Path:
        return self.path("kube-scheduler")

    @property
    def kubectl(self) -> Path:
        return self.path("kubectl")

    @property
    def helm(self) -> Path:
        return self.path("helm")

    @property
    def prometheus(self) -> Path:
        return self.path("prometheus")

    @property
    def promtool(self) -> Path:
        return self.path("promtool")

    @property
    def local_path_provisioner(self) -> Path:
        return self.path("local-path-provisioner")


def binaries(release: KubeRelease | None = None) -> Binaries:
    """Where the binaries of a Kubernetes release are (built or not); default: the selected one
    (kubeversion.selected(): VALKEY_OPERATOR_KUBERNETES, else versions.KUBERNETES)."""
    return Binaries(cache_root() / "k8s" / (release or selected()).kubernetes / "bin")


def _go_build_cache() -> Path:
    return cache_root() / "go-build"


def go_env(work: Path, cache: Path | None = None) -> dict[str, str]:
    """The environment of a reproducible module-mode build in work (compiler cache: cache, default
    the test bed's), for this module's builds and the benchmarks'."""
    env = dict(os.environ)
    env.update(
        CGO_ENABLED="0",
        GOFLAGS="-mod=mod -buildvcs=false",
        GOTOOLCHAIN="local",
        GOWORK="off",
    )
    env["GOCACHE"] = str(cache or _go_build_cache())
    env["GOTMPDIR"] = str(work)
    return env


STEP_TIMEOUT = 3600.0
"""Seconds one build step may take (a cold kubelet build takes about 5 minutes here)."""


def run_step(cmd: list[str], cwd: Path, progress: Progress, *, cgo: bool = False) -> None:
    """One build command in cwd with the build's Go environment (cgo on when asked); its output is
    kept for the error, which fails the build."""
    progress("  $ " + " ".join(cmd))
    started = time.monotonic()
    env = go_env(cwd)
    if cgo:
        env["CGO_ENABLED"] = "1"
    result = subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=STEP_TIMEOUT,
    )
    if result.returncode != 0:
        raise BuildError(f"{' '.join(cmd)} failed in {cwd} (exit {result.returncode}):\n{result.stdout}")
    progress(f"    done in {time.monotonic() - started:.0f}s")


class BuildError(RuntimeError):
    """A Go build step failed; the message carries the tool's output."""


def build_go_tool(
    binary: Path,
    stamp: str,
    label: str,
    files: Mapping[str, str],
    package: str,
    ldflags: str,
    progress: Progress,
) -> Path:
    """A Go tool built alone: its own module (files) and compiler cache next to the binary, so it never
    races the control plane's shared cache; skipped when the binary's stamp matches (the caller holds
    the build lock)."""
    stamp_file = binary.parent / ".stamp"
    if binary.exists() and stamp_file.exists() and stamp_file.read_text() == stamp:
        progress(f"{label}: cached at {binary}")
        return binary
    progress(f"{label}: building {binary} (cold builds take minutes)...")
    work, go_cache = binary.parent / "src", binary.parent / "go-build"
    for path in (work, go_cache):
        shutil.rmtree(path, ignore_errors=True)
    work.mkdir(parents=True)
    for name, content in files.items():
        (work / name).write_text(content)
    partial = binary.with_suffix(".partial")
    for args in (["mod", "tidy"], ["build", "-trimpath", "-ldflags", ldflags, "-o", str(partial), package]):
        progress("  $ go " + " ".join(args))
        result = subprocess.run(
            ["go", *args], cwd=work, env=go_env(work, go_cache), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=3600,
        )  # fmt: skip
        if result.returncode != 0:
            raise BuildError(
                f"go {' '.join(args)} failed in {work} (exit {result.returncode}):\n{result.stdout}"
            )
    partial.replace(binary)
    stamp_file.write_text(stamp)
    shutil.rmtree(go_cache, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    return binary


def staging_replacements(release: KubeRelease, gomod: str) -> list[str]:
    """The kubernetes module's own replace block (gomod: that release's go.mod), pointed at the
    published staging modules of the same release.

    Outside the kubernetes repository `./staging/src/k8s.io/X` does not exist,
    so each is mapped to `k8s.io/X v0.Y.Z`, the same code as published.
    """
    modules = re.findall(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", gomod, re.MULTILINE)
    if not modules:
        raise BuildError(
            f"no staging replace directives found in k8s.io/kubernetes {release.kubernetes} go.mod"
        )
    return [f"\t{m} => {m} {release.staging}" for m in modules]


def _release_gomod(release: KubeRelease) -> str:
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{release.kubernetes}"],
        check=True,
        capture_output=True,
        text=True,
        env=go_env(Path.cwd()),
    )
    return Path(json.loads(out.stdout)["GoMod"]).read_text()


def version_ldflags(release: KubeRelease) -> str:
    """Stamp the binaries with their release, or they report v0.0.0 and Helm's kubeVersion fails."""
    stamps = {
        "gitVersion": release.kubernetes,
        "gitMajor": str(release.major),
        "gitMinor": str(release.minor_number),
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
    }
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {pkg}.{key}={value}" for key, value in stamps.items()]
    return " ".join(flags)


@attrs.frozen
class _Artifact:
    """One Go build producing one executable, plus the names linked to it."""

    name: str
    stamp: str
    build: Callable[[Path, Path, Progress], None]
    links: tuple[str, ...] = ()


def _build_kube(release: KubeRelease, work: Path, output: Path, progress: Progress) -> None:
    replaces = "\n".join(staging_replacements(release, _release_gomod(release)))
    (work / "go.mod").write_text(
        f"module valkeyoperator.local/kube\n\ngo 1.26\n\n"
        f"require k8s.io/kubernetes {release.kubernetes}\n\nreplace (\n{replaces}\n)\n"
    )
    (work / "main.go").write_text(_KUBE_MAIN)
    run_step(["go", "mod", "tidy"], work, progress)
    ldflags = version_ldflags(release)
    run_step(["go", "build", "-trimpath", "-ldflags", ldflags, "-o", str(output), "."], work, progress)


def _build_etcd(release: KubeRelease, work: Path, output: Path, progress: Progress) -> None:
    (work / "go.mod").write_text(
        f"module valkeyoperator.local/etcd\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 {release.etcd}\n"
    )
    (work / "main.go").write_text(_ETCD_MAIN)
    run_step(["go", "mod", "tidy"], work, progress)
    run_step(["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(output), "."], work, progress)


def _build_helm(work: Path, output: Path, progress: Progress) -> None:
    (work / "go.mod").write_text(
        f"module valkeyoperator.local/helm\n\ngo 1.26\n\nrequire helm.sh/helm/v3 {versions.HELM}\n"
    )
    (work / "tools.go").write_text(
        '//go:build tools\n\npackage tools\n\nimport _ "helm.sh/helm/v3/cmd/helm"\n'
    )
    run_step(["go", "mod", "tidy"], work, progress)
    ldflags = f"-s -w -X helm.sh/helm/v3/internal/version.version={versions.HELM} " + _helm_kube_ldflags(work)
    run_step(
        ["go", "build", "-trimpath", "-ldflags", ldflags, "-o", str(output), "helm.sh/helm/v3/cmd/helm"],
        work,
        progress,
    )


def _helm_kube_ldflags(work: Path) -> str:
    """The Kubernetes version `helm template` and `helm lint` assume without --kube-version, stamped
    as helm's own release build does (1.<client-go minor>): unstamped it is 1.20, which no chart
    with a current kubeVersion floor accepts, so the test bed's helm would refuse what users' helm
    renders."""
    listed = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Version}}", "k8s.io/client-go"],
        cwd=work,
        env=go_env(work),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    minor = listed.removeprefix("v0.").split(".")[0]
    return " ".join(
        f"-X helm.sh/helm/v3/pkg/{package}.k8sVersion{part}={value}"
        for package in ("chartutil", "lint/rules")
        for part, value in (("Major", "1"), ("Minor", minor))
    )


PROMETHEUS_TAGS = "remove_all_sd,enable_kubernetes_sd"
"""Only the kubernetes service discovery (the plugins/ files' build constraints): a smaller build."""


def _prometheus_version() -> str:
    """v0.3XX.Y -> 3.XX.Y: the release the module version stands for."""
    minor, patch = versions.PROMETHEUS.removeprefix("v0.").split(".")
    return f"{minor[0]}.{int(minor[1:])}.{patch}"


def _build_prometheus_command(command: str) -> Callable[[Path, Path, Progress], None]:
    """Build cmd/<command> of the Prometheus module (prometheus or promtool).

    No `go mod tidy`: it would fetch every discovery plugin's SDK (2 GB); `go build -mod=mod`
    fetches only the modules the tagged build imports. Without the `builtinassets` tag the web UI
    is served from disk (absent here), while the HTTP API, which tests use, works.
    """

    def build(work: Path, output: Path, progress: Progress) -> None:
        (work / "go.mod").write_text(
            f"module valkeyoperator.local/{command}\n\ngo 1.26\n\n"
            f"require github.com/prometheus/prometheus {versions.PROMETHEUS}\n"
        )
        stamps = {
            "Version": _prometheus_version(),
            "Revision": versions.PROMETHEUS,
            "Branch": "HEAD",
            "BuildUser": "valkey-operator",
            "BuildDate": "19700101-00:00:00",
        }
        ldflags = " ".join(
            ["-s", "-w", *(f"-X github.com/prometheus/common/version.{k}={v}" for k, v in stamps.items())]
        )
        package = f"github.com/prometheus/prometheus/cmd/{command}"
        flags = ["-trimpath", "-tags", PROMETHEUS_TAGS, "-ldflags", ldflags]
        run_step(["go", "build", *flags, "-o", str(output), package], work, progress)

    return build


def _kube_artifacts(release: KubeRelease) -> list[_Artifact]:
    """What each Kubernetes release's directory holds: its etcd and the multi-call control plane."""
    return [
        _Artifact("etcd", f"etcd {release.etcd}", functools.partial(_build_etcd, release)),
        _Artifact(
            "kube", f"kubernetes {release.kubernetes}", functools.partial(_build_kube, release), KUBE_COMMANDS
        ),
    ]


def _tool_artifacts() -> list[_Artifact]:
    """The TOOLS, independent of the Kubernetes release."""

    def prometheus(command: str) -> _Artifact:
        stamp = f"{command} {versions.PROMETHEUS} ({PROMETHEUS_TAGS})"
        return _Artifact(command, stamp, _build_prometheus_command(command))

    from valkey_testbed import localpath  # builds on this module

    return [
        _Artifact("helm", f"helm {versions.HELM} (default Kubernetes version stamped)", _build_helm),
        # Two builds of one module: the second reuses the first's compiled packages (one GOCACHE).
        prometheus("prometheus"),
        prometheus("promtool"),
        _Artifact(
            localpath.BINARY,
            f"local-path-provisioner {versions.LOCAL_PATH_PROVISIONER}",
            localpath.build_provisioner,
        ),
    ]


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on path (created with its parents) for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _stamp_text(artifact: _Artifact) -> str:
    go = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=True).stdout.strip()
    return f"{artifact.stamp} built by {go}\n"


def build(progress: Progress = print, release: KubeRelease | None = None) -> Binaries:
    """Build every missing or stale binary of a Kubernetes release (default: the selected one) and
    the release-independent tools; return where they are.

    The default release's directory holds everything. Another release's directory holds its own
    etcd and control plane, and links to the default directory's TOOLS. One lock (the default
    directory's) covers every build, so two Go builds never run at once.
    """
    release = release or selected()
    shared = binaries(default_release())
    bins = binaries(release)
    started = time.monotonic()
    with file_lock(shared.bin_dir.parent / ".lock"):
        if bins == shared:
            _build_missing(bins, [*_kube_artifacts(release), *_tool_artifacts()], progress)
        else:
            _build_missing(shared, _tool_artifacts(), progress)
            _build_missing(bins, _kube_artifacts(release), progress)
            for tool in TOOLS:
                _link(bins.path(tool), str(shared.path(tool)))
        # The kstatus checker the status tests ask (release-independent; imported here as it builds on
        # this module).
        from valkey_testbed.kstatus import build_checker

        build_checker(progress)
        # The object store backups go to (release-independent, its own directory and compiler cache).
        from valkey_testbed.objectstore import build_server

        build_server(progress)
        # The metrics sidecar's exporter (its own directory, compiler cache and lock), which the image
        # catalog installs as oliver006/redis_exporter.
        from valkey_testbed.redisexporter import build_exporter

        build_exporter(progress)

        # cert-manager's and the Prometheus Operator's CRDs, for the example tests (Go module cache).
        from valkey_testbed import thirdparty

        thirdparty.fetch(progress)
    size = sum(
        path.stat().st_size for path in bins.bin_dir.iterdir() if path.is_file() and not path.is_symlink()
    )
    elapsed = time.monotonic() - started
    progress(f"test bed binaries ready in {bins.bin_dir} ({size / 2**20:.0f} MiB, {elapsed:.0f}s)")
    # The image catalog (real Valkey binaries for pods); imported here as it builds on this module.
    from valkey_testbed.images import install_images

    install_images(progress)
    return bins


def _link(link_path: Path, target: str) -> None:
    if not link_path.is_symlink() or os.readlink(link_path) != target:
        link_path.unlink(missing_ok=True)
        link_path.symlink_to(target)


def _build_missing(bins: Binaries, artifacts: list[_Artifact], progress: Progress) -> None:
    """Build each artifact whose stamp is missing or stale into bins (the caller holds the lock)."""
    bins.bin_dir.mkdir(parents=True, exist_ok=True)
    built_any = False
    for artifact in artifacts:
        target = bins.path(artifact.name)
        stamp_file = bins.bin_dir / f".{artifact.name}.stamp"
        wanted = _stamp_text(artifact)
        fresh = target.exists() and stamp_file.exists() and stamp_file.read_text() == wanted
        if fresh:
            progress(f"{artifact.stamp}: cached at {target}")
        else:
            progress(f"{artifact.stamp}: building (cold builds take minutes)...")
            work = bins.bin_dir.parent / "src" / artifact.name
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            partial = target.with_suffix(".partial")
            artifact.build(work, partial, progress)
            partial.replace(target)
            stamp_file.write_text(wanted)
            built_any = True
        for link in artifact.links:
            _link(bins.path(link), artifact.name)
    if built_any:
        # Compiler caches are gigabytes and only speed up a rebuild of the same versions.
        shutil.rmtree(_go_build_cache(), ignore_errors=True)
        shutil.rmtree(bins.bin_dir.parent / "src", ignore_errors=True)


def main(release: KubeRelease | None = None) -> int:
    try:
        build(lambda line: print(line, flush=True), release)
    except BuildError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0
