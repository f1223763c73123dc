"""CPU per rollout of the agent loop at a given number of turns, in this process: what the loop costs as a
conversation grows (its per-hook copies of the conversation were quadratic in the turns before 2026-12-05).

The seed harness (``evoharness init``) plus one middleware module with all five hooks, each returning None (a
harness that only watches: ``--hooks 0`` leaves the module out), on the synthetic environment, with a scripted
model that makes ``--turns`` tool calls (``get_order``, a different order each turn: the loop guard never blocks)
then answers; ``max_steps`` is raised to fit, the seed's other policies are kept.
Each figure is CPU seconds per rollout (``time.process_time``, this process only: no sandbox, no gateway), over
``--rollouts`` rollouts, ``--repeat`` times; the turn counts run in turn within each repeat.

    python benchmarks/loop_turns.py [--turns 7 40] [--rollouts 20] [--repeat 3] [--hooks 1] [--json]

To compare two trees in turn, run it with ``PYTHONPATH`` set to the other tree's root, alternately.

``--serialise`` measures instead what a sandboxed rollout's gateway client spends writing its requests' JSON: the
conversation a scripted rollout of each ``--turns`` sent at each model call (as the package's messages), written
by ``GatewayChatModel._body`` (each unchanged message's JSON kept from the call before) and, in turn, the way it
was written before 2026-12-05 (the body's dicts reused, ``json.dumps`` of the whole body each call); the two give
the same bytes (checked), CPU per rollout of each and the ratio. Both write whole requests (no reply comes back
here to say the gateway holds the conversation, so ``_body`` never writes a delta).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import yaml

from evoharness.benchrepeat import add_repeat, check_repeat, cpu_seconds, same_checkout, spread, summary

WATCH = '''\
"""Hooks that look and change nothing (what the loop costs around them is measured)."""


def before_model(messages, ctx):
    return None


def after_model(message, ctx):
    return None


def before_tool(call, ctx):
    return None


def after_tool(call, result, ctx):
    return None


def on_finish(answer, ctx):
    return None
'''


def _harness(root: Path, turns: int, hooks: bool) -> Path:
    from evoharness.harness_repo.init import init_harness

    init_harness(root)
    pol_file = root / "policies.yaml"
    pol = yaml.safe_load(pol_file.read_text()) or {}
    pol["max_steps"] = turns + 5
    pol_file.write_text(yaml.safe_dump(pol))
    if hooks:
        (root / "middleware" / "watch.py").write_text(WATCH)
    return root


def _outputs(turns: int) -> list:
    calls = [{"role": "assistant", "content": "", "tool_calls": [
        {"id": f"c{i}", "type": "function",
         "function": {"name": "get_order", "arguments": json.dumps({"order_id": f"A-{100 + i}"})}}]}
        for i in range(turns)]
    return [*calls, "The order has shipped."]


def _rollouts(harness: Path, turns: int, n: int) -> None:
    from evoharness.agent.runner import run_rollout
    from evoharness.agent.scripted import ScriptedModel

    for i in range(n):
        traj = run_rollout(harness, "synthetic", "status_A-100", "scripted:bench", seed=i, harness_commit="bench",
                           model=ScriptedModel(_outputs(turns)))
        if traj.meta.get("rollout_failure") or traj.usage.steps != turns + 1:
            raise SystemExit(f"error: a {turns}-turn rollout did not run as scripted "
                             f"({traj.termination}, {traj.usage.steps} steps)")


def _sends(harness: Path, turns: int) -> list[list]:
    """The message lists (the package's) a scripted rollout of ``turns`` sent to its model, call by call."""
    from evoharness.agent.runner import run_rollout
    from evoharness.agent.scripted import ScriptedModel

    model = ScriptedModel(_outputs(turns))
    run_rollout(harness, "synthetic", "status_A-100", "scripted:bench", seed=0, harness_commit="bench", model=model)
    return model.calls


def _serialise(args, harnesses: dict[int, Path]) -> None:
    from evoharness.agent.models import GatewayChatModel

    tools = [{"type": "function", "function": {"name": "get_order", "description": "Look up an order.",
                                               "parameters": {"type": "object", "properties": {
                                                   "order_id": {"type": "string"}}, "required": ["order_id"]}}}]

    def old(sends: list[list]) -> list[bytes]:
        model = GatewayChatModel("/nonexistent.sock", "t", "standin:weak", 0)
        return [json.dumps({"model": model.model, "messages": model._dicts(m), "seed": model.seed,
                            "temperature": 0.0, "stream": False, "tools": tools,
                            "evoharness_conversation": {"hold": True}}).encode() for m in sends]

    def new(sends: list[list]) -> list[bytes]:
        model = GatewayChatModel("/nonexistent.sock", "t", "standin:weak", 0)
        return [model._body(m, tools) for m in sends]

    out = {}
    for t, h in harnesses.items():
        sends = _sends(h, t)
        if old(sends) != new(sends):
            raise SystemExit(f"error: the request bodies of a {t}-turn rollout differ between the two ways")
        figures: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(args.repeat):
            for name, fn in (("before", old), ("after", new)):
                figures[name].append(cpu_seconds(lambda fn=fn, sends=sends: [fn(sends) for _ in range(args.rollouts)])
                                     / args.rollouts)
        ratios = [b / a for b, a in zip(figures["before"], figures["after"], strict=True)]
        out[str(t)] = {k: summary(v) for k, v in figures.items()} | {"ratio": summary(ratios),
                                                                      "bytes": sum(len(b) for b in new(sends))}
        if not args.json:
            print(f"{t:>4} turns, {len(sends)} requests, {out[str(t)]['bytes']:,} bytes: request JSON per rollout "
                  f"{spread([x * 1000 for x in figures['before']], '.3f', ' ms')} (whole body) -> "
                  f"{spread([x * 1000 for x in figures['after']], '.3f', ' ms')} (kept per message); "
                  f"{spread(ratios, '.2f', 'x')}")
    if args.json:
        print(json.dumps(out))


def main() -> None:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=DefaultsHelp)
    ap.add_argument("--turns", type=int, nargs="+", default=[7, 40], help="tool-calling turns per rollout (7 40)")
    ap.add_argument("--rollouts", type=int, default=20, help="rollouts per figure (20)")
    ap.add_argument("--hooks", type=int, choices=(0, 1), default=1,
                    help="1: add a middleware module with all five hooks, returning None (default); 0: none")
    ap.add_argument("--serialise", action="store_true", help="measure the gateway client's request JSON per "
                    "rollout instead: kept per message (now) against the whole body each call (before), in turn")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    add_repeat(ap)
    args = ap.parse_args()
    check_repeat(ap, args.repeat)
    if args.rollouts < 1 or any(t < 1 or t > 500 for t in args.turns):
        ap.error("--rollouts must be at least 1 and each --turns between 1 and 500")
    figures: dict[int, list[float]] = {t: [] for t in args.turns}
    with tempfile.TemporaryDirectory() as d:
        harnesses = {t: _harness(Path(d) / f"h{t}", t, bool(args.hooks)) for t in args.turns}
        if args.serialise:
            _serialise(args, harnesses)
            return
        for t in args.turns:  # warm: imports, the template and caches
            _rollouts(harnesses[t], t, 1)
        for _ in range(args.repeat):
            for t in args.turns:
                figures[t].append(cpu_seconds(lambda t=t: _rollouts(harnesses[t], t, args.rollouts)) / args.rollouts)
    if args.json:
        print(json.dumps({str(t): summary(v) for t, v in figures.items()}))
        return
    for t, v in figures.items():
        print(f"{t:>4} turns: CPU per rollout {spread([x * 1000 for x in v], '.2f', ' ms')}")


if __name__ == "__main__":
    same_checkout(__file__)
    main()
