"""What a training-queue URL says before any database is opened: its form, the SQLite file it names, whether
it can be written. Read by the settings (``datasets.url``, checked as they load) and by the queue itself, so
a URL that can hold no queue is refused wherever it is given."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

BACKENDS = ("sqlite", "postgresql")
URL_FORM = "a queue URL is sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"

# scheme://user:PASSWORD@ in a URL SQLAlchemy cannot parse: all to the last '@' goes (more rather than less)
_USERINFO_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:/@]*:).*@", re.DOTALL)
_TRUE = ("1", "true", "yes", "on")


def default_url(home: Path) -> str:
    """The SQLite queue under ``home`` (the directory is created when the queue opens). Here, not in ``queue``:
    `dataset export --source all` asks whether that file exists before it opens any queue, and importing ``queue``
    imports SQLAlchemy (~0.17 s of CPU), which an export with no queue yet never uses."""
    return f"sqlite:///{Path(home) / 'queue.db'}"


def shown(url: str) -> str:
    """The URL as messages show it: its password, if any, as ***."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    try:
        parsed = make_url(url)
    except (SQLAlchemyError, ValueError):  # unparsable ('postgresql://u:pw@[::1'): still no password shown
        return _USERINFO_PASSWORD.sub(r"\1***@", url)
    return url if parsed.password is None else parsed.render_as_string(hide_password=True)


def parse(url: str):
    """SQLAlchemy's URL of ``url``, or the reason it can hold no queue (a str): a NUL, not a database URL, a
    backend the queue does not run on, an in-memory SQLite database (what is enqueued there is gone when the
    process ends)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    named = shown(url)
    if "\x00" in url:  # sqlite3 raised ValueError (embedded null byte), a traceback after its retries
        return f"{named!r} holds a NUL character, which no path can hold; {URL_FORM}"
    try:
        parsed = make_url(url)
    except (SQLAlchemyError, ValueError):
        return f"{named!r} is not a database URL; {URL_FORM}"
    if parsed.get_backend_name() not in BACKENDS:
        return f"{named!r}: unsupported scheme {parsed.drivername!r}; {URL_FORM}"
    if parsed.get_backend_name() == "sqlite" and (
        parsed.database in (None, "", ":memory:")
        or _query(parsed, "mode") == "memory"
        or str(parsed.database).startswith("file::memory:")
    ):  # "3 newly queued (3 in queue)", then all gone
        return (
            f"{named!r} is an in-memory database, gone when the command ends: nothing enqueued would be "
            f"kept; {URL_FORM}"
        )
    return parsed


def _query(parsed, key: str) -> str:
    value = parsed.query.get(key, "")
    return (value[-1] if isinstance(value, tuple) and value else str(value)).lower()


def sqlite_path(parsed) -> Path | None:
    """The file a SQLite URL names: its database, or for a URI URL (``sqlite:///file:PATH?...&uri=true``) the
    PATH of the ``file:`` URI (``file:///abs``, ``file://localhost/abs`` and percent escapes as SQLite reads
    them), not a directory named ``file:``."""
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database:
        return None
    if _query(parsed, "uri") in _TRUE and database.startswith("file:"):
        rest = database[len("file:") :]
        if rest.startswith("//"):  # an authority: empty or localhost
            rest = rest[2:]
            rest = rest[rest.find("/") :] if "/" in rest else ""
        return Path(unquote(rest)) if rest else None
    return Path(database)


def read_only(parsed) -> bool:
    """A SQLite URI URL that opens its file read-only (``mode=ro``, ``immutable=1``): a queue to read, never one
    to write."""
    return (
        parsed.get_backend_name() == "sqlite"
        and _query(parsed, "uri") in _TRUE
        and (_query(parsed, "mode") == "ro" or _query(parsed, "immutable") in _TRUE)
    )
