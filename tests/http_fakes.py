"""A local HTTP endpoint that answers every POST with one fixed 200 reply: a proxy's error page, a body that is no
chat completion, a cut stream -- what an OpenAI-compatible client must report as the endpoint's failure."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def fixed_reply(ctype: str, body: bytes) -> Iterator[str]:
    """Serve ``body`` as ``Content-Type: ctype`` with status 200 to every POST; yields the base URL (``.../v1``)."""

    class Page(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()
