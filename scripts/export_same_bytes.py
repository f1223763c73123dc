"""Byte-identity check of exports (the export helpers' check since the twenty-sixth session): the same inputs exported
62 ways by two trees, every output file's SHA-256 compared.

    PYTHONPATH=TREE python scripts/export_same_bytes.py prepare WORK        # once, any tree: the inputs
    PYTHONPATH=TREE python scripts/export_same_bytes.py run WORK OUT.txt TAG  # per tree; TAG names its store / run
    python scripts/export_same_bytes.py compare BEFORE.txt AFTER.txt       # exit 1 when a line differs

The inputs (``prepare``, from ../shared/data beside the repository): the real tau-bench airline runs three times
(15% of the third copy marked held out) and 300 hostile mutations of them (arguments as objects or broken JSON, a
big integer, a developer turn, a trailing or mid-run system turn, content parts, declared tools holding NaN and
2**70, unanswered final calls, a duplicate id, a bad tool name, tool results dropped) and one run linked to a
held-out task; the mini-swe-agent sample; Who&When Algorithm-Generated. ``run`` exports the tau rows as a file, as
an ingest store and as a run with its labels beside it (each written, labelled, by TREE's own code under
WORK/TAG), and the other two as files, in openai / sharegpt / hf x all / healthy / placebo / filters / a validation
split / kept duplicates / text-with-calls + --max-tokens: one line per export (its summary: records, labels
reused and relabelled, skips) and one per file (name, SHA-256, size; README.md and manifest.json with their
creation time and labeller fingerprint taken out)."""
import hashlib
import json
import random
import re
import shutil
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def prepare(work: Path) -> None:
    from evoharness.traces.importers import load_paths
    work.mkdir(parents=True, exist_ok=True)
    tau = [t.model_dump(mode="json") for t in load_paths([DATA / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"])]
    mini = [t.model_dump(mode="json") for t in load_paths([DATA / "mini_swe_agent_sample"])]
    ww = [t.model_dump(mode="json") for t in load_paths([DATA / "who_and_when" / "Who&When" / "Algorithm-Generated"])]
    rng = random.Random(17)
    rows = []
    for copy in range(3):
        for t in tau:
            t = json.loads(json.dumps(t))
            t["id"] = f"{t['id']}#{copy}"
            if copy == 2 and rng.random() < 0.15:
                t["split"] = "heldout"
            rows.append(t)
    # hostile mutations of copies
    muts = 0
    for i in range(300):
        t = json.loads(json.dumps(rng.choice(tau)))
        t["id"] = f"mut-{i}"
        msgs = t["messages"]
        k = rng.randrange(14)
        asst = [m for m in msgs if m.get("role") == "assistant" and m.get("tool_calls")]
        if k == 0 and asst:
            c = rng.choice(asst)["tool_calls"][0]
            c["function"]["arguments"] = json.loads(c["function"]["arguments"] or "{}")
        elif k == 1 and asst:
            rng.choice(asst)["tool_calls"][0]["function"]["arguments"] = "{not json"
        elif k == 2 and asst:
            big = '{"n": 123456789012345678901234567890, "f": 1.5e300}'
            rng.choice(asst)["tool_calls"][0]["function"]["arguments"] = big
        elif k == 3:
            msgs.insert(rng.randrange(len(msgs) + 1), {"role": "developer", "content": "dev note"})
        elif k == 4:
            msgs.append({"role": "user", "content": "thanks"})
        elif k == 5:
            msgs[rng.randrange(len(msgs))]["content"] = [{"type": "text", "text": "part a"}, "part b", {"x": 1}]
        elif k == 6 and asst:
            a = rng.choice(asst)
            a["content"] = "I will call it now."
        elif k == 7:
            t["meta"]["tools"] = [{"type": "function", "function": {"name": "get_user_details", "description": "d",
                                   "parameters": {"type": "object", "properties": {"x": {"default": float("nan")}}}}},
                                  {"name": "think", "parameters": {"type": "object", "properties": {}}}]
        elif k == 8:
            t["meta"]["tools"] = [{"type": "function", "function": {"name": "book_reservation", "description": "b",
                                   "parameters": {"type": "object", "properties": {"big": {"maximum": 2 ** 70}}}}}]
        elif k == 9 and asst:
            a = asst[-1]
            i2 = msgs.index(a)
            del msgs[i2 + 1:]  # final calls unanswered
        elif k == 10:
            t["id"] = rows[rng.randrange(len(rows))]["id"]  # duplicate id
        elif k == 11:
            msgs.insert(3, {"role": "system", "content": "mid"})
        elif k == 12 and asst:
            a = rng.choice(asst)
            a["tool_calls"][0]["function"]["name"] = "bad name!"
        elif k == 13:
            t["messages"] = [m for m in msgs if m.get("role") != "tool"]
        t["score"] = rng.choice([0.0, 1.0, None, 0.5])
        rows.append(t)
        muts += 1
    # the same run under another task id (a link)
    t = json.loads(json.dumps(tau[3]))
    t["id"] = "linked-1"
    t["task_id"] = "other-7"
    t["split"] = "heldout"
    rows.append(t)

    def write(name, items):
        with (work / name).open("w", encoding="utf-8") as fh:
            for x in items:
                fh.write(json.dumps(x, ensure_ascii=False, allow_nan=True) + "\n")

    write("tau.jsonl", rows)
    write("mini.jsonl", mini)
    write("ww.jsonl", ww)
    print(len(rows), len(mini), len(ww))


def ingest(work: Path, own: Path) -> None:
    """The store and run dir, with the tree on PYTHONPATH (the base tree, once)."""
    from evoharness.diagnosis.labeller import Labeller
    from evoharness.diagnosis.models import LabelLine
    from evoharness.service.ingest import IngestStore
    from evoharness.traces.store import TrajectoryStore, read_trajectories

    own.mkdir(parents=True, exist_ok=True)
    trajs = list(read_trajectories(work / "tau.jsonl"))
    s = IngestStore(own / "store.sqlite", Labeller()).open()
    for i in range(0, len(trajs), 200):
        s.add(trajs[i:i + 200])
    s.close()
    run = own / "run"
    run.mkdir(exist_ok=True)
    store, labeller = TrajectoryStore(run / "trajectories.jsonl"), Labeller()
    fp = labeller.fingerprint
    seen = set()
    for i in range(0, len(trajs), 200):
        batch = [t for t in trajs[i:i + 200] if not (t.id in seen or seen.add(t.id))]
        labels = {t.id: labeller.label(t) for t in batch}
        store.add(batch, labels=lambda t, digest, labels=labels: LabelLine.of(labels[t.id], trajectory_sha256=digest,
                                                               labeller_fingerprint=fp).model_dump_json())


def run(work: Path, out_txt: Path, tag: str) -> None:
    own = work / tag
    if not own.exists():  # the store and run dir written (labelled) by this tree's own code
        ingest(work, own)
    from evoharness.datasets.export import JsonlSource, export_dataset
    from evoharness.datasets.models import ExportFilters, ExportFormat, SourceKind
    from evoharness.diagnosis.labeller import Labeller
    from evoharness.errors import InputError
    from evoharness.logging import configure_logging
    from evoharness.service.ingest import IngestStore

    configure_logging("error")
    lines = []
    tmp = work / "tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()

    def source(kind):
        if kind == "store":
            shutil.copyfile(own / "store.sqlite", tmp / "store.sqlite")
            return IngestStore(tmp / "store.sqlite", Labeller()).open()
        if kind == "run":
            return JsonlSource(own / "run" / "trajectories.jsonl")
        return JsonlSource(work / f"{kind}.jsonl")

    variants = {
        "all": dict(source=SourceKind.all),
        "healthy": dict(source=SourceKind.healthy),
        "placebo": dict(source=SourceKind.all, placebo=True, placebo_window=50),
        "filters": dict(source=SourceKind.all, filters=ExportFilters(max_per_task=1, min_score=0.0)),
        "val": dict(source=SourceKind.all, val_fraction=0.2),
        "keepdup": dict(source=SourceKind.all, keep_duplicates=True),
        "textcalls": dict(source=SourceKind.all, filters=ExportFilters(skip_text_with_calls=True, max_tokens=5000)),
    }
    n = 0
    for kind in ("tau", "store", "run", "mini", "ww"):
        for fmt in ("openai", "sharegpt", "hf"):
            for vname, kw in variants.items():
                if fmt == "hf" and vname not in ("all", "val"):
                    continue
                if kind in ("mini", "ww") and vname not in ("all", "placebo", "keepdup"):
                    continue
                out = tmp / f"{kind}-{fmt}-{vname}"
                try:
                    s = export_dataset(out, fmt=ExportFormat(fmt), trajectories=source(kind), **kw)
                except InputError as e:
                    lines.append(f"{out.name} error {e}")
                    continue
                n += 1
                lines.append(f"{out.name} summary records={s.records} reused={s.labels_reused} "
                             f"skipped={json.dumps(s.skipped, sort_keys=True)} relabelled={s.labels_relabelled}")
                for p in sorted(out.rglob("*")):
                    if not p.is_file():
                        continue
                    data = p.read_bytes()
                    if p.name in ("README.md", "manifest.json"):
                        data = re.sub(rb'("created_at": ?"[^"]*")|(\*\*Created:\*\* [^\n]*)', b"", data)
                        data = re.sub(rb'rules-sha256:[0-9a-f]{64}', b"FP", data)
                    lines.append(f"{out.name}/{p.relative_to(out)} {hashlib.sha256(data).hexdigest()} {len(data)}")
    out_txt.write_text("\n".join(lines) + "\n")
    print(f"{n} exports, {len(lines)} lines -> {out_txt}")


def compare(before: Path, after: Path) -> int:
    """Print each line that differs (by output name); 1 when any does, else 0."""
    def lines(path: Path) -> dict[str, str]:
        return {ln.split(" ", 1)[0]: ln for ln in path.read_text().splitlines() if ln.strip()}

    a, b = lines(before), lines(after)
    differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    for k in differ:
        print(f"- {a.get(k, '(none)')}\n+ {b.get(k, '(none)')}")
    print(f"{len(a)} / {len(b)} lines, {len(differ)} differ")
    return 1 if differ else 0


def main(argv: list[str]) -> int:
    from evoharness.errors import InputError

    usage = "usage: export_same_bytes.py prepare WORK | run WORK OUT.txt TAG | compare BEFORE.txt AFTER.txt"
    if argv in (["-h"], ["--help"]):  # it was the usage error, exit 2
        print(__doc__)
        return 0
    try:
        if argv[:1] == ["prepare"] and len(argv) == 2:
            if not DATA.is_dir():  # a clone elsewhere than beside ../shared/data: it was a traceback from the importer
                raise InputError(str(DATA), "no such directory: prepare reads the public data folder beside the "
                                            "repository (../shared/data)")
            prepare(Path(argv[1]))
        elif argv[:1] == ["run"] and len(argv) == 4:
            run(Path(argv[1]), Path(argv[2]), argv[3])
        elif argv[:1] == ["compare"] and len(argv) == 3:
            return compare(Path(argv[1]), Path(argv[2]))
        else:
            print(f"error: {usage}", file=sys.stderr)
            return 2
    except (InputError, OSError) as e:  # a missing input (WORK not prepared, a summary file not there): one line
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    from evoharness.benchrepeat import same_checkout

    same_checkout(__file__)
    sys.exit(main(sys.argv[1:]))
