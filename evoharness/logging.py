"""structlog set-up: console renderer on a TTY; otherwise JSON lines for a log collector (`serve`) and one
plain ``warning: event: detail (key=value ...)`` line for a person (every other command, whose stderr also
carries its progress and ``error:`` lines).

Bind ``run_id``, ``round`` and ``candidate`` with ``bind_contextvars`` (structlog's, below)
at each unit of work; every log line then carries them.

structlog (and the rich tracebacks and asyncio it pulls in, ~0.13 s of CPU) is imported on first use, not when a
module asks for its logger, nor when a command configures its logging: a sandboxed rollout worker or a ``dataset
export`` that logs nothing never imports it. ``configure_logging`` before structlog's import keeps the choice (the
format decided then, as ``auto`` sees stderr then) and applies it at the first log call, before the line is made.
"""

from __future__ import annotations

import logging
import sys
import threading
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


# The configuration a command asked for before structlog was imported: (level number, format), applied by
# ``_structlog``; until then an event below the level is dropped without importing structlog (``_LazyLogger``).
_pending: tuple[int, str] | None = None
_pending_lock = threading.Lock()
# A logger method's level, as structlog's filtering logger reads it (a method not here imports structlog).
_METHOD_LEVEL = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "warn": logging.WARNING,
                 "error": logging.ERROR, "exception": logging.ERROR, "critical": logging.CRITICAL,
                 "fatal": logging.CRITICAL}


def configure_logging(level: str = "info", fmt: str = "auto", *, collector: bool = False) -> None:
    """``fmt``: console | json | plain | auto (console on a TTY; otherwise JSON when ``collector`` -- a
    service whose log a collector reads -- and a plain line for a person). Where structlog is not imported yet,
    it is configured so at the first log call at or above ``level`` (``_structlog``), not imported here."""
    global _pending
    if fmt == "auto":
        fmt = "console" if sys.stderr.isatty() else "json" if collector else "plain"
    number = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    if "structlog" in sys.modules:
        _pending = None
        _configure(number, fmt)
    else:
        _pending = (number, fmt)


def _structlog() -> Any:
    """structlog, imported, with the configuration ``configure_logging`` kept for it applied -- unless structlog was
    imported elsewhere since and configured there (``structlog.testing.capture_logs``): the later configuration
    stands, as it would have over one made at once."""
    global _pending
    imported = "structlog" in sys.modules
    import structlog

    if _pending is not None:
        with _pending_lock:  # a second thread's first log call waits for the configuration, never logs before it
            if _pending is not None:
                level, fmt = _pending
                if not (imported and structlog.is_configured()):
                    _configure(level, fmt)
                _pending = None
    return structlog


def bind_contextvars(**fields: Any) -> None:
    """``structlog.contextvars.bind_contextvars``: every later log line of this context carries ``fields``."""
    _structlog().contextvars.bind_contextvars(**fields)


def unbind_contextvars(*keys: str) -> None:
    _structlog().contextvars.unbind_contextvars(*keys)


def _configure(level: int, fmt: str) -> None:
    import structlog

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
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),
        cache_logger_on_first_use=False,
    )


def _drop(*_args: Any, **_kw: Any) -> None:
    """A log call below the configured level, made while structlog is not imported: what its filtering logger does."""


class _LazyLogger:
    """``structlog.get_logger(name)``, made on the first call of any of its methods -- but a call below the level
    ``configure_logging`` kept while structlog is not imported is dropped, as structlog would drop it: ``dataset
    export``'s closing info event at the default warning level imported structlog for nothing."""

    def __init__(self, name: str | None) -> None:
        self._name = name
        self._logger: Any = None

    def __getattr__(self, attr: str) -> Any:
        if self._logger is None:
            if _pending is not None and attr in _METHOD_LEVEL and _METHOD_LEVEL[attr] < _pending[0] \
                    and "structlog" not in sys.modules:
                return _drop
            self._logger = _structlog().get_logger(self._name)
        return getattr(self._logger, attr)


def get_logger(name: str | None = None) -> structlog.stdlib.BoundLogger:
    return _LazyLogger(name)  # type: ignore[return-value]
