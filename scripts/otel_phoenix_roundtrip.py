"""Round trip through a real Arize Phoenix: export trajectories over OTLP/HTTP, read them back with Phoenix's
own client, compare span count and every exported attribute.

    python3 -m venv /tmp/phx && /tmp/phx/bin/pip install arize-phoenix       # ~850 MB, not a CI dependency
    .venv/bin/python scripts/otel_phoenix_roundtrip.py --phoenix-python /tmp/phx/bin/python [TRACE_FILES...]

Starts ``phoenix serve`` on loopback (a free port, a temporary working dir), waits for /healthz, runs
``export-otel --endpoint``, then asks Phoenix (``phoenix.client.Client().spans.get_spans``) for the spans.
Exits 1 when a span is missing or an attribute differs.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from evoharness.traces.importers import load_paths
from evoharness.traces.otel_export import build_spans, export

ROOT = Path(__file__).resolve().parents[1]
READ = """import json, sys
from phoenix.client import Client
spans = Client(base_url=sys.argv[1]).spans.get_spans(project_identifier="default", limit=100000)
print(json.dumps(spans, default=str))"""


def _keyed(spans: list[tuple]) -> dict[tuple, dict]:
    """(trajectory id of the trace's root, rank in start order, span name) -> attributes."""
    traces: dict = {}
    for trace, start, name, attrs in spans:
        traces.setdefault(trace, []).append((start, name, attrs))
    out = {}
    for group in traces.values():
        group.sort(key=lambda x: (x[0], x[1], str(x[2].get("gen_ai.tool.call.id", ""))))
        tid = next(a.get("evoharness.trajectory_id") for _, n, a in group if "evoharness.trajectory_id" in a)
        for rank, (_, name, attrs) in enumerate(group):
            out[(tid, rank, name)] = attrs
    return out


def main() -> int:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=DefaultsHelp)
    ap.add_argument("--phoenix-python", required=True)
    ap.add_argument("files", nargs="*", default=[str(ROOT / "tests/fixtures/traces/tau2/results.json"),
                                                  str(ROOT / "tests/fixtures/traces/otlp/genai.jsonl"),
                                                  str(ROOT / "tests/fixtures/traces/atif")])
    args = ap.parse_args()
    trajs = list(load_paths(args.files))
    # what we send, span by span (the same spans export() builds)
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    mem = InMemorySpanExporter()
    prov = TracerProvider()
    prov.add_span_processor(SimpleSpanProcessor(mem))
    build_spans(trajs, prov)
    sent = _keyed([(s.context.trace_id, s.start_time, s.name, dict(s.attributes))
                   for s in mem.get_finished_spans()])
    n_sent = len(mem.get_finished_spans())
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    http_port = port.getsockname()[1]
    port.close()
    with tempfile.TemporaryDirectory() as wd:
        env = {**os.environ, "PHOENIX_WORKING_DIR": wd, "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(http_port),
               "PHOENIX_GRPC_PORT": "0"}
        t0 = time.monotonic()
        proc = subprocess.Popen([str(Path(args.phoenix_python).parent / "phoenix"), "serve"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{http_port}"
        try:
            while time.monotonic() - t0 < 300:
                try:
                    if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.5)
            print(f"phoenix ready in {time.monotonic() - t0:.1f} s", flush=True)
            n = export(trajs, endpoint=base)
            time.sleep(2)
            got = json.loads(subprocess.run([args.phoenix_python, "-c", READ, base], capture_output=True,
                                            text=True, check=True).stdout)
        finally:
            proc.terminate()
            proc.wait(30)
    back = _keyed([(g["context"]["trace_id"], g["start_time"], g["name"], g["attributes"] or {}) for g in got])
    bad = 0
    for key, attrs in sent.items():
        if key not in back:
            bad += 1
            print(f"missing span {key}")
            continue
        for k, v in attrs.items():
            if back[key].get(k) != v:
                bad += 1
                print(f"{key}: {k} sent {str(v)[:80]!r}, read back {str(back[key].get(k))[:80]!r}")
    n_attrs = sum(len(a) for a in sent.values())
    print(f"{n} trajectories: {n_sent} spans sent, {len(got)} read back by phoenix.client; "
          f"{n_attrs} attributes compared, {bad} missing or different")
    return 1 if bad or len(got) != n_sent else 0


if __name__ == "__main__":
    from evoharness.benchrepeat import same_checkout

    same_checkout(__file__)
    sys.exit(main())
