"""Fuzz the trace importers: mutate each library-made sample N times and import every variant.

    .venv/bin/python scripts/fuzz_importers.py            # 1,000 variants per format
    .venv/bin/python scripts/fuzz_importers.py -n 200 --format atif --seed 7

A variant may import (trajectories) or be refused (``InputError``: one line naming file and record);
anything else -- a traceback -- is a bug: the script prints it and exits 1. Mutations (1 to 3 per
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
import traceback
from pathlib import Path

from evoharness.errors import InputError
from evoharness.traces.importers import load_paths

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "traces"
SAMPLES = {
    "atif": [FIX / "atif" / "trial-1" / "agent" / "trajectory.json", FIX / "atif" / "multi-agent.json"],
    "tau2": [FIX / "tau2" / "results.json"],
    "otlp": sorted((FIX / "otlp").glob("*.json*")),
    "langsmith": sorted((FIX / "langsmith").glob("*.json*")),
}


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


def _odd_value(rng: random.Random):
    return rng.choice([
        None, True, 0, -1, 2**70, -2**70, 1e308, 0.5, "", "x" * 5000, "Error: boom", [], {}, [None], {"": None},
        "\u0000\ud7ff", "1" * 30, ["a", 1, None], {"role": 3}, DEEP])


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
    return text.replace(json.dumps(DEEP), "[" * 5000 + "]" * 5000).encode()


def fuzz(fmt: str, n: int, seed: int, out=sys.stdout) -> dict[str, int]:
    rng = random.Random(f"{seed}:{fmt}")
    counts = {"variants": 0, "imported": 0, "refused": 0, "tracebacks": 0}
    samples = SAMPLES[fmt]
    if not samples:
        raise SystemExit(f"no samples for {fmt} under {FIX}")
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(n):
            src = samples[i % len(samples)]
            raw = src.read_bytes()
            # keep the file's place in its layout (Harbor joins <trial>/result.json)
            dst = Path(tmp) / f"v{i}" / src.relative_to(FIX / fmt)
            if fmt == "atif" and (src.parent.parent / "result.json").is_file():
                (dst.parent.parent).mkdir(parents=True, exist_ok=True)
                res = (src.parent.parent / "result.json").read_bytes()
                (dst.parent.parent / "result.json").write_bytes(res if rng.random() < 0.8 else variant_bytes(
                    res, False, rng))
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(variant_bytes(raw, src.suffix == ".jsonl", rng))
            counts["variants"] += 1
            try:
                n_traj = sum(1 for _ in load_paths([dst], fmt))
                counts["imported" if n_traj else "refused"] += 1
            except InputError:
                counts["refused"] += 1
            except Exception:  # noqa: BLE001 -- the point: report any traceback
                counts["tracebacks"] += 1
                print(f"TRACEBACK on {fmt} variant {i} (from {src.name}):\n{traceback.format_exc()}", file=out)
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=1000, help="variants per format")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--format", choices=sorted(SAMPLES), action="append", help="formats (default: all)")
    args = ap.parse_args(argv)
    bad = 0
    for fmt in args.format or sorted(SAMPLES):
        c = fuzz(fmt, args.n, args.seed)
        bad += c["tracebacks"]
        print(f"{fmt}: {c['variants']} variants, {c['imported']} imported, {c['refused']} refused "
              f"(InputError), {c['tracebacks']} tracebacks", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
