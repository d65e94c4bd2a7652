"""Services from outside the bed: NodePort and LoadBalancer, on loopback addresses only.

The bed has no kube-proxy and no cloud: `ServiceProxy` is both, a userspace TCP proxy that listens
on each node's 127.0.100.N at every nodePort and on a load-balancer address from 127.0.200.0/21
per LoadBalancer Service, and pipes each connection to one ready endpoint. The kubelet process
runs it (kubelet.py), so it starts and stops with the bed however the bed is started.
`noderange` gives each bed's API server its own slice of the nodePort range.
See docs/testing.md, "Services from outside: NodePort and LoadBalancer".
"""

from valkey_testbed.serviceproxy.loopback import LB_POOL, NotLoopback, require_loopback
from valkey_testbed.serviceproxy.proxy import ServiceProxy

__all__ = ["LB_POOL", "NotLoopback", "ServiceProxy", "require_loopback"]
