"""structlog set-up: JSON lines in a cluster, readable console output on a terminal."""

from __future__ import annotations

import logging
import sys

import structlog


def configure_logging(log_format: str = "json", level: str = "info") -> None:
    """Route structlog (and stdlib logging from libraries) to stderr in one format."""
    numeric_level = logging.getLevelNamesMapping()[level.upper()]
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.types.Processor
    if log_format == "console":
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    elif log_format == "json":
        renderer = structlog.processors.JSONRenderer()
        shared.append(structlog.processors.format_exc_info)
    else:
        raise ValueError(f"unknown log format {log_format!r} (json or console)")
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric_level),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
    logging.basicConfig(level=max(numeric_level, logging.WARNING), stream=sys.stderr, force=True)
