"""Local HTTP endpoints for OpenAI-compatible clients: one fixed 200 reply (a proxy's error page, a body that is no
chat completion, a cut stream: what a client must report as the endpoint's failure), or replies made per request."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Reply = tuple[int, dict[str, str], bytes]  # status, headers, body


def completion(content: str) -> Reply:
    """A 200 chat completion whose one choice is an assistant message saying ``content``."""
    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}]}
    return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()


@contextmanager
def replying(reply: Callable[[], Reply]) -> Iterator[str]:
    """Answer every POST with ``reply()`` (called once a request, in turn); yields the base URL (``.../v1``)."""
    with replying_to(lambda _request: reply()) as url:
        yield url


@contextmanager
def replying_to(reply: Callable[[dict], Reply]) -> Iterator[str]:
    """Answer every POST with ``reply(request)``, the request its JSON body; yields the base URL (``.../v1``)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
            status, headers, body = reply(request)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


@contextmanager
def fixed_reply(ctype: str, body: bytes) -> Iterator[str]:
    """Serve ``body`` as ``Content-Type: ctype`` with status 200 to every POST; yields the base URL (``.../v1``)."""
    with replying(lambda: (200, {"Content-Type": ctype}, body)) as url:
        yield url
