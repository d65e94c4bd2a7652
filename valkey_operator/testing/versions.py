"""The one place where the test bed's component versions are pinned."""

from __future__ import annotations

# Kubernetes control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl), built from the k8s.io/kubernetes Go module.
KUBERNETES = "v1.37.2"
# The staging modules (k8s.io/api, k8s.io/client-go, ...) publish as v0.Y.Z.
KUBERNETES_STAGING = "v0." + KUBERNETES.split(".", 1)[1]
# etcd, built from its own Go module (its pins conflict with Kubernetes').
ETCD = "v3.7.3"
# helm, for chart tests.
HELM = "v3.22.0"
