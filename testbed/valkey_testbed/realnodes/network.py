"""The real nodes' pod network: one bridge with no uplink, its ranges blackholed on the host.

Every pod's network namespace (made by containerd through the CNI bridge
plugin) has one veth on the bridge `BRIDGE` and routes only to the pod range
and, through the host, to the Service range: no default route, so a pod has
nowhere to send a packet for any other address. On the host:

- the pod and Service ranges are blackholed first (`BLACKHOLE_METRIC`), so a
  packet for a test-bed address that no better route claims (the bridge gone)
  is dropped, never handed to the default route; while the bridge is up both
  ranges are routed onto it (a ClusterIP kube-proxy has no rule for is asked
  for on the bridge, where nothing answers);
- forwarding is on for the bridge alone (`net.ipv4.conf.<bridge>.forwarding`;
  the machine's `ip_forward` is left as it is), and the mangle table's FORWARD
  drops whatever would leave through another interface: pod-to-Service traffic
  is forwarded back onto the bridge and nowhere else;
- no NAT of ours, no masquerade: kube-proxy's own rules only rewrite a Service
  address into a pod or host address on the bridge.

The host reaches pods over the bridge, which holds the gateway and each node's
address. `check` reads the routes back, so a test can prove the guarantee.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
from collections.abc import Sequence

import attrs

BRIDGE = "vkn0"
POD_CIDR = "10.244.0.0/16"
GATEWAY = "10.244.0.1"
SERVICE_CIDR = "10.96.0.0/16"
BLACKHOLE_METRIC = 4242
"""Above the bridge's connected route (metric 0), so the blackhole only takes what nothing else does."""
_FORWARD_RULE = ("-i", BRIDGE, "!", "-o", BRIDGE, "-j", "DROP")


class NetworkError(RuntimeError):
    """The host refused a step of the network set-up; the message carries the command's output."""


def node_address(index: int) -> str:
    """Node index (0, 1, ...)'s address on the bridge: 10.244.0.11, .12, ..."""
    return str(ipaddress.ip_address(GATEWAY) + 10 + index)


def node_range(index: int) -> tuple[str, str]:
    """The first and last pod address a node hands out: 10.244.<index+1>.2 - .254."""
    return f"10.244.{index + 1}.2", f"10.244.{index + 1}.254"


def _ip(*args: str, check: bool = True) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise NetworkError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _sysctl(key: str, value: str) -> None:
    with open(f"/proc/sys/{key.replace('.', '/')}", "w") as handle:
        handle.write(value)


def _iptables(action: str) -> int:
    return subprocess.run(
        ["iptables", "-w", "-t", "mangle", action, "FORWARD", *_FORWARD_RULE],
        capture_output=True,
        check=False,
    ).returncode


def up(nodes: int) -> None:
    """Blackholes first, then the bridge and its addresses, then forwarding (idempotent)."""
    for cidr in (POD_CIDR, SERVICE_CIDR):
        _ip("route", "replace", "blackhole", cidr, "metric", str(BLACKHOLE_METRIC))
    if not _ip("-j", "link", "show", BRIDGE, check=False).strip():
        _ip("link", "add", BRIDGE, "type", "bridge")
    prefix = ipaddress.ip_network(POD_CIDR).prefixlen
    present = set(addresses())
    for address in (GATEWAY, *(node_address(i) for i in range(nodes))):
        if address not in present:
            _ip("addr", "add", f"{address}/{prefix}", "dev", BRIDGE)
    _ip("link", "set", BRIDGE, "up")
    # The Service range is on the bridge too, above the blackhole: a connection the host opens to a
    # ClusterIP gets a route (a blackholed one fails at connect, before kube-proxy's OUTPUT rewrite
    # can act); one no rule rewrites goes out on the bridge, where nothing answers it.
    _ip("route", "replace", SERVICE_CIDR, "dev", BRIDGE, "src", GATEWAY, "metric", "100")
    if _iptables("-C") != 0 and _iptables("-I") != 0:
        raise NetworkError("iptables -t mangle -I FORWARD " + " ".join(_FORWARD_RULE) + " failed")
    _sysctl(f"net.ipv4.conf.{BRIDGE}.forwarding", "1")
    # Traffic between two pods on the bridge passes iptables, so kube-proxy's rewrite of a Service
    # address is undone on the reply (what kubeadm's preflight asks of every node).
    _sysctl("net.bridge.bridge-nf-call-iptables", "1")


def down() -> None:
    """Remove the bridge, the forward rule, the kubelets' iptables chains and the blackholes (after
    every pod is gone; kube-proxy's own chains go with `kube-proxy --cleanup`)."""
    _ip("link", "del", BRIDGE, check=False)
    while _iptables("-C") == 0:
        _iptables("-D")
    for command in ("iptables", "ip6tables"):
        for table in ("filter", "nat", "mangle"):
            remove_kube_chains(command, table)
    for cidr in (POD_CIDR, SERVICE_CIDR):
        _ip("route", "del", "blackhole", cidr, "metric", str(BLACKHOLE_METRIC), check=False)


def leftovers() -> list[str]:
    """What of the bed's network is still on the host: nothing, once `down` ran."""
    found = [f"link {BRIDGE}"] if _ip("-j", "link", "show", BRIDGE, check=False).strip() else []
    blackholes = json.loads(_ip("-j", "route", "show", "type", "blackhole", check=False) or "[]")
    found += [
        f"blackhole {route['dst']}" for route in blackholes if route.get("dst") in (POD_CIDR, SERVICE_CIDR)
    ]
    if _iptables("-C") == 0:
        found.append("iptables -t mangle FORWARD " + " ".join(_FORWARD_RULE))
    for command in ("iptables", "ip6tables"):
        for table in ("filter", "nat", "mangle"):
            listed = subprocess.run(
                [command, "-w", "-t", table, "-S"], capture_output=True, text=True, check=False
            )
            found += [
                f"{command} -t {table} {rule}" for rule in listed.stdout.splitlines() if "KUBE-" in rule
            ]
    return found


def remove_kube_chains(command: str, table: str) -> None:
    """Delete every KUBE-* chain of table and the rules that jump to one (the kubelet makes
    KUBE-FIREWALL and KUBE-KUBELET-CANARY, and no cleanup of its own removes them)."""
    listed = subprocess.run([command, "-w", "-t", table, "-S"], capture_output=True, text=True, check=False)
    rules = listed.stdout.splitlines()
    for rule in rules:
        words = rule.split()
        jumps = words[words.index("-j") + 1] if "-j" in words else ""
        if words[:1] == ["-A"] and not words[1].startswith("KUBE-") and jumps.startswith("KUBE-"):
            subprocess.run([command, "-w", "-t", table, "-D", *words[1:]], capture_output=True, check=False)
    chains = [rule.split()[1] for rule in rules if rule.startswith("-N KUBE-")]
    for flag in ("-F", "-X"):
        for chain in chains:
            subprocess.run([command, "-w", "-t", table, flag, chain], capture_output=True, check=False)


def addresses() -> list[str]:
    shown = json.loads(_ip("-j", "addr", "show", "dev", BRIDGE, check=False) or "[]")
    return [
        info["local"] for link in shown for info in link.get("addr_info", []) if info.get("family") == "inet"
    ]


@attrs.frozen
class RouteCheck:
    """What the host does with a destination: the route `ip route get` picks."""

    destination: str
    kind: str
    """'bridge' (through BRIDGE), 'local' (an address of this host), 'blackhole', 'unreachable', or the
    device it would leave by."""


def route_of(destination: str) -> RouteCheck:
    done = subprocess.run(
        ["ip", "-j", "route", "get", destination], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return RouteCheck(destination, "blackhole" if "Invalid argument" in done.stderr else "unreachable")
    route = json.loads(done.stdout)[0]
    if route.get("type") in ("blackhole", "unreachable", "prohibit"):
        return RouteCheck(destination, "blackhole")
    dev = route.get("dev", "")
    if route.get("type") == "local" or dev == "lo":
        return RouteCheck(destination, "local")
    return RouteCheck(destination, "bridge" if dev == BRIDGE else dev)


def leaks(destinations: Sequence[str]) -> list[RouteCheck]:
    """Of destinations in the test bed's ranges, those the host would send anywhere but the bridge,
    itself or a blackhole (empty when the guarantee holds)."""
    kept = ("bridge", "local", "blackhole")
    return [check for check in map(route_of, destinations) if check.kind not in kept]
