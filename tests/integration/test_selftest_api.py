"""`valkey-operator selftest` (the chart's `helm test` check) against the test bed's API server: it
finds the operator pods by label, dials /readyz at each pod IP, and reads each CRD's Established
condition. The "operator pod" is a Pod object on a node no kubelet runs, whose status this test
writes, in front of the operator's own probe endpoint on loopback."""

from __future__ import annotations

import pytest

from valkey_operator import selftest
from valkey_operator.core.client import Client
from valkey_operator.core.httpserver import HttpEndpoint, probes_app
from valkey_operator.core.resource import PODS
from valkey_testbed.crds import load_manifests, product_crds

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]

SELECTOR = "app.kubernetes.io/name=selftest-operator"


async def operator_pod(kube: Client, namespace: str, name: str, pod_ip: str | None) -> None:
    """A pod with the selector's labels; Running at pod_ip, or left Pending when pod_ip is None."""
    await kube.create(
        PODS,
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/name": "selftest-operator"},
            },
            "spec": {"nodeName": "no-such-node", "containers": [{"name": "operator", "image": "none"}]},
        },
    )
    if pod_ip:
        status = {"phase": "Running", "podIP": pod_ip, "podIPs": [{"ip": pod_ip}]}
        await kube.patch_status(PODS, name, {"status": status}, namespace)


async def test_ready_operator_pods_and_established_crds_pass_and_each_gap_fails(
    kube: Client, namespace: str
) -> None:
    crds = tuple(sorted(crd["metadata"]["name"] for crd in load_manifests(product_crds())))
    ready = {"now": True}
    endpoint = HttpEndpoint(probes_app(lambda: True, lambda: ready["now"]), "127.0.0.1", 0)
    await endpoint.start()
    try:
        options = selftest.Options(
            namespace=namespace, selector=SELECTOR, port=endpoint.port, crds=crds, timeout=5, kubeconfig=None
        )
        nothing = await selftest.check(kube, options)
        assert [str(o) for o in nothing if not o.ok] == [
            f"FAILED pods {SELECTOR}: none in namespace {namespace}"
        ]

        await operator_pod(kube, namespace, "operator-a", "127.0.0.1")
        passed = await selftest.check(kube, options)
        assert all(o.ok for o in passed), [str(o) for o in passed]
        assert [o.what for o in passed] == [
            f"pod operator-a http://127.0.0.1:{endpoint.port}/readyz",
            *(f"crd {name}" for name in crds),
        ]

        ready["now"] = False
        not_ready = await selftest.check(kube, options)
        assert [o.detail for o in not_ready if not o.ok] == ["503 not ready"]
        ready["now"] = True

        await operator_pod(kube, namespace, "operator-b", None)
        pending = await selftest.check(kube, options)
        assert [o.what for o in pending if not o.ok] == ["pod operator-b"]

        missing = selftest.Options(
            namespace=namespace,
            selector="app.kubernetes.io/name=selftest-operator,none=here",
            port=endpoint.port,
            crds=("nosuch.example.com",),
            timeout=5,
            kubeconfig=None,
        )
        assert [str(o) for o in await selftest.check(kube, missing)] == [
            f"FAILED pods app.kubernetes.io/name=selftest-operator,none=here: none in namespace {namespace}",
            "FAILED crd nosuch.example.com: not found",
        ]
    finally:
        await endpoint.stop()
