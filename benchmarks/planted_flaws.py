"""Planted harness defects, a known-answer suite: does a run find each one, repair it at the root, and
get back to where the un-flawed harness evolves to -- without queuing the defect's failures as training data?

Usage: python benchmarks/planted_flaws.py [--json] [--only NAME,...] [--rounds N] [--rollouts K]
                                           [--env synthetic] [--tasks N] [--squash] [--repeat N]
                                           [--seed S] [--out DIR] [--set planted|unseen|unseen2]

The seed: `evoharness init` plus one commit that turns two of the reference agent's controls on (loop
guard max_repeats 2, exit gate). Each defect is one more commit on main of that
seed, of its own kind (prompt, lessons, tool list, middleware, policies, budgets). Each harness, and the
un-flawed seed (the control), gets one `evoharness run` (standin:weak, playbook roles, in-process
rollouts; the same settings for all). Per defect:

- shown: the run's harness evidence names the defect (a linter finding in its file, or its commit as a
  culprit) -- or its dev composition differs from the control seed's (a class share off by >= 10 points);
- repaired: a merged candidate touched the defect's file;
- held-out: the evolved held-out mean is within noise (2 standard errors of the difference of two
  means of k x n rollouts, per-rollout SD from both runs) of the control's evolved held-out mean, or above it;
- gone: the defect's own check on main's files at the end (e.g. the middleware hook is gone);
- queued: trajectories of the defect's commits in the training queue (must be 0).

The stand-in's draws are seeded, so a second run prints the same table; ``--repeat N`` runs the suite
with N run seeds. ``--squash`` plants each defect in the harness's only commit, so no history can
point at it and only the linter (or the catalogue) can find it.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from evoharness.config import Settings
from evoharness.graph.runner import start_run
from evoharness.harness_repo.init import init_harness
from evoharness.harness_repo.seed import POLICIES, SYSTEM_PROMPT

GOOD_POLICIES = yaml.safe_dump({**yaml.safe_load(POLICIES), "loop_guard": {"enabled": True, "max_repeats": 2},
                                "exit_gate": {"enabled": True}}, sort_keys=False)


def _pol(**over) -> str:
    data = yaml.safe_load(GOOD_POLICIES)
    for k, v in over.items():
        data[k] = {**data[k], **v} if isinstance(v, dict) else v
    return yaml.safe_dump(data, sort_keys=False)


@dataclass
class Defect:
    name: str
    kind: str
    path: str
    files: dict[str, str | None]  # path -> new text (None = delete)
    present: Callable[[dict[str, str]], bool]  # on main's files: is the defect still there?


def _has(path: str, text: str) -> Callable[[dict[str, str]], bool]:
    return lambda files: text in files.get(path, "")


def _policy(key: str, pred: Callable[[object], bool]) -> Callable[[dict[str, str]], bool]:
    def check(files: dict[str, str]) -> bool:
        node: object = yaml.safe_load(files.get("policies.yaml", "")) or {}
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        return pred(node)
    return check


def env_tools(env: str) -> tuple[str, str]:
    """The environment's most used read tool and most used write tool (by its tasks' reference calls)."""
    from collections import Counter

    from evoharness.agent.scripted import READ_ONLY
    from evoharness.envs import get_environment

    e = get_environment(env)
    used = Counter(c.name for t in e.list_tasks("dev") for c in e.ground_truth_calls(t))
    reads = [n for n, _ in used.most_common() if READ_ONLY.match(n)]
    writes = [n for n, _ in used.most_common() if not READ_ONLY.match(n)]
    return reads[0], (writes or reads)[0]


def defects(env: str) -> list[Defect]:
    read, write = env_tools(env)
    verb, _, noun = write.partition("_")
    noun = noun.split("_")[0] or "thing"
    hidden = SYSTEM_PROMPT.replace("{% for tool in tools -%}", f"{{% for tool in tools if tool.name != '{read}' -%}}")
    no_tools = SYSTEM_PROMPT.replace("## How to work\n", "## How to work\n- Do not call any tools; answer from what "
                                     "you already know.\n")
    truncate = "def after_tool(call, result, ctx):\n    \"\"\"Keep tool results short.\"\"\"\n    return result[:12]\n"
    block = (f"def before_tool(call, ctx):\n    \"\"\"No {write}.\"\"\"\n"
             f"    if call['name'] == '{write}':\n        return 'Denied: {write} is disabled here.'\n")
    never = f"Never {verb} {noun}s yourself; the user does that."
    return [
        Defect("prompt_no_tools", "prompt", "prompts/system.md", {"prompts/system.md": no_tools},
               _has("prompts/system.md", "Do not call any tools")),
        Defect("prompt_hidden_tool", "tool list", "prompts/system.md", {"prompts/system.md": hidden},
               _has("prompts/system.md", f"tool.name != '{read}'")),
        Defect("lesson_bad_format", "lessons", "lessons.md",
               {"lessons.md": "### Arguments\nWrite tool arguments as key=value pairs, not JSON.\n"},
               _has("lessons.md", "key=value")),
        Defect("lesson_never_write", "lessons", "lessons.md", {"lessons.md": f"### {verb.title()}\n{never}\n"},
               _has("lessons.md", never)),
        Defect("middleware_truncate", "middleware", "middleware/shorten.py", {"middleware/shorten.py": truncate},
               lambda f: "after_tool" in f.get("middleware/shorten.py", "")),
        Defect("middleware_block", "middleware", "middleware/no_write.py", {"middleware/no_write.py": block},
               lambda f: "before_tool" in f.get("middleware/no_write.py", "")),
        Defect("policy_guard_1000", "policies", "policies.yaml",
               {"policies.yaml": _pol(loop_guard={"enabled": True, "max_repeats": 1000})},
               _policy("loop_guard.max_repeats", lambda v: not isinstance(v, int) or v > 12)),
        Defect("budget_max_steps_3", "budgets", "policies.yaml", {"policies.yaml": _pol(max_steps=3)},
               _policy("max_steps", lambda v: not isinstance(v, int) or v < 6)),
        Defect("lesson_three_words", "lessons", "lessons.md",
               {"lessons.md": "### Style\nKeep every answer under 3 words.\n"},
               _has("lessons.md", "under 3 words")),
    ]


def unseen_defects(env: str) -> list[Defect]:
    """Five more defects, of kinds the nine above do not cover (``--set unseen``): written after the nine were
    repaired, without reading the playbook's switches, so the roles were not written against their phrasing."""
    answer_first = SYSTEM_PROMPT.replace("## How to work\n", "## How to work\n- Give your answer first and keep tool "
                                         "use for follow-up questions.\n")
    lower = ("def before_tool(call, ctx):\n    \"\"\"Normalise string arguments so lookups match.\"\"\"\n"
             "    args = {k: v.strip().lower() if isinstance(v, str) else v for k, v in call['arguments'].items()}\n"
             "    return {**call, 'arguments': args}\n")
    cache = ("def before_tool(call, ctx):\n    \"\"\"Serve repeated lookups from the cache.\"\"\"\n"
             "    return ctx['scratch'].get('cache', {}).get(call['name'])\n\n\n"
             "def after_tool(call, result, ctx):\n    ctx['scratch'].setdefault('cache', {})[call['name']] = result\n"
             "    return None\n")
    return [
        Defect("prompt_answer_first", "prompt", "prompts/system.md", {"prompts/system.md": answer_first},
               _has("prompts/system.md", "Give your answer first")),
        Defect("middleware_lowercase_args", "middleware", "middleware/normalise.py",
               {"middleware/normalise.py": lower}, lambda f: ".lower()" in f.get("middleware/normalise.py", "")),
        Defect("middleware_cache_by_name", "middleware", "middleware/cache.py", {"middleware/cache.py": cache},
               lambda f: "before_tool" in f.get("middleware/cache.py", "")),
        Defect("lesson_fixed_reply", "lessons", "lessons.md",
               {"lessons.md": "### Replies\nReply with 'Done, see above.' when the task is finished.\n"},
               _has("lessons.md", "Done, see above.")),
        # replaced policy_nudge_every_1 (a nudge after every step), which nothing measured as a defect: the stand-in
        # reads its "if you already have what you need" as advice for when it is done, and the one real model we run
        # (benchmarks/nudge_real.py, SmolLM2-135M) answers no sooner with it (docs/benchmarks.md, "five unseen")
        Defect("policy_exit_gate_off", "policies", "policies.yaml",
               {"policies.yaml": _pol(exit_gate={"enabled": False})},
               _policy("exit_gate.enabled", lambda v: not v)),
    ]


def unseen2_defects(env: str) -> list[Defect]:
    """Five more, of kinds neither set above plants (``--set unseen2``), written the way a user's harness goes wrong
    and before the loop was run on them: lessons that contradict the prompt, a hook that drops results, a hook that
    clips the agent's answer, a context cap that cuts the prompt's tool list and rules, and a harness tool that
    shadows the environment's ``get_order`` (synthetic's) with a stub whose totals are in cents, not dollars."""
    no_answer = "### Finishing\nDo not write a final answer; the user reads the tool results directly.\n"
    drop = ("MAX_RESULT_CHARS = 80\n\n\ndef after_tool(call, result, ctx):\n"
            "    \"\"\"Bulky results flood the context: drop them, the model can ask a narrower question.\"\"\"\n"
            "    if len(result) > MAX_RESULT_CHARS:\n        return \"\"\n    return None\n")
    clip = ("MAX_REPLY_CHARS = 40\n\n\ndef after_model(message, ctx):\n"
            "    \"\"\"The chat widget shows 40 characters: keep replies within it.\"\"\"\n"
            "    if message.get(\"content\") and not message.get(\"tool_calls\"):\n"
            "        return {**message, \"content\": message[\"content\"][:MAX_REPLY_CHARS]}\n    return None\n")
    cap = ("MAX_SYSTEM_CHARS = 300\n\n\ndef before_model(messages, ctx):\n"
           "    \"\"\"Keep the system prompt within the context budget.\"\"\"\n"
           "    first = messages[0]\n"
           "    if first[\"role\"] == \"system\" and len(first[\"content\"]) > MAX_SYSTEM_CHARS:\n"
           "        return [{**first, \"content\": first[\"content\"][:MAX_SYSTEM_CHARS]}, *messages[1:]]\n"
           "    return None\n")
    stub = ('"""Order lookups served locally (kept from offline testing)."""\n\nimport json\n\n'
            'ORDERS = {"A-100": ("shipped", 4250), "A-101": ("pending", 1700), "B-200": ("delivered", 9999),\n'
            '          "C-300": ("cancelled", 525), "D-400": ("shipped", 6400)}\n\n\n'
            'def get_order(order_id: str) -> str:\n'
            '    """Get an order\'s status and total by its id."""\n'
            '    status, total = ORDERS.get(order_id, ("unknown", 0))\n'
            '    return json.dumps({"order_id": order_id, "status": status, "total": total})\n\n\n'
            'TOOLS = [get_order]\n')
    return [
        Defect("lesson_no_final_answer", "lessons vs prompt", "lessons.md", {"lessons.md": no_answer},
               _has("lessons.md", "Do not write a final answer")),
        Defect("middleware_drop_results", "middleware", "middleware/context.py", {"middleware/context.py": drop},
               lambda f: "after_tool" in f.get("middleware/context.py", "")),
        Defect("middleware_clip_answer", "middleware", "middleware/widget.py", {"middleware/widget.py": clip},
               lambda f: "after_model" in f.get("middleware/widget.py", "")),
        Defect("middleware_cap_prompt", "truncation", "middleware/budget.py", {"middleware/budget.py": cap},
               lambda f: "before_model" in f.get("middleware/budget.py", "")),
        Defect("tool_shadow_stub", "tools", "tools/orders.py", {"tools/orders.py": stub},
               lambda f: "TOOLS = [" in f.get("tools/orders.py", "")),
    ]


DEFECT_NAMES = ["prompt_no_tools", "prompt_hidden_tool", "lesson_bad_format", "lesson_never_write",
                "middleware_truncate", "middleware_block", "policy_guard_1000", "budget_max_steps_3",
                "lesson_three_words"]
UNSEEN_NAMES = ["prompt_answer_first", "middleware_lowercase_args", "middleware_cache_by_name", "lesson_fixed_reply",
                "policy_exit_gate_off"]
UNSEEN2_NAMES = ["lesson_no_final_answer", "middleware_drop_results", "middleware_clip_answer", "middleware_cap_prompt",
                 "tool_shadow_stub"]
SETS = {"planted": (defects, DEFECT_NAMES), "unseen": (unseen_defects, UNSEEN_NAMES),
        "unseen2": (unseen2_defects, UNSEEN2_NAMES)}


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=planter", "-c", "user.email=p@example.org",
                           *args], check=True, capture_output=True, text=True).stdout.strip()


def commit_files(root: Path, files: dict[str, str | None], message: str) -> str:
    for rel, text in files.items():
        p = root / rel
        if text is None:
            p.unlink(missing_ok=True)
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-qm", message)
    return git(root, "rev-parse", "HEAD")


def settings_for(root: Path, env: str, rounds: int, k: int, tasks: int, seed: int = 0) -> Settings:
    return Settings.model_validate({
        "home": root / "state", "log_format": "json", "log_level": "error",
        "run": {"harness": root / "harness", "env": env, "model": "standin:weak", "rollouts": k,
                "max_rounds": rounds, "budget": 20000, "checkpointer": "sqlite", "patience": 2,
                "dev_limit": tasks, "heldout_limit": tasks, "seed": seed},
        "sandbox": {"backend": "inprocess", "workers": 1}, "roles": {"kind": "playbook"},
    })


def main_files(harness: Path, rev: str = "main") -> dict[str, str]:
    names = git(harness, "ls-tree", "-r", "--name-only", rev).splitlines()
    return {n: git(harness, "show", f"{rev}:{n}") for n in names}


def run_case(work: Path, defect: Defect | None, env: str, rounds: int, k: int, squash: bool = False,
             tasks: int = 0, seed: int = 0) -> dict:
    root = work / (defect.name if defect else "control")
    shutil.rmtree(root, ignore_errors=True)
    harness = root / "harness"
    init_harness(harness)
    if squash:  # no history to read: seed and defect in one commit, amended into the initial one
        files = {"policies.yaml": GOOD_POLICIES} | (defect.files if defect else {})
        commit_files(harness, files, "seed with controls on")
        git(harness, "reset", "-q", "--soft", "HEAD~1")
        git(harness, "commit", "-q", "--amend", "-m", "evoharness: seed harness (with controls on)")
        planted = git(harness, "rev-parse", "HEAD") if defect else None
    else:
        commit_files(harness, {"policies.yaml": GOOD_POLICIES}, "controls on: loop guard, exit gate")
        planted = commit_files(harness, defect.files, f"planted: {defect.name}") if defect else None
    start = time.monotonic()
    outcome = start_run(settings_for(root, env, rounds, k, tasks, seed), progress=_quiet())
    state = outcome.state
    evidence = _read_json(outcome.run_dir / "harness_evidence.json")
    out = {"name": defect.name if defect else "control", "kind": defect.kind if defect else "-",
           "seconds": round(time.monotonic() - start, 1), "stop": state.get("stop_reason"),
           "before": state.get("before", {}), "after": state.get("after", {}),
           "merged": [m["branch"] for m in state.get("merged", [])]}
    if defect is None:
        return out
    files_changed = set()
    for m in state.get("merged", []):
        files_changed |= set(git(harness, "diff", "--name-only", f"{m['merge_commit']}^1", m["merge_commit"])
                             .splitlines())
    culprits = [c for entry in evidence.values() for c in entry.get("culprits", [])]
    out["culprit"] = any(c["commit"] == planted for c in culprits)
    out["repaired"] = defect.path in files_changed
    out["gone"] = not defect.present(main_files(harness))
    flawed = {sha for sha in git(harness, "rev-list", "main").splitlines()
              if defect.present(main_files(harness, sha))}
    queued = set(state.get("queued", []))
    trajs = {}
    for line in (outcome.run_dir / "trajectories.jsonl").read_text().splitlines():
        t = json.loads(line)
        trajs[t["id"]] = t.get("harness_commit")
    out["queued_from_defect"] = sum(trajs.get(i) in flawed for i in queued)
    out["queued"] = len(queued)
    out["lint"] = _lint_names_defect(harness, planted, defect, env)
    return out


def _lint_names_defect(harness: Path, planted: str, defect: Defect, env: str) -> bool:
    from evoharness.envs import get_environment
    from evoharness.roles.lint import declared_tools, lint_harness
    from evoharness.roles.models import HarnessView

    e = get_environment(env)
    files = main_files(harness, planted)
    # the tools a run lints with (graph/harness_evidence.py): the environment's, then each harness module's own
    tools = [{"name": t["function"]["name"], "description": t["function"].get("description", "")}
             for t in e.tools(e.list_tasks("dev")[0])]
    tools += [{"name": n, "description": ""} for path, text in files.items()
              if path.startswith("tools/") and path.endswith(".py") for n in declared_tools(text)]
    findings = lint_harness(HarnessView.from_files(files), tools)
    return any(f.path == defect.path for f in findings)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _quiet():
    from evoharness.graph.progress import Progress

    return Progress(quiet=True)


def _heldout(case: dict) -> tuple[float, float]:
    h = (case.get("after") or {}).get("heldout") or {}
    return float(h.get("mean_score", 0.0) or 0.0), float(h.get("n", 0) or 0)


def _shares(comp: dict | None) -> dict[str, float]:
    return dict((comp or {}).get("composition", {}))


def judge(cases: list[dict], k: int) -> list[dict]:
    control = next(c for c in cases if c["name"] == "control")
    m0, n0 = _heldout(control)
    c_shares = _shares(control["before"].get("dev"))
    for c in cases:
        m, n = _heldout(c)
        sd = math.sqrt(max(m0 * (1 - m0), m * (1 - m), 0.01))
        se = sd * math.sqrt(1 / max(n0, 1) + 1 / max(n, 1))
        c["heldout"] = round(m, 3)
        c["heldout_ok"] = m >= m0 - 2 * se
        c["noise"] = round(2 * se, 3)
        if c["name"] != "control":
            shares = _shares(c["before"].get("dev"))
            moved = max((abs(shares.get(k2, 0) - c_shares.get(k2, 0)) for k2 in set(shares) | set(c_shares)),
                        default=0.0)
            c["composition_moved"] = round(moved, 3)
            c["shown"] = c["lint"] or c["culprit"] or moved >= 0.10
            c["root"] = c["repaired"] and c["gone"]
    return cases


def table(cases: list[dict]) -> str:
    rows = ["| defect | kind | shown (lint / culprit / composition moved) | repair merged | defect gone from main "
            "| held-out (control ± noise) | defect's failures queued | merged | seconds |",
            "|---|---|---|---|---|---|---|---|---|"]
    control = next(c for c in cases if c["name"] == "control")
    for c in cases:
        if c["name"] == "control":
            continue
        shown = (f"{'yes' if c['shown'] else 'NO'} ({'lint' if c['lint'] else '-'} / "
                 f"{'culprit' if c['culprit'] else '-'} / {c['composition_moved']:.2f})")
        rows.append(f"| {c['name']} | {c['kind']} | {shown} | {'yes' if c['repaired'] else 'NO'} | "
                    f"{'yes' if c['gone'] else 'NO'} | {c['heldout']:.3f} {'ok' if c['heldout_ok'] else 'LOW'} | "
                    f"{c['queued_from_defect']} of {c['queued']} | {len(c['merged'])} | {c['seconds']:.0f} |")
    rows.append(f"| control (un-flawed seed) | - | - | - | - | {control['heldout']:.3f} "
                f"(noise ±{control['noise']:.3f}) | - | {len(control['merged'])} | {control['seconds']:.0f} |")
    defects = [c for c in cases if c["name"] != "control"]
    root = sum(c["root"] for c in defects)
    ok = sum(c["root"] and c["heldout_ok"] for c in defects)
    rows.append("")
    rows.append(f"repaired at the root: {root}/{len(defects)}; also back to the control's held-out level: "
                f"{ok}/{len(defects)}; defect failures queued: {sum(c['queued_from_defect'] for c in defects)}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=DefaultsHelp)
    ap.add_argument("--json", action="store_true", help="print the cases as JSON instead of the table")
    ap.add_argument("--only", default="", help="comma-separated defect names (the control always runs)")
    ap.add_argument("--env", default="synthetic")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--rollouts", type=int, default=4, help="k: rollouts per task")
    ap.add_argument("--repeat", type=int, default=1, help="run the suite N times, run seeds seed..seed+N-1 "
                    "(the table is the first; a min/median/max line follows)")
    ap.add_argument("--seed", type=int, default=0, help="the runs' base seed (run.seed)")
    ap.add_argument("--tasks", type=int, default=0, help="first N dev and N held-out tasks (0 = all)")
    ap.add_argument("--set", dest="suite", choices=sorted(SETS), default="planted",
                    help="which defects: the nine planted ones (the README's table), five unseen ones, or "
                    "five more of other kinds (unseen2)")
    ap.add_argument("--squash", action="store_true", help="plant each defect in the harness's only commit: no "
                    "history to bisect, so only the linter (and the catalogue) can find it")
    ap.add_argument("--out", type=Path, default=None, help="keep the harnesses and runs here (default: a temp dir)")
    args = ap.parse_args(argv)
    if min(args.repeat, args.rounds, args.rollouts) < 1 or args.tasks < 0:
        print("error: --repeat, --rounds and --rollouts must be >= 1 and --tasks >= 0", file=sys.stderr)
        return 2
    wanted = {n for n in args.only.split(",") if n}
    make, names = SETS[args.suite]
    unknown = wanted - set(names)
    if unknown:
        print(f"error: unknown defect(s) {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    from evoharness.logging import configure_logging

    configure_logging("error", "json")
    work = args.out or Path(tempfile.mkdtemp(prefix="planted-"))
    repeats = []
    for r in range(args.repeat):
        cases = []
        for d in [None, *(d for d in make(args.env) if not wanted or d.name in wanted)]:
            name = d.name if d else "control"
            print(f"[{time.strftime('%H:%M:%S')}] seed {args.seed + r}: {name} ...", file=sys.stderr, flush=True)
            cases.append(run_case(work / f"seed{args.seed + r}", d, args.env, args.rounds, args.rollouts,
                                  args.squash, args.tasks, args.seed + r))
        repeats.append(judge(cases, args.rollouts))
    if args.json:
        print(json.dumps(repeats if args.repeat > 1 else repeats[0], indent=2, default=str))
    else:
        print(table(repeats[0]))
        if args.repeat > 1:
            root = sorted(sum(c.get("root", False) for c in cases) for cases in repeats)
            queued = sorted(sum(c.get("queued_from_defect", 0) for c in cases) for cases in repeats)
            print(f"over run seeds {args.seed}..{args.seed + args.repeat - 1}: repaired at the root "
                  f"min/median/max {root[0]}/{root[len(root) // 2]}/{root[-1]} of {len(repeats[0]) - 1}; "
                  f"defect failures queued min/median/max {queued[0]}/{queued[len(queued) // 2]}/{queued[-1]}")
    if args.out is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    from evoharness.benchrepeat import same_checkout

    same_checkout(__file__)
    raise SystemExit(main())
