"""structlog set-up: console renderer on a TTY; otherwise JSON lines for a log collector (`serve`) and one
plain ``warning: event: detail (key=value ...)`` line for a person (every other command, whose stderr also
carries its progress and ``error:`` lines).

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


def plain_line(_logger: Any, method: str, event_dict: dict[str, Any]) -> str:
    """A structlog renderer: ``warning: sandbox_limit_fallback: cannot mount a tmpfs (run_id=...)``, one line
    (an exception's traceback, when a call logs one, follows it)."""
    fields = dict(event_dict)
    fields.pop("timestamp", None)
    level = fields.pop("level", method)
    line = f"{level}: {fields.pop('event', '')}"
    exc = fields.pop("exception", None)
    detail = fields.pop("detail", None)
    if detail is not None:
        line += f": {' '.join(str(detail).split())}"
    rest = " ".join(f"{k}={' '.join(str(v).split())}" for k, v in fields.items())
    return line + (f" ({rest})" if rest else "") + (f"\n{exc.rstrip()}" if exc else "")


def configure_logging(level: str = "info", fmt: str = "auto", *, collector: bool = False) -> None:
    """``fmt``: console | json | plain | auto (console on a TTY; otherwise JSON when ``collector`` -- a
    service whose log a collector reads -- and a plain line for a person)."""
    import structlog

    if fmt == "auto":
        fmt = "console" if sys.stderr.isatty() else "json" if collector else "plain"
    renderer = (structlog.dev.ConsoleRenderer() if fmt == "console" else
                structlog.processors.JSONRenderer() if fmt == "json" else plain_line)
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
