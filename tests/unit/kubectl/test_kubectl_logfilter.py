"""Which operator log lines are about one cluster, in both of the operator's log formats."""

from __future__ import annotations

import io

import pytest
import structlog

from valkey_operator.core.logging import configure_logging
from valkey_operator.kubectl import logfilter

JSON_LINES = [
    '{"pod": "cache-0-a", "shard": 0, "cluster": "shop/cache", "event": "created pod", "level": "info"}',
    '{"key": "shop/cache", "controller": "valkeycluster", "event": "reconciled", "level": "info"}',
    '{"key": "shop/cache", "controller": "valkeybackup", "event": "reconciled", "level": "info"}',
    '{"cluster": "shop/cache2", "event": "created pod", "level": "info"}',
    '{"cluster": "other/cache", "event": "created pod", "level": "info"}',
    '{"event": "starting workers", "controller": "valkeycluster", "workers": 4}',
    "Traceback (most recent call last):",
    "{not json",
    "",
]


def test_json_lines_naming_the_cluster_are_kept() -> None:
    kept = [line for line in JSON_LINES if logfilter.matches(line, "shop", "cache")]
    assert kept == JSON_LINES[:2]


def test_console_lines_naming_the_cluster_are_kept() -> None:
    lines = [
        "2026-12-03T13:20:00Z [info     ] created pod   cluster=shop/cache pod=cache-0-a shard=0",
        "2026-12-03T13:20:00Z [info     ] reconciled    controller=valkeycluster key=shop/cache result=ok",
        "2026-12-03T13:20:00Z [info     ] reconciled    controller=valkeycluster key=shop/cachex result=ok",
        "\x1b[2m2026-12-03T13:20:00Z\x1b[0m [info     ] created pod   "
        "\x1b[36mcluster\x1b[0m=\x1b[35mshop/cache\x1b[0m",
    ]
    assert [logfilter.matches(line, "shop", "cache") for line in lines] == [True, True, False, True]


@pytest.mark.parametrize("log_format", ["json", "console"])
def test_what_the_operator_logs_is_recognised(log_format: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The operator's own logging set-up, not a hand-written imitation of its lines."""
    configure_logging(log_format, "info")
    try:
        log = structlog.get_logger("test")
        log.info("created pod", pod="cache-0-a", shard=0, cluster="shop/cache")
        log.info("created pod", pod="other-0-a", shard=0, cluster="shop/other")
        lines = capsys.readouterr().err.splitlines()
    finally:
        structlog.reset_defaults()
    assert len(lines) == 2
    assert [logfilter.matches(line, "shop", "cache") for line in lines] == [True, False]


def test_since_takes_kubectl_durations() -> None:
    assert [logfilter.seconds(text) for text in ("30s", "5m", "1h30m", "2d")] == [30, 300, 5400, 172800]
    for bad in ("", "5", "5x", "m5", "1h 5m"):
        with pytest.raises(ValueError, match="--since"):
            logfilter.seconds(bad)


def test_saved_logs_are_filtered_line_by_line() -> None:
    from valkey_operator.kubectl.logs import keep

    assert list(keep(io.StringIO("\n".join(JSON_LINES)), "shop", "cache")) == [
        JSON_LINES[0] + "\n",
        JSON_LINES[1] + "\n",
    ]


def test_text_output_puts_time_level_and_event_first() -> None:
    assert logfilter.readable(JSON_LINES[0]) == "info created pod pod=cache-0-a shard=0 cluster=shop/cache"
    line = (
        '{"event": "reconciled", "timestamp": "2026-12-03T13:20:00Z", "level": "info", "key": "shop/cache"}'
    )
    assert logfilter.readable(line) == "2026-12-03T13:20:00Z info reconciled key=shop/cache"
    assert logfilter.readable("Traceback (most recent call last):") == "Traceback (most recent call last):"
