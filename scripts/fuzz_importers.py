"""Fuzz the trace importers: mutate each sample N times and import every variant (every format).

    .venv/bin/python scripts/fuzz_importers.py            # 1,000 variants per format
    .venv/bin/python scripts/fuzz_importers.py -n 200 --format atif --seed 7

A variant may import (trajectories) or be refused (``InputError``: one line naming file and record);
anything else -- a traceback -- is a bug, and so is a variant that takes over ``--slow`` seconds (10) to
import or refuse (a hang): the script prints it and exits 1. Mutations (1 to 3 per
variant, seeded): delete a key, replace a value by another JSON type / an extreme number / a long or
empty string / deep nesting, duplicate or drop list items, truncate the file, flip bytes.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path

from evoharness.errors import InputError
from evoharness.traces.importers import load_paths

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "traces"
DATA = ROOT / "tests" / "fixtures" / "data"  # the vendored public trace sets (whole records)
SAMPLES = {
    "atif": [FIX / "atif" / "trial-1" / "agent" / "trajectory.json", FIX / "atif" / "multi-agent.json"],
    "tau2": [FIX / "tau2" / "results.json"],
    "otlp": sorted((FIX / "otlp").glob("*.json*")),
    "langsmith": sorted((FIX / "langsmith").glob("*.json*")),
    "mini-swe-agent": [*sorted((DATA / "mini_swe_agent_sample" / "trajs").glob("*/*.traj.json"))[:2],
                       *sorted((FIX / "mini_swe_v2").glob("*/django__django-12708/*.traj.json"))],  # v1, v2
    "swe-agent": sorted((FIX / "swe_agent" / "experiments" / "trajs").glob("*.traj"))[:1],
    "agentrx-tau": [FIX / "agentrx_tau" / "tau_dataset" / "2.json"],
    # Who&When's Algorithm-Generated logs only: Hand-Crafted is a held-out test set (``HELD_OUT``)
    "who-and-when": sorted((DATA / "who_and_when" / "Who&When" / "Algorithm-Generated").glob("*.json"))[:3],
    "agentrx": [FIX / "ag2" / "chat_history.json"],  # AG2's tool calls; AgentRx's Magentic-One runs: ``HELD_OUT``
    "autogen": sorted((FIX / "autogen").glob("*.json")),
    "openhands": [FIX / "openhands" / "output.jsonl", FIX / "openhands_v1" / "output.jsonl"],  # classic, V1 SDK
    "nebius-swe-agent": [FIX / "nebius_swe_agent" / "sample.jsonl"],
}
# Samples of a held-out test set (AgentRx's Magentic-One runs), fuzzed only with --held-out: a mutated copy is never
# scored or printed, but the default run opens no file of a test set (TEAM hygiene: never tune on, open or print one).
HELD_OUT = {"agentrx": sorted((DATA / "agentrx_magentic_one" / "trajectories").glob("*.json"),
                              key=lambda p: p.stat().st_size)[:2]}
ROOTS = {"mini-swe-agent": DATA / "mini_swe_agent_sample", "who-and-when": DATA / "who_and_when",
         "agentrx": DATA / "agentrx_magentic_one", "swe-agent": FIX / "swe_agent" / "experiments",
         "agentrx-tau": FIX / "agentrx_tau"}  # a variant keeps its path under its root (joins)
SLOW_S = 10.0


def _derived_samples(tmp: Path) -> None:
    """openai (tau-bench records, three of them) and canonical (the same, imported and written back)."""
    from evoharness.traces.store import write_trajectories

    src = DATA / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"
    records = json.loads(src.read_text())[:3]
    (tmp / "openai").mkdir(exist_ok=True)
    (tmp / "openai" / "tau-bench.json").write_text(json.dumps(records))
    SAMPLES["openai"] = [tmp / "openai" / "tau-bench.json"]
    ROOTS["openai"] = tmp / "openai"
    (tmp / "canonical").mkdir(exist_ok=True)
    write_trajectories(tmp / "canonical" / "trajs.jsonl", list(load_paths([SAMPLES["openai"][0]], "openai")))
    SAMPLES["canonical"] = [tmp / "canonical" / "trajs.jsonl"]
    ROOTS["canonical"] = tmp / "canonical"


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


def _get(node, path):
    for p in path:
        node = node[p]
    return node


DEEP = "__deeply_nested__"  # replaced in the file's text by 5,000 nested lists
BIGINT = "__big_integer__"  # replaced by a 5,000-digit integer (past Python's int/str conversion limit)
QUADRATIC = "a-" * 60_000  # 120 KB that a backtracking id-token regex took minutes over


def _odd_value(rng: random.Random):
    return rng.choice([
        None, True, 0, -1, 2**70, -2**70, 1e308, 0.5, "", "x" * 5000, "Error: boom", [], {}, [None], {"": None},
        "\u0000\ud7ff", "cut \ud83d", "1" * 30, ["a", 1, None], {"role": 3}, DEEP, BIGINT, QUADRATIC])


def mutate(data, rng: random.Random):
    data = copy.deepcopy(data)
    for _ in range(rng.randint(1, 3)):
        paths = list(_paths(data))
        path = rng.choice(paths)
        if not path:
            if rng.random() < 0.2:
                data = _odd_value(rng)
            continue
        parent, key = _get(data, path[:-1]), path[-1]
        op = rng.random()
        if op < 0.3 and isinstance(parent, dict):
            del parent[key]
        elif op < 0.4 and isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key])) if rng.random() < 0.5 else parent.pop(key)
        else:
            parent[key] = _odd_value(rng)
    return data


def variant_bytes(raw: bytes, is_jsonl: bool, rng: random.Random) -> bytes:
    r = rng.random()
    if r < 0.1:
        return raw[: rng.randint(0, len(raw))]
    if r < 0.15:
        b = bytearray(raw)
        for _ in range(rng.randint(1, 5)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    if is_jsonl:
        lines = [json.loads(x) for x in raw.splitlines() if x.strip()]
        i = rng.randrange(len(lines))
        lines[i] = mutate(lines[i], rng)
        text = "\n".join(json.dumps(x) for x in lines)
    else:
        text = json.dumps(mutate(json.loads(raw), rng))
    return text.replace(json.dumps(DEEP), "[" * 5000 + "]" * 5000).replace(json.dumps(BIGINT), "1" * 5000).encode()


def fuzz(fmt: str, n: int, seed: int, out=sys.stdout, slow_s: float = SLOW_S) -> dict[str, int]:
    rng = random.Random(f"{seed}:{fmt}")
    counts = {"variants": 0, "imported": 0, "refused": 0, "tracebacks": 0, "slow": 0}
    worst = 0.0
    samples = SAMPLES[fmt]
    if not samples:
        raise SystemExit(f"no samples for {fmt} under {FIX}")
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(n):
            src = samples[i % len(samples)]
            raw = src.read_bytes()
            # keep the file's place in its layout (Harbor joins <trial>/result.json)
            root = ROOTS.get(fmt, FIX / fmt)
            root = root if src.is_relative_to(root) else FIX  # mini-swe-agent's v2 samples sit in the fixtures
            dst = Path(tmp) / f"v{i}" / src.relative_to(root)
            if fmt == "atif" and (src.parent.parent / "result.json").is_file():
                (dst.parent.parent).mkdir(parents=True, exist_ok=True)
                res = (src.parent.parent / "result.json").read_bytes()
                (dst.parent.parent / "result.json").write_bytes(res if rng.random() < 0.8 else variant_bytes(
                    res, False, rng))
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(variant_bytes(raw, src.suffix == ".jsonl", rng))
            counts["variants"] += 1
            start = time.monotonic()
            try:
                # written as `import` writes it: a lone surrogate got through the reading, then failed here
                n_traj = sum(1 for t in load_paths([dst], fmt) if label(t) is not None and t.model_dump_json())
                counts["imported" if n_traj else "refused"] += 1
            except InputError as e:
                counts["refused"] += 1
                if "\n" in str(e):
                    counts["tracebacks"] += 1
                    print(f"MULTI-LINE ERROR on {fmt} variant {i}: {e!r}", file=out)
            except Exception:  # noqa: BLE001 -- the point: report any traceback
                counts["tracebacks"] += 1
                print(f"TRACEBACK on {fmt} variant {i} (from {src.name}):\n{traceback.format_exc()}", file=out)
            took = time.monotonic() - start
            worst = max(worst, took)
            if took > slow_s:
                counts["slow"] += 1
                print(f"SLOW ({took:.1f}s) on {fmt} variant {i} (from {src.name})", file=out)
    counts["worst_ms"] = round(worst * 1000)
    return counts


_LABELLER = None


def label(traj):
    """Imported trajectories are also labelled (the detectors read the same hostile text)."""
    global _LABELLER
    if _LABELLER is None:
        from evoharness.diagnosis.labeller import Labeller

        _LABELLER = Labeller()
    return _LABELLER.label(traj)


def main(argv: list[str] | None = None) -> int:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=DefaultsHelp)
    ap.add_argument("-n", type=int, default=1000, help="variants per format")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--format", choices=sorted([*SAMPLES, "openai", "canonical"]), action="append",
                    help="formats (default: all)")
    ap.add_argument("--slow", type=float, default=SLOW_S, help="seconds over which a variant counts as a hang")
    ap.add_argument("--held-out", action="store_true",
                    help="also mutate the samples of a held-out test set (AgentRx Magentic-One: the agentrx format's "
                         "shape of it); off by default, so that no file of a test set is opened")
    args = ap.parse_args(argv)
    if args.held_out:
        for fmt, paths in HELD_OUT.items():
            SAMPLES[fmt] = [*paths, *SAMPLES[fmt]]
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        _derived_samples(Path(tmp))
        for fmt in args.format or sorted(SAMPLES):
            c = fuzz(fmt, args.n, args.seed, slow_s=args.slow)
            bad += c["tracebacks"] + c["slow"]
            print(f"{fmt}: {c['variants']} variants, {c['imported']} imported, {c['refused']} refused "
                  f"(InputError), {c['tracebacks']} tracebacks, {c['slow']} over {args.slow:g}s "
                  f"(slowest {c['worst_ms']} ms)", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    from evoharness.benchrepeat import same_checkout

    same_checkout(__file__)
    raise SystemExit(main())
