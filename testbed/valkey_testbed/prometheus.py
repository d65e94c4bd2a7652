"""A real Prometheus for tests: it discovers pods through the test bed's API server and scrapes them.

The operator's metrics, dashboard and alerts are only proven by a real
Prometheus reading them, so the test bed runs one (built by `build.py` from
the pinned `github.com/prometheus/prometheus` module) as a `processes`
record: listening on 127.0.0.1 on a free port, its data in a temp directory,
configured with `kubernetes_sd_configs` (role `pod`) from a kubeconfig,
restricted to given namespaces and a label selector. A pod is scraped on its
container port named `metrics`, at its pod IP (loopback here, real in a
cluster). `honor_labels` keeps the `namespace`/`pod` labels the operator puts
on `valkey_node_*` series; series without them get the scraped pod's. Rule
files given to `start` are evaluated as a Prometheus server evaluates them, so
tests see alerts pending and firing (`alerts`, `rules`).

The HTTP helpers are synchronous (urllib): call them through
`asyncio.to_thread` from async tests.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import yaml

from valkey_testbed import processes
from valkey_testbed.build import binaries
from valkey_testbed.wait import NotYet, eventually_blocking

JOB = "valkey-operator"
PORT_NAME = "metrics"
SCRAPE_INTERVAL = "2s"


class PrometheusError(RuntimeError):
    """Prometheus refused a request or did not start; the message carries its answer or log path."""


@attrs.frozen
class PodScrape:
    """Which pods one scrape job discovers: by namespace and label selector, through a kubeconfig."""

    kubeconfig: Path
    namespaces: tuple[str, ...]
    label_selector: str
    job: str = JOB
    port_name: str = PORT_NAME
    scheme: str = "http"
    insecure_skip_verify: bool = False
    """A self-signed serving certificate (the operator's metrics.secure): trust the caller check instead."""
    bearer_token_file: Path | None = None
    """The scraper's token, presented as `Authorization: Bearer` (a ServiceMonitor's bearerTokenFile)."""


def scrape_config(scrape: PodScrape, interval: str = SCRAPE_INTERVAL) -> dict[str, Any]:
    """One scrape job: Running pods matching the selector, on their container port named port_name;
    over HTTPS with a token when the PodScrape says so, as Prometheus Operator translates a
    ServiceMonitor endpoint's scheme, tlsConfig and bearerTokenFile."""
    security: dict[str, Any] = {"scheme": scrape.scheme}
    if scrape.insecure_skip_verify:
        security["tls_config"] = {"insecure_skip_verify": True}
    if scrape.bearer_token_file is not None:
        security["authorization"] = {"type": "Bearer", "credentials_file": str(scrape.bearer_token_file)}
    return {
        "job_name": scrape.job,
        "scrape_interval": interval,
        "scrape_timeout": interval,
        "honor_labels": True,
        **security,
        "kubernetes_sd_configs": [
            {
                "role": "pod",
                "kubeconfig_file": str(scrape.kubeconfig),
                "namespaces": {"names": list(scrape.namespaces)},
                "selectors": [{"role": "pod", "label": scrape.label_selector}],
            }
        ],
        "relabel_configs": [
            {
                "source_labels": ["__meta_kubernetes_pod_container_port_name"],
                "regex": scrape.port_name,
                "action": "keep",
            },
            {"source_labels": ["__meta_kubernetes_pod_phase"], "regex": "Running", "action": "keep"},
            {
                # The pod role already targets podIP:port; spelled out so the intent survives edits.
                "source_labels": ["__meta_kubernetes_pod_ip", "__meta_kubernetes_pod_container_port_number"],
                "regex": "(.+);(.+)",
                "replacement": "$1:$2",
                "target_label": "__address__",
            },
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        ],
    }


def config(
    scrapes: Sequence[PodScrape], interval: str = SCRAPE_INTERVAL, rule_files: Sequence[Path] = ()
) -> dict[str, Any]:
    """The whole prometheus.yml: a short global interval for tests (scrapes and rule evaluation), one
    job per PodScrape, and the rule files to evaluate."""
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": [scrape_config(scrape, interval) for scrape in scrapes],
    }


@attrs.frozen
class Prometheus:
    """A running Prometheus we started: its process record, port and private directory."""

    record: processes.ProcessRecord
    port: int
    directory: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.directory / "prometheus.log"

    def _get(self, path: str, params: dict[str, str] | None = None, timeout: float = 10.0) -> Any:
        """GET path; the decoded JSON `data` of a success, PrometheusError with its `error` otherwise."""
        query = "?" + urllib.parse.urlencode(params) if params else ""
        try:
            with urllib.request.urlopen(self.url + path + query, timeout=timeout) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:  # 400/422/503 carry a JSON error body
            text = exc.read().decode(errors="replace")
            try:
                body = json.loads(text)
            except ValueError:
                raise PrometheusError(f"GET {path} {params}: HTTP {exc.code}: {text[:500]}") from None
        if body.get("status") != "success":
            raise PrometheusError(f"GET {path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def ready(self) -> bool:
        """/-/ready answers 200 (config loaded, TSDB open)."""
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=2.0) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until /-/ready; fails at once, naming the log, if the process exited."""

        def check() -> bool | NotYet:
            if not self.record.alive():
                raise PrometheusError(f"prometheus exited; see {self.log}:\n{_tail(self.log)}")
            return self.ready() or NotYet("not ready")

        eventually_blocking(check, f"prometheus on {self.url} ready", timeout, interval=0.2)

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant PromQL query: the result list (vector samples; a scalar comes back as one entry)."""
        data = self._get("/api/v1/query", {"query": expr})
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        result: list[dict[str, Any]] = data["result"]
        return result

    def targets(self) -> list[dict[str, Any]]:
        """Active targets: each with labels, scrapeUrl, health (up/down/unknown) and lastError."""
        data = self._get("/api/v1/targets", {"state": "active"})
        active: list[dict[str, Any]] = data["activeTargets"]
        return active

    def alerts(self) -> list[dict[str, Any]]:
        """Alerts the rule files raise now: each with labels, annotations, state (pending/firing), value."""
        data = self._get("/api/v1/alerts")
        found: list[dict[str, Any]] = data["alerts"]
        return found

    def rules(self) -> list[dict[str, Any]]:
        """Every loaded rule (flattened from its group): name, query, health and lastError of its last
        evaluation."""
        data = self._get("/api/v1/rules")
        return [rule for group in data["groups"] for rule in group["rules"]]

    def parse(self, expr: str) -> dict[str, Any]:
        """The syntax tree Prometheus' own parser makes of expr (/api/v1/parse_query), as JSON."""
        tree: dict[str, Any] = self._get("/api/v1/parse_query", {"query": expr})
        return tree

    def stop(self) -> None:
        """Stop the process (by its record) and remove its directory."""
        processes.stop([self.record])
        shutil.rmtree(self.directory, ignore_errors=True)


def _tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def start(
    scrapes: Sequence[PodScrape],
    *,
    interval: str = SCRAPE_INTERVAL,
    rule_files: Sequence[Path] = (),
    executable: Path | None = None,
    directory: Path | None = None,
) -> Prometheus:
    """Start Prometheus on 127.0.0.1 (a free port) with config(scrapes, interval, rule_files); not yet
    ready on return."""
    directory = directory or Path(tempfile.mkdtemp(prefix="valkey-operator-prometheus-"))
    directory.mkdir(parents=True, exist_ok=True)
    config_file = directory / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(config(scrapes, interval, rule_files), sort_keys=False))
    port = processes.free_port()
    record = processes.start(
        "prometheus",
        [
            executable or binaries().prometheus,
            f"--config.file={config_file}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=1h",
            "--log.level=warn",
        ],
        directory / "prometheus.log",
    )
    return Prometheus(record, port, directory)
