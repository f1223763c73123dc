"""export-otel against a real Arize Phoenix on loopback: spans sent over OTLP/HTTP, read back through Phoenix's
own client; every span arrives and every attribute we sent is intact."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from evoharness.cli import main
from evoharness.traces.importers import load_paths
from evoharness.traces.otel_export import build_spans

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    # here, not at the module's top: `phoenix.client` imports the whole Phoenix server (~5,000 modules, ~8 CPU-s),
    # and every xdist worker imports every test module at collection, whether it runs this file or not
    pytest.importorskip("phoenix.client", reason="arize-phoenix is a dev dependency")
    port = _free_port()
    work = tmp_path_factory.mktemp("phoenix")
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(work), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(_free_port())}
    exe = shutil.which("phoenix", path=str(Path(sys.executable).parent)) or "phoenix"
    log = (work / "server.log").open("wb")
    proc = subprocess.Popen([exe, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 240
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"phoenix serve exited {proc.returncode}: {(work / 'server.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("phoenix did not answer /healthz within 240 s")
            time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _expected(trajs):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    mem = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(mem))
    build_spans(trajs, provider)
    return mem.get_finished_spans()


def _by_trajectory(spans):
    """trajectory id -> the trace's spans as (name, attributes), in start order."""
    traces = {}
    for trace_id, start, name, attrs in spans:
        traces.setdefault(trace_id, []).append((start, name, str(attrs.get("gen_ai.tool.call.id", "")), attrs))
    out = {}
    for group in traces.values():
        group.sort(key=lambda x: x[:3])
        tid = next(a["evoharness.trajectory_id"] for *_, a in group if "evoharness.trajectory_id" in a)
        out[tid] = [(name, attrs) for _, name, _, attrs in group]
    return out


def test_spans_round_trip_through_phoenix(phoenix, tmp_path, capsys):
    from phoenix.client import Client

    from evoharness.traces.store import write_trajectories

    trajs = list(load_paths([FIXTURES / "tau2" / "results.json", FIXTURES / "otlp" / "genai.jsonl",
                             FIXTURES / "atif"]))
    write_trajectories(tmp_path / "t.jsonl", trajs)
    sent = _expected(trajs)
    assert main(["export-otel", str(tmp_path / "t.jsonl"), "--endpoint", phoenix]) == 0
    assert f"exported {len(trajs)} trajectories as {len(trajs)} traces" in capsys.readouterr().out
    client = Client(base_url=phoenix)
    deadline = time.monotonic() + 60
    while True:  # Phoenix ingests asynchronously
        got = client.spans.get_spans(project_identifier="default", limit=10_000)
        if len(got) >= len(sent) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert len(got) == len(sent)
    want = _by_trajectory([(s.context.trace_id, s.start_time, s.name, dict(s.attributes)) for s in sent])
    back = _by_trajectory([(g["context"]["trace_id"], g["start_time"], g["name"], g["attributes"] or {})
                           for g in got])
    assert set(back) == {t.id for t in trajs} == set(want)
    compared = 0
    for tid, spans in want.items():
        assert [n for n, _ in back[tid]] == [n for n, _ in spans], tid
        for (name, attrs), (_, read) in zip(spans, back[tid], strict=True):
            for key, value in attrs.items():
                assert read.get(key) == value, (tid, name, key)
                compared += 1
    assert compared > 200
    # the errors we marked are errors in Phoenix too
    assert {g["name"] for g in got if g.get("status_code") == "ERROR"} >= {"execute_tool get_weather"}
