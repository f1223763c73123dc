"""Play BFCL's ground-truth calls through the ``bfcl:<category>`` environment and score them.

    .venv/bin/python scripts/bfcl_ground_truth.py [CATEGORY ...]     # default: the four multi-turn categories

The reference pipeline must score every task (200/200 per category): it checks that the environment's
tools, turn handling and scorer agree with BFCL's own checker. Beside it, two trivial baselines on the
same tasks: no tool call at all, and the ground truth with its last call dropped. For the ground truth and
the dropped-call variant, BFCL's own ``multi_turn_checker`` judges the same calls too: the script counts
how often its verdict and the environment's score agree.
"""

from __future__ import annotations

import sys
import time

from evoharness.envs import get_environment
from evoharness.envs.base import ToolError
from evoharness.envs.bfcl_env import ASK_USER, CATEGORIES


def play(env, task, calls) -> float:
    state = env.reset(task)
    for c in calls:
        try:
            env.call_tool(state, c.name, c.args)
        except ToolError:
            pass
    return env.score(task, state, "Done.", [])


def bfcl_verdict(env, task, calls, tag: str) -> bool:
    """BFCL's own checker on the same calls, turn by turn (one step per turn)."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import (
        multi_turn_checker,
        multi_turn_irrelevance_checker,
    )

    turns, cur = [], []
    for c in calls:
        if c.name == ASK_USER:
            turns.append([cur] if cur else [])
            cur = []
        else:
            cur.append(f"{c.name}({', '.join(f'{k}={v!r}' for k, v in c.args.items())})")
    entry = env._entry(task)
    truth = env._data[1][task.id]
    ok = multi_turn_checker(turns, truth, entry, env.category, f"evo_{tag}")["valid"]
    return ok and multi_turn_irrelevance_checker(turns, truth)["valid"]


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    unknown = [c for c in argv if c not in CATEGORIES]
    if unknown:  # before any category runs (one takes minutes); it was a traceback from the environment
        print(f"error: unknown BFCL category {unknown[0]!r} (one of: {', '.join(CATEGORIES)})", file=sys.stderr)
        return 2
    bad = 0
    for cat in argv or CATEGORIES:
        env = get_environment(f"bfcl:{cat}")
        t0 = time.monotonic()
        tasks = env.list_tasks("all")
        gt = nothing = dropped = agree = 0
        for task in tasks:
            calls = env.ground_truth_calls(task)
            score = play(env, task, calls)
            gt += score
            agree += (score == 1.0) == bfcl_verdict(env, task, calls, "gt")
            nothing += play(env, task, [c for c in calls if c.name == ASK_USER])
            last = max(i for i, c in enumerate(calls) if c.name != ASK_USER)
            cut = calls[:last] + calls[last + 1:]
            score = play(env, task, cut)
            dropped += score
            agree += (score == 1.0) == bfcl_verdict(env, task, cut, "cut")
        n = len(tasks)
        bad += n - int(gt) + 2 * n - agree
        print(f"{cat}: ground truth {int(gt)}/{n}; baselines: no call {int(nothing)}/{n}, "
              f"last call dropped {int(dropped)}/{n}; BFCL's checker agrees on {agree}/{2 * n} "
              f"({time.monotonic() - t0:.1f} s)", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    from evoharness.benchrepeat import same_checkout

    same_checkout(__file__)
    sys.exit(main(sys.argv[1:]))
