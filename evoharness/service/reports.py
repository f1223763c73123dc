"""`GET /runs/{id}/report`: a run's report (`evoharness report`), rendered under the service's home.

Each request for the page renders the report afresh (a run in progress changes between requests)
into ``<home>/service/reports/<run id>/``: built in a sibling directory, then swapped in, under one
lock that the file reads take too, so the page and its PNGs always come from the same rendering
(matplotlib's pyplot is not thread-safe either). The page is served with ``<base href="report/">``,
so the PNGs it names resolve to ``/runs/{id}/report/<file>``.
"""

from __future__ import annotations

import re
import shutil
import threading
import uuid
from pathlib import Path

from evoharness.config import Settings
from evoharness.errors import InfraError

FILE_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.-]*\.(png|md|html)\Z")  # \Z: a final newline is no name
MEDIA_TYPES = {".png": "image/png", ".md": "text/markdown; charset=utf-8", ".html": "text/html; charset=utf-8"}
BASE = '<base href="report/">'
_STAGE = re.compile(r"\A\.[A-Za-z0-9][A-Za-z0-9._-]*\.[0-9a-f]{8}\.(new|old)\Z")  # render()'s siblings of a report


class ReportRenderer:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.root = Path(settings.home) / "service" / "reports"
        self._lock = threading.Lock()

    def render(self, run_id: str) -> str:
        """Render the run's report; returns report.html with the base its figure links need.

        Raises `InputError` when the run has measured nothing yet (nothing to report).
        """
        from evoharness.reports.report import build
        from evoharness.reports.runs import load_run

        record = load_run(self.settings, run_id, home_only=True)
        with self._lock:
            self._remove_stale()
            final = self.root / run_id
            fresh = self.root / f".{run_id}.{uuid.uuid4().hex[:8]}.new"
            old = self.root / f".{run_id}.{uuid.uuid4().hex[:8]}.old"
            try:
                build(record, fresh)
                if final.exists():
                    final.rename(old)
                fresh.rename(final)
            except OSError as e:
                raise InfraError(f"cannot write the report of {run_id} under {self.root}: {e}") from None
            finally:
                shutil.rmtree(fresh, ignore_errors=True)
                shutil.rmtree(old, ignore_errors=True)
            html = (final / "report.html").read_text()
        return with_base(html)

    def _remove_stale(self) -> None:
        """Remove the ``.<run id>.<hex>.new`` / ``.old`` directories a killed service left (one service per home,
        and renders take the lock: under it, no other rendering is using one)."""
        if not self.root.is_dir():
            return
        for path in self.root.iterdir():
            if _STAGE.match(path.name) and path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)

    def file(self, run_id: str, name: str) -> tuple[bytes, str] | None:
        """(content, media type) of a file of the run's last rendered report; None when there is none."""
        if not FILE_NAME.match(name):
            return None
        with self._lock:
            path = self.root / run_id / name
            if not path.is_file():
                return None
            return path.read_bytes(), MEDIA_TYPES[path.suffix]


def with_base(html: str) -> str:
    """``html`` with ``<base href="report/">`` as the first element of its head."""
    head = re.search(r"<head[^>]*>", html, flags=re.IGNORECASE)
    if head is None:
        return BASE + "\n" + html
    return html[: head.end()] + "\n" + BASE + html[head.end():]
