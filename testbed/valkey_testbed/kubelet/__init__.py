"""A process kubelet for the test bed: zoned Nodes, and pods run as local processes.

See docs/testing.md ("Nodes and pods") and TESTBED.md. `Kubelet` runs in any
event loop; `python -m valkey_testbed.kubelet` runs it as the test
bed's background process, and `KubeletControl` talks to that process
(node failure and recovery, pod pids, exec).
"""

from valkey_testbed.kubelet.control import ControlError, ExecResult, KubeletControl
from valkey_testbed.kubelet.kubelet import Kubelet, node_names

__all__ = ["ControlError", "ExecResult", "Kubelet", "KubeletControl", "node_names"]
