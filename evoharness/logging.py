"""structlog set-up: console renderer on a TTY, JSON lines otherwise.

Bind ``run_id``, ``round`` and ``candidate`` with ``structlog.contextvars.bind_contextvars``
at each unit of work; every log line then carries them.

structlog (and the rich tracebacks it pulls in, ~0.2-0.4 s) is imported on first use, not when a
module asks for its logger: a sandboxed rollout worker that logs nothing never imports it.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import structlog


class _Stderr:
    """Looks ``sys.stderr`` up at every write, so a replaced stderr (tests, daemons) is followed."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(level: str = "info", fmt: str = "auto") -> None:
    import structlog

    use_console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    renderer = structlog.dev.ConsoleRenderer() if use_console else structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
        ),
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),
        cache_logger_on_first_use=False,
    )


class _LazyLogger:
    """``structlog.get_logger(name)``, made on the first call of any of its methods."""

    def __init__(self, name: str | None) -> None:
        self._name = name
        self._logger: Any = None

    def __getattr__(self, attr: str) -> Any:
        if self._logger is None:
            import structlog

            self._logger = structlog.get_logger(self._name)
        return getattr(self._logger, attr)


def get_logger(name: str | None = None) -> structlog.stdlib.BoundLogger:
    return _LazyLogger(name)  # type: ignore[return-value]
