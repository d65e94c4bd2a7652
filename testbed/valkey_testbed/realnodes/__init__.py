"""Real nodes under the test bed: the real kubelet, containerd, runc, CNI and CoreDNS.

The process kubelet (valkey_testbed.kubelet) is our reading of what a kubelet
does; these nodes are the real thing, for the behaviours only the real thing
proves (OOM kills at a memory limit, cgroups, the runtime's restarts, Service
names). Pods live in network namespaces on one bridge with no uplink; the
ranges it serves are blackholed on the host first (network.py).
"""
