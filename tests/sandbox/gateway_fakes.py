"""A fake OpenAI-compatible upstream on loopback for the gateway tests: scripted replies, recorded requests."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


def completion(content: str | None = "ok", tool_calls: list[dict] | None = None,
               usage: dict | None = USAGE) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    out: dict[str, Any] = {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "fake",
                           "choices": [{"index": 0, "message": message,
                                        "finish_reason": "tool_calls" if tool_calls else "stop"}]}
    if usage is not None:
        out["usage"] = usage
    return out


def tool_call(name: str, args: dict, call_id: str = "call_1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


class FakeUpstream:
    """Answers each POST with the next queued ``(status, payload)`` (default: 200 ``completion()``)."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, dict[str, Any]]] = []
        self.requests: list[dict[str, Any]] = []  # {"path", "headers", "body"}
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake._record(self, None)
                self._send(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake._record(self, body)
                with fake._lock:
                    status, payload = fake.replies.pop(0) if fake.replies else (200, completion())
                self._send(status, payload)

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def _record(self, handler: BaseHTTPRequestHandler, body: dict | None) -> None:
        with self._lock:
            self.requests.append({"path": handler.path, "headers": dict(handler.headers), "body": body})

    def queue(self, *replies: tuple[int, dict[str, Any]]) -> None:
        with self._lock:
            self.replies.extend(replies)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def plain_harness(tmp_path: Path, files: dict[str, str] | None = None) -> Path:
    """A plain (non-git) harness directory under ``tmp_path``, readable by the sandbox's uid."""
    path = tmp_path / "harness"
    path.mkdir()
    for name, text in (files if files is not None else {"lessons.md": ""}).items():
        (path / name).write_text(text)
    tmp_path.chmod(0o755)
    return path

