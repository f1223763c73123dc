"""Export 100,000 synthetic (or ``--real``: tau-bench) trajectories in bounded memory; prints peak MB and rows/s.

The trajectories are generated straight into a JSONL file (never held in memory), then exported
with ``export_dataset`` (held-out scan, labelling for ``--source all``, cleaning, validation of
every record, writing). Memory is the process's peak RSS (``resource.getrusage``); the baseline
is the RSS right before the export starts, so "growth" is what the export itself added. A
streaming export's growth does not scale with the number of rows: run with ``--n 10000`` and
``--n 100000`` and compare.

``--real`` replaces the synthetic rows by the real tau-bench airline trajectories (200 records
of gpt-4o, imported to canonical JSONL as ``evoharness import`` writes them) replicated to
``--n``, each copy under fresh ids; their rows are long multi-turn tool-calling dialogues.

Each of ``--repeat`` exports is timed in CPU seconds of this process (min / median / max); the
peak RSS is over all of them. ``--labels`` first writes the labels file with ``evoharness label`` (untimed; with
``--against``, each tree's own ``label`` writes that tree's file) and exports with it: the unhealthy trajectories'
classes are read, not recomputed, where a label's digest and labeller fingerprint say it is the trajectory's and
the labeller's (trees from the seventeenth session on; older trees take every label as given). Each timed export
computes the labeller's fingerprint afresh (``fingerprint.code_digest``, ~250 files read and hashed once a process),
as one ``dataset export`` command does; without ``--labels`` no fingerprint is made.

``--store`` exports the service's ingest store instead of the file (``POST /datasets/export``'s source for healthy
and all): each tree's own ``IngestStore`` ingests the file first (untimed; labelled on arrival, as the service does),
and each timed export reads that tree's store; a tree that keeps the label's digest and fingerprint in the store
(from the eighteenth session on) reuses the stored labels, an older one labels every failed run again.

``--run`` exports a run's trajectory store instead (``dataset export -t RUN/trajectories.jsonl``): each tree's own
``TrajectoryStore`` stores the file's trajectories first, 200 a batch as a run's rollouts arrive (untimed), and a tree
that keeps the run's labels beside the store (``labels.jsonl``, from the nineteenth session on) labels each batch as
the run does; the export of that tree reuses them, an older tree's labels every failed run again.

``--sweep`` times the service's sweep instead of an export (``Daemon.sweep_ingested``, 500 rows a poll until none is
left): each tree's own ingest store as for ``--store``, a fresh copy of it for each sweep (copied untimed) into a new
training queue; "rows" are the trajectories queued. A tree from the twentieth session on queues a row under its checked
stored label in one transaction a poll; an older one labels every row again and commits each on its own.

``--render-under seed|evolved`` renders each record's system prompt under the template of a fresh seed
harness repo (``dataset export --render-under``); the CPU seconds then include the template render
process (a child of the export, ended before it returns; where it runs in its bubblewrap jail, the
jail's processes are adopted and reaped by this one, so the render process's CPU is counted too).

``--max-tokens N`` skips a record longer than N tokens (``dataset export --max-tokens``); ``--tokenizer DIR`` counts
tokens with a local tokenizer directory's chat template (``dataset export --tokenizer``; loaded once a process,
untimed) instead of the default byte estimate. Both to see what the token lengths cost in CPU and memory.

``--against TREE`` measures side by side: this checkout's evoharness and the one in ``TREE`` (another
checkout, or ``git archive REV | tar -x -C TREE``) export the same files in turn, A, B, A, B ..., each
export in a fresh process (``PYTHONPATH`` names the tree; one untimed export first, so imports and
first-call set-up are not timed); it prints each tree's rows per CPU-second and the ratio of each pair
(this / TREE), min / median / max over ``--repeat`` pairs, and each tree's peak RSS growth.

``--fresh`` times the command a user runs instead of an export in a warm process: each timed export is a new
``python -m evoharness dataset export`` process (its imports, settings and first-use set-up counted: a cold start),
its CPU and peak RSS by ``wait4``; the file (labelling its failed runs), ``--labels`` or ``--run``'s run directory
(``-t RUN``, the labels beside it read), always ``--keep-duplicates``, home in the temp dir (no training queue). One
untimed process per tree first; the processes run without ``PYTHONDONTWRITEBYTECODE``, so that the tree's ``.pyc``
files exist as an installed package's do (with it set and none written, every process compiles every module it
imports). ``--store`` and ``--sweep`` are the service's (no command), so not with ``--fresh``.

``--instructions`` prints the load-free figure instead of CPU seconds: the instructions of one export of the
``--n`` rows (``valgrind --tool=cachegrind``, which must be installed), counted as a fresh process that exports
twice less one that exports once (start-up, imports and first-call set-up cancel), ``PYTHONHASHSEED=0``; with
``--against TREE``, both trees' counts and their ratio. valgrind runs ~50x slower: ``--n 400`` is plenty.

    python benchmarks/export_scale.py [--n 100000] [--real] [--format openai|sharegpt|hf] [--placebo] [--labels]
        [--store | --run | --sweep] [--render-under seed|evolved] [--max-tokens N] [--tokenizer DIR] [--repeat 3]
        [--against TREE] [--instructions | --fresh]
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from inspect import signature
from pathlib import Path

from evoharness.benchrepeat import add_repeat, check_repeat, load_note, same_checkout, spread
from evoharness.datasets.export import JsonlSource, export_dataset
from evoharness.datasets.models import ExportFormat, SourceKind


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _line(i: int) -> bytes:
    task = f"task-{i % 500}"
    split = "heldout" if i % 10 == 9 else "dev"  # every tenth task is held out
    messages = [{"role": "system", "content": "You are the agent."},
                {"role": "user", "content": f"Task {task}, variant {i}: find the record and report it."}]
    for k in range(3):
        cid = f"c{k}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": cid, "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"key": f"k{i}-{k}"})}}]})
        result = f"record k{i}-{k}: value {i * 7 + k}"
        messages.append({"role": "tool", "tool_call_id": cid, "content": result})
    final = f"The record is k{i}-2 with value {i * 7 + 2}."
    messages.append({"role": "assistant", "content": final})
    traj = {"id": f"syn-{i}", "task_id": task, "split": split, "harness_commit": f"h{i % 3}",
            "model": "synthetic-4b", "rollout": i % 4, "task": f"Task {task}", "messages": messages,
            "final_answer": final, "score": 1.0 if i % 5 else 0.4, "meta": {"env": "synthetic"}}
    return json.dumps(traj).encode() + b"\n"


REAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"


def _real_lines(n: int):
    """``n`` canonical JSONL lines of the tau-bench trajectories, replicated under fresh ids."""
    from evoharness.traces.importers import load_paths

    base = [t.model_dump(mode="json") for t in load_paths([REAL])]
    for i in range(n):
        t = base[i % len(base)]
        copy = i // len(base)
        yield json.dumps({**t, "id": f"{t['id']}#{copy}", "rollout": copy, "split": "dev"}).encode() + b"\n"


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _adopt_orphans() -> None:
    """Make this process the reaper of its orphaned descendants (``PR_SET_CHILD_SUBREAPER``): bubblewrap's
    outer process (the render jail's) ends without waiting for its pid-1 process, whose CPU -- the render
    process's, which it waited for -- would then reach init, not ``RUSAGE_CHILDREN`` here."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _reap_adopted(wait_s: float = 5.0) -> None:
    """Wait for (and reap) the bwrap processes handed to this one by ``_adopt_orphans``, so their CPU counts."""
    me, deadline = os.getpid(), time.monotonic() + wait_s
    while time.monotonic() < deadline:
        kids = []
        for d in Path("/proc").iterdir():
            try:
                comm, rest = (d / "stat").read_text().rsplit(")", 1)
                if int(rest.split()[1]) == me and comm.endswith("(bwrap"):
                    kids.append(int(d.name))
            except (OSError, ValueError, IndexError):
                continue
        if not kids:
            return
        for pid in kids:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        time.sleep(0.005)


def _prompt(args):
    """``--render-under``: the harness prompt of a fresh seed harness repo (made once per process)."""
    if not args.render_under:
        return None
    if getattr(args, "_prompt", None) is None:
        from evoharness.datasets.prompts import resolve_prompt
        from evoharness.harness_repo.init import init_harness

        home = tempfile.mkdtemp(prefix="export-scale-harness-")
        atexit.register(shutil.rmtree, home, ignore_errors=True)
        repo = init_harness(Path(home) / "harness")
        args._prompt = resolve_prompt(str(repo.path), args.render_under)
    return args._prompt


def _tokens(args) -> dict:
    """``--max-tokens`` / ``--tokenizer``: the export's keyword arguments for them (the tokenizer loaded once a
    process, untimed)."""
    out = {}
    if args.max_tokens is not None:
        from evoharness.datasets.models import ExportFilters

        out["filters"] = ExportFilters(max_tokens=args.max_tokens)
    if args.tokenizer is not None:
        if getattr(args, "_counter", None) is None:
            from evoharness.datasets.tokens import ChatTemplateTokens

            args._counter = ChatTemplateTokens(args.tokenizer)
        out["tokens"] = args._counter
    return out


def _export_once(src: Path, labels: Path | None, out: Path, args) -> tuple[object, float, float]:
    """One export: (summary, CPU s, wall s). CPU s counts the export's child processes (the template
    render process of ``--render-under``) once they ended, which is before the export returns."""
    prompt = _prompt(args)
    tokens = _tokens(args)
    trajectories = JsonlSource(src)
    if args.run:  # ``labels`` is the tree's run directory (``_write_runs``): its store, with the labels it keeps
        trajectories, labels = JsonlSource(labels / "trajectories.jsonl"), None
    if args.sweep:  # ``labels`` is the tree's ingest store: a copy of it swept into a new queue (copied untimed)
        return _sweep_once(labels, out)
    if args.store:  # ``labels`` is the tree's ingest store (``_write_stores``)
        from evoharness.diagnosis.labeller import Labeller
        from evoharness.service.ingest import IngestStore

        trajectories, labels = IngestStore(labels, Labeller()).open(), None
    try:  # a CLI export makes the fingerprint once; a process's first export must not spare the next one that
        from evoharness.diagnosis.fingerprint import code_digest

        code_digest.cache_clear()
    except ImportError:  # an older tree: no fingerprint
        pass
    _adopt_orphans()
    t0, c0, w0 = time.process_time(), _children_cpu(), time.perf_counter()
    s = export_dataset(out, fmt=ExportFormat(args.format), source=SourceKind(args.source),
                       trajectories=trajectories, placebo=args.placebo,
                       **({"labels": labels} if labels else {}),  # older trees have no labels
                       # --real replicates the 200 tau-bench runs under fresh ids: identical records, which an export
                       # skips by default since the seventeenth session; kept, every row is written as before
                       **({"keep_duplicates": True} if "keep_duplicates" in signature(export_dataset).parameters
                          else {}),
                       **({"prompt": prompt} if prompt else {}), **tokens)
    _reap_adopted()
    return s, time.process_time() - t0 + _children_cpu() - c0, time.perf_counter() - w0


def _sweep_once(store: Path, out: Path) -> tuple[object, float, float]:
    """``--sweep``: the service's sweep of a fresh copy of ``store`` into a new training queue under ``out``, until no
    content failure is left unqueued (500 a poll, as the service's loop does): (counts, CPU s, wall s)."""
    from types import SimpleNamespace

    from evoharness.config import load_settings
    from evoharness.diagnosis.labeller import Labeller
    from evoharness.logging import configure_logging
    from evoharness.service.daemon import Daemon
    from evoharness.service.ingest import IngestStore

    configure_logging("error")  # the service logs each trajectory queued (info): not timed here
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    shutil.copyfile(store, out / "ingest.sqlite")
    ingest = IngestStore(out / "ingest.sqlite", Labeller()).open()
    daemon = Daemon(load_settings(None, [f"home={out / 'home'}", "log_level=error"], environ={}), ingest, quiet=True)
    labelled = []  # the trajectories the sweep labels (``label`` in older trees, ``first_signal`` since the twentieth)
    for name in ("label", "first_signal"):
        real = getattr(Labeller, name)
        setattr(ingest.labeller, name, lambda t, _real=real: labelled.append(1) or _real(ingest.labeller, t))
    t0, w0, queued = time.process_time(), time.perf_counter(), 0
    while ingest.unqueued_content(1):  # (an older sweep counted what it handed to the queue: the same here)
        queued += daemon.sweep_ingested()
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    ingest.close()
    counts = SimpleNamespace(records=queued, labels_reused=queued - len(labelled), heldout_tasks_excluded=0,
                             prompt_fallbacks=0, labels_relabelled={"labelled": len(labelled)} if labelled else {})
    return counts, cpu, wall


def _child(args) -> None:
    """``--child SRC LABELS|- OUT``: one untimed export, then one timed; prints a JSON line."""
    src, labels, out = Path(args.child[0]), None if args.child[1] == "-" else Path(args.child[1]), Path(args.child[2])
    _export_once(src, labels, out, args)
    base = _rss_mb()
    s, cpu, wall = _export_once(src, labels, out, args)
    print(json.dumps({"rows": s.records, "cpu": cpu, "wall": wall, "growth": _rss_mb() - base,
                      "reused": getattr(s, "labels_reused", 0), "relabelled": getattr(s, "labels_relabelled", {}),
                      "fallbacks": s.prompt_fallbacks}))


def _flags(args) -> list[str]:
    return ["--format", args.format, "--source", args.source] + (["--placebo"] if args.placebo else []) \
        + (["--store"] if args.store else []) + (["--run"] if args.run else []) \
        + (["--sweep"] if args.sweep else []) \
        + (["--render-under", args.render_under] if args.render_under else []) \
        + (["--max-tokens", str(args.max_tokens)] if args.max_tokens is not None else []) \
        + (["--tokenizer", str(args.tokenizer)] if args.tokenizer is not None else [])


def _passes(args) -> None:
    """``--child-passes SRC LABELS|- OUT N``: N exports, nothing printed (counted from outside by valgrind)."""
    src, labels, out, n = args.child_passes
    for _ in range(int(n)):
        _export_once(Path(src), None if labels == "-" else Path(labels), Path(out), args)


def _instructions(tree: Path, src: Path, labels: Path | None, d: Path, args) -> int:
    """Instructions of one export with ``tree``'s evoharness: a process exporting twice less one exporting once."""
    counts = []
    for n in (1, 2):
        cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", sys.executable,
               __file__, *_flags(args), "--child-passes", str(src), str(labels or "-"), str(d / "out-ir"), str(n)]
        done = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"},
                              capture_output=True, text=True, cwd=d)
        found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
        if done.returncode != 0 or not found:
            sys.exit(f"error: valgrind on the export with {tree} failed: "
                     f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}")
        counts.append(int(found.group(1).replace(",", "")))
    return counts[1] - counts[0]


def _trees(args) -> dict[str, Path]:
    trees = {"this": Path(__file__).resolve().parents[1]}
    if args.against is not None:
        trees["against"] = args.against.resolve()
    return trees


def _per_tree(trees: dict[str, Path], d: Path, file: str, argv: list[str], what: str) -> dict[str, Path]:
    """Each tree's ``d / file.format(name)``, written by ``argv + [PATH]`` run on that tree's code (untimed)."""
    out = {}
    for name, tree in trees.items():
        out[name] = d / file.format(name)
        done = subprocess.run([sys.executable, *argv, str(out[name])],
                              env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True, cwd=d)
        if done.returncode != 0:
            sys.exit(f"error: {what} with {tree} failed: {done.stderr.strip().splitlines()[-1:]}")
    return out


def _write_labels(trees: dict[str, Path], src: Path, d: Path) -> dict[str, Path]:
    """Each tree's labels file for ``src``, written by that tree's ``evoharness label`` (untimed)."""
    return _per_tree(trees, d, "labels-{}.jsonl", ["-m", "evoharness", "label", str(src), "--out"],
                     "`evoharness label`")


def _write_stores(trees: dict[str, Path], src: Path, d: Path) -> dict[str, Path]:
    """Each tree's ingest store of ``src``, ingested (and labelled on arrival) by that tree's code (untimed)."""
    return _per_tree(trees, d, "ingest-{}.sqlite", [__file__, "--child-ingest", str(src)], "ingesting")


def _write_runs(trees: dict[str, Path], src: Path, d: Path) -> dict[str, Path]:
    """Each tree's run directory holding ``src``'s trajectories as that tree's run stores them (untimed)."""
    return _per_tree(trees, d, "run-{}", [__file__, "--child-run", str(src)], "storing the run")


def _store_run(src: Path, run_dir: Path) -> None:
    """``--child-run SRC DIR``: the file's trajectories into a run's trajectory store, 200 a batch, each batch
    labelled and its labels kept beside the store as ``graph.source.GraphSource`` does (where the tree's store keeps
    labels)."""
    from evoharness.diagnosis.labeller import Labeller
    from evoharness.diagnosis.models import LabelLine
    from evoharness.traces.store import TrajectoryStore, read_trajectories

    store, labeller = TrajectoryStore(run_dir / "trajectories.jsonl"), Labeller()
    keeps = "labels" in signature(store.add).parameters
    fingerprint = labeller.fingerprint if keeps else None

    def add(batch):
        if not keeps:
            store.add(batch)
            return
        labels = {t.id: labeller.label(t) for t in batch}
        store.add(batch, labels=lambda t, digest: LabelLine.of(
            labels[t.id], trajectory_sha256=digest, labeller_fingerprint=fingerprint).model_dump_json())

    batch = []
    for t in read_trajectories(src):
        batch.append(t)
        if len(batch) == 200:
            add(batch)
            batch = []
    add(batch)


def _ingest(src: Path, store: Path) -> None:
    """``--child-ingest SRC STORE``: the file's trajectories into a new ingest store, 200 a batch."""
    from evoharness.diagnosis.labeller import Labeller
    from evoharness.service.ingest import IngestStore
    from evoharness.traces.store import read_trajectories

    s = IngestStore(store, Labeller()).open()
    batch = []
    for t in read_trajectories(src):
        batch.append(t)
        if len(batch) == 200:
            s.add(batch)
            batch = []
    s.add(batch)
    s.close()


def _count(src: Path, labels: dict[str, Path] | None, d: Path, args) -> None:
    trees = _trees(args)
    print(f"trajectories: {args.n} {'real tau-bench' if args.real else 'synthetic'}  format: {args.format}  source: "
          f"{args.source}  labels: {_labels_kind(args, labels)}  (instructions: valgrind, load-free)")
    found = {}
    for name, tree in trees.items():
        found[name] = _instructions(tree, src, labels and labels[name], d, args)
        print(f"{name:>8} ({tree}): {found[name] / 1e6:,.0f} M instructions per export, "
              f"{found[name] / args.n / 1e3:,.0f} k per row")
    if "against" in found:
        print(f"ratio this/against, instructions: {found['this'] / found['against']:.3f}x")


def _side_by_side(src: Path, labels: dict[str, Path] | None, d: Path, args) -> None:
    trees = _trees(args)
    flags = _flags(args)
    runs: dict[str, list[dict]] = {k: [] for k in trees}
    for _ in range(args.repeat):
        for name, tree in trees.items():  # in turn, so that a load spike hits both
            env = {**os.environ, "PYTHONPATH": str(tree)}
            mine = labels[name] if labels else "-"
            cmd = [sys.executable, __file__, *flags, "--child", str(src), str(mine), str(d / f"out-{name}")]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=d)
            if done.returncode != 0:
                sys.exit(f"error: the export with {tree} failed: {done.stderr.strip().splitlines()[-1:]}")
            runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    _header(args, labels, runs, f"render under: {args.render_under or '-'}")
    rate = {k: [r["rows"] / r["cpu"] for r in rs] for k, rs in runs.items()}
    for name, tree in trees.items():
        print(f"{name:>8} ({tree}): rows per CPU-second {spread(rate[name], ',.0f')}; CPU s per export "
              f"{spread([r['cpu'] for r in runs[name]])}; peak RSS growth "
              f"{spread([r['growth'] for r in runs[name]], '.1f', ' MB')}; labels reused {runs[name][0]['reused']}"
              f"{_relabelled(runs[name][0].get('relabelled'))}; "
              f"prompts fallen back {runs[name][0].get('fallbacks', 0)}")
    _ratio(rate, args.repeat)


def _header(args, labels: dict[str, Path] | None, runs: dict[str, list[dict]], how: str) -> None:
    """The first line of a side-by-side or ``--fresh`` table: what was exported, the rows each export wrote, ``how``
    the exports ran (the one field the two modes differ in) and the machine's load."""
    rows = {r["rows"] for rs in runs.values() for r in rs}
    print(f"trajectories: {args.n} {'real tau-bench' if args.real else 'synthetic'}  exported rows: "
          f"{'/'.join(map(str, sorted(rows)))}  format: {args.format}  source: {args.source}  "
          f"labels: {_labels_kind(args, labels)}  {how}  ({load_note()})")


def _ratio(rate: dict[str, list[float]], repeat: int) -> None:
    """The last line of a table with ``--against``: this tree's rows per CPU-second over the other's, pair by pair."""
    ratios = [a / b for a, b in zip(rate["this"], rate["against"], strict=True)]
    print(f"ratio this/against, rows per CPU-second, {repeat} pairs: {spread(ratios, '.2f', 'x')}")


def _fresh_once(tree: Path, src: Path, labels: Path | None, d: Path, out: Path, args) -> dict:
    """``--fresh``: one ``evoharness dataset export`` process with ``tree``'s code: its rows, CPU s (user + system)
    and peak RSS (MB), from ``wait4``."""
    cmd = [sys.executable, "-m", "evoharness", "--set", f"home={d / 'home'}", "dataset", "export", "--out", str(out),
           "--format", args.format, "--source", args.source, "--keep-duplicates"]
    if args.run:  # ``labels`` is the tree's run directory: its store, the labels beside it read by the command
        cmd += ["-t", str(labels / "trajectories.jsonl")]
    else:
        cmd += ["-t", str(src)] + (["--labels", str(labels)] if labels else [])
    cmd += (["--placebo"] if args.placebo else []) \
        + (["--max-tokens", str(args.max_tokens)] if args.max_tokens is not None else []) \
        + (["--tokenizer", str(args.tokenizer)] if args.tokenizer is not None else [])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with (d / "fresh.out").open("w+b") as out_fh, (d / "fresh.err").open("w+b") as err_fh:
        proc = subprocess.Popen(cmd, env={**env, "PYTHONPATH": str(tree)}, stdout=out_fh, stderr=err_fh, cwd=d)
        _, status, ru = os.wait4(proc.pid, 0)  # this process's own rusage (not Popen.wait's: it gives none)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out_fh.seek(0)
        err_fh.seek(0)
        stdout, stderr = out_fh.read().decode(errors="replace"), err_fh.read().decode(errors="replace")
    if proc.returncode != 0:
        sys.exit(f"error: the export with {tree} failed: {stderr.strip().splitlines()[-1:]}")
    found = re.search(r"wrote ([\d,]+) record", stdout)
    return {"rows": int(found.group(1).replace(",", "")), "cpu": ru.ru_utime + ru.ru_stime,
            "rss": ru.ru_maxrss / 1024}


def _fresh(src: Path, labels: dict[str, Path] | None, d: Path, args) -> None:
    """``--fresh``: fresh-process exports, the trees in turn (one untimed each first)."""
    trees = _trees(args)
    runs: dict[str, list[dict]] = {k: [] for k in trees}
    for i in range(args.repeat + 1):
        for name, tree in trees.items():
            found = _fresh_once(tree, src, labels and labels[name], d, d / f"out-{name}", args)
            if i:
                runs[name].append(found)
    _header(args, labels, runs, "fresh process each: `evoharness dataset export`")
    rate = {k: [r["rows"] / r["cpu"] for r in rs] for k, rs in runs.items()}
    for name, tree in trees.items():
        rss = spread([r["rss"] for r in runs[name]], ".0f", " MB")
        print(f"{name:>8} ({tree}): rows per CPU-second {spread(rate[name], ',.0f')}; CPU s per process "
              f"{spread([r['cpu'] for r in runs[name]])}; peak RSS {rss}")
    if "against" in rate:
        _ratio(rate, args.repeat)


def main() -> None:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=DefaultsHelp)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--real", action="store_true", help="real tau-bench trajectories instead of synthetic ones")
    ap.add_argument("--format", default="openai", choices=[f.value for f in ExportFormat])
    ap.add_argument("--source", default="all", choices=["all", "healthy"])
    ap.add_argument("--placebo", action="store_true")
    ap.add_argument("--keep", type=Path, help="write the export here instead of a temp dir")
    ap.add_argument("--labels", action="store_true", help="export with a labels file (written first, untimed)")
    ap.add_argument("--store", action="store_true",
                    help="export the service's ingest store of the trajectories (ingested first, untimed)")
    ap.add_argument("--run", action="store_true",
                    help="export a run's trajectory store of the trajectories, with the labels it keeps (stored "
                         "first, untimed)")
    ap.add_argument("--sweep", action="store_true",
                    help="time the service's sweep of the ingest store's content failures into a new training queue "
                         "(the store ingested first, untimed) instead of an export; rows = trajectories queued")
    ap.add_argument("--render-under", choices=["seed", "evolved"],
                    help="render each record's system prompt under a fresh seed harness repo's template")
    ap.add_argument("--max-tokens", type=int, metavar="N", help="skip a record longer than N tokens (dataset export's)")
    ap.add_argument("--tokenizer", type=Path, metavar="DIR",
                    help="count tokens with this local tokenizer directory's chat template (dataset export's)")
    ap.add_argument("--against", type=Path, metavar="TREE",
                    help="another evoharness tree: export with both in turn and print the ratio")
    ap.add_argument("--instructions", action="store_true",
                    help="count the instructions of one export with valgrind (load-free) instead of CPU seconds")
    ap.add_argument("--fresh", action="store_true",
                    help="time whole `evoharness dataset export` processes (a cold start: imports and set-up counted) "
                         "instead of exports in a warm process")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--child-passes", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--child-ingest", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--child-run", nargs=2, help=argparse.SUPPRESS)
    add_repeat(ap)
    args = ap.parse_args()
    if args.child_ingest:
        _ingest(Path(args.child_ingest[0]), Path(args.child_ingest[1]))
        return
    if args.child_run:
        _store_run(Path(args.child_run[0]), Path(args.child_run[1]))
        return
    if args.child:
        _child(args)
        return
    if args.child_passes:
        _passes(args)
        return
    check_repeat(ap, args.repeat)
    if sum((args.store, args.labels, args.run, args.sweep)) > 1:
        ap.error("--labels (a labels file), --store (the ingest store's labels), --run (a run's) and --sweep are one "
                 "of four")
    if args.n < 1:
        ap.error("--n must be at least 1")
    if args.max_tokens is not None and args.max_tokens < 1:
        ap.error("--max-tokens must be at least 1")
    if args.tokenizer is not None and not args.tokenizer.is_dir():
        ap.error(f"--tokenizer {args.tokenizer}: no such directory (a tokenizer directory with its chat template)")
    if (args.max_tokens is not None or args.tokenizer is not None) and args.sweep:
        ap.error("--max-tokens and --tokenizer are an export's: --sweep exports nothing")
    if args.against is not None and not (args.against / "evoharness" / "__init__.py").is_file():
        ap.error(f"--against {args.against}: no evoharness package there")
    if args.fresh and (args.store or args.sweep or args.render_under or args.instructions or args.keep):
        ap.error("--fresh times the `dataset export` command: not with --store / --sweep (the service's), "
                 "--render-under, --instructions or --keep")
    if args.instructions and shutil.which("valgrind") is None:
        ap.error("--instructions needs valgrind (not found on PATH)")
    if args.real and not REAL.is_file():
        ap.error(f"--real needs the public tau-bench file {REAL} (../shared/data beside the repository)")

    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "trajectories.jsonl"
        with src.open("wb") as fh:
            lines = _real_lines(args.n) if args.real else (_line(i) for i in range(args.n))
            for line in lines:
                fh.write(line)
        labels = _write_labels(_trees(args), src, Path(d)) if args.labels else None
        if args.store or args.sweep:  # each tree's store, in the place of its labels file
            labels = _write_stores(_trees(args), src, Path(d))
        if args.run:  # each tree's run directory, in the place of its labels file
            labels = _write_runs(_trees(args), src, Path(d))
        if args.instructions:
            _count(src, labels, Path(d), args)
            return
        if args.fresh:
            _fresh(src, labels, Path(d), args)
            return
        if args.against is not None:
            _side_by_side(src, labels, Path(d), args)
            return
        out = args.keep or Path(d) / "out"
        base = _rss_mb()
        cpu, wall = [], []
        for _ in range(args.repeat):
            s, c, w = _export_once(src, labels and labels["this"], out, args)
            cpu.append(c)
            wall.append(w)
        peak = _rss_mb()
        size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 2**20
    print(f"trajectories: {args.n} {'real tau-bench' if args.real else 'synthetic'}  exported rows: {s.records}  "
          f"held-out excluded: {s.heldout_tasks_excluded}  ({load_note()})")
    print(f"format: {args.format}  source: {args.source}  placebo: {args.placebo}  render under: "
          f"{args.render_under or '-'} ({s.prompt_fallbacks} fell back)  output: {size:.1f} MB  "
          f"labels reused: {getattr(s, 'labels_reused', 0)}{_relabelled(getattr(s, 'labels_relabelled', None))}"
          + (f"  over --max-tokens: {s.skipped.get('over_max_tokens', 0)}" if args.max_tokens is not None else "")
          + (f"  tokens: {s.token_lengths.method}" if args.tokenizer is not None else ""))
    print(f"CPU s per export: {spread(cpu)}  (wall {spread(wall)}), over {args.repeat} exports")
    print(f"rows/s: {spread([s.records / c for c in cpu], ',.0f')} rows per CPU-second")
    print(f"peak RSS: {peak:.1f} MB  (baseline before export {base:.1f} MB, growth {peak - base:.1f} MB)")


def _labels_kind(args, labels) -> str:
    return "the store's" if args.store or args.sweep else "the run's" if args.run else "yes" if labels else "no"


def _relabelled(why: dict | None) -> str:
    """", labelled again N (reason n, ...)" when a label was not reused, else nothing."""
    if not why:
        return ""
    return f", labelled again {sum(why.values())} ({', '.join(f'{k} {v}' for k, v in sorted(why.items()))})"


if __name__ == "__main__":
    same_checkout(__file__)
    main()
