"""`openai:URL` without `#model` resolves to the server's one model, asked once on the host."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evoharness.agent.models import resolve_model_spec
from evoharness.errors import InputError


@pytest.fixture
def models_server():
    served: dict[str, list[str]] = {"ids": []}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 -- http.server's name
            body = json.dumps({"object": "list", "data": [{"id": i, "object": "model"} for i in served["ids"]]})
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", served
    server.shutdown()


def test_one_served_model_is_taken(models_server):
    url, served = models_server
    served["ids"] = ["smollm2"]
    assert resolve_model_spec(f"openai:{url}") == f"openai:{url}#smollm2"
    assert resolve_model_spec(f"openai:{url}/") == f"openai:{url}#smollm2"


def test_named_models_and_other_specs_are_left_alone(models_server):
    url, _ = models_server
    for spec in (f"openai:{url}#gpt-x", "scripted:weak", "gateway:/s.sock#m"):
        assert resolve_model_spec(spec) == spec


@pytest.mark.parametrize("ids", [[], ["a", "b"]])
def test_none_or_several_models_ask_the_user_to_name_one(models_server, ids):
    url, served = models_server
    served["ids"] = ids
    with pytest.raises(InputError, match=f"serves {len(ids)} models.*name one"):
        resolve_model_spec(f"openai:{url}")


def test_an_unreachable_server_is_one_clear_line():
    with pytest.raises(InputError, match="cannot list the server's models"):
        resolve_model_spec("openai:http://127.0.0.1:9/v1", timeout_s=2)
