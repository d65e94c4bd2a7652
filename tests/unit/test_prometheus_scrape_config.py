"""The test bed Prometheus' scrape job: plain HTTP by default, and HTTPS with a bearer token file as
Prometheus Operator writes a secure ServiceMonitor endpoint (the chart's metrics.secure)."""

from __future__ import annotations

from pathlib import Path

from valkey_testbed import prometheus as prom


def test_a_plain_scrape_presents_nothing() -> None:
    job = prom.scrape_config(prom.PodScrape(Path("/kubeconfig"), ("ns",), "app=x"))
    assert job["scheme"] == "http"
    assert "authorization" not in job and "tls_config" not in job


def test_a_secure_scrape_is_https_with_the_token_file() -> None:
    scrape = prom.PodScrape(
        Path("/kubeconfig"),
        ("ns",),
        "app=x",
        scheme="https",
        insecure_skip_verify=True,
        bearer_token_file=Path("/tmp/token"),
    )
    job = prom.scrape_config(scrape)
    assert job["scheme"] == "https"
    assert job["tls_config"] == {"insecure_skip_verify": True}
    assert job["authorization"] == {"type": "Bearer", "credentials_file": "/tmp/token"}
