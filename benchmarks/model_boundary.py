"""The model boundary's own Python work per rollout: whole requests against incremental ones, in turn.

Captures the model calls of ``--rollouts`` in-process rollouts (seed harness from ``evoharness init``,
``scripted:weak`` on synthetic): each call's messages (the agent loop's own objects), tools and reply. Then replays
every rollout's calls through what a sandboxed rollout's calls go through, minus the socket: ``GatewayChatModel``
writes each request, ``Gateway.handle`` checks it (and, for a delta, rebuilds the whole request), a ``ModelUpstream``
converts the messages and hands them to a model that returns the recorded reply, the reply's JSON goes back and the
client reads it. The HTTP exchange, the socket, the gateway's threads and the model's own work are left out: what
is timed is the conversions and JSON on both ends and the gateway's checks and accounts. Two ways, in turn, each
``--repeat`` times: ``whole`` (every request the whole conversation, as before 2026-12-05) and ``incremental``
(after the first, only the messages added since: docs/sandbox.md, "Model gateway"). Each replayed reply is checked
against the recorded one. Prints CPU per rollout (this thread's, ``--reps`` passes over the captured rollouts per
figure), min / median / max over the repeats, the ratio round by round, and the request bytes per rollout.

    python benchmarks/model_boundary.py [--rollouts 20] [--reps 10] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from evoharness.benchrepeat import add_repeat, check_repeat, same_checkout, spread

MODEL, ENV = "scripted:weak", "synthetic"


class _Capture:
    """The rollout's model, recording each call: (the messages as the loop handed them, the tools, the reply)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls = inner, []

    def bind_task(self, *a: Any, **kw: Any) -> None:
        self.inner.bind_task(*a, **kw)

    def invoke(self, messages: list, tools: list | None = None) -> Any:
        ai = self.inner.invoke(messages, tools=tools)
        self.calls.append((list(messages), tools, ai))
        return ai


class _Replay:
    """Answers a rollout's calls with the replies recorded for them, in order."""

    def __init__(self, calls: list) -> None:
        self.calls, self.i = calls, 0

    def invoke(self, messages: list, tools: list | None = None) -> Any:
        self.i += 1
        return self.calls[self.i - 1][2]


def _capture(n: int) -> list[list]:
    from evoharness.agent.runner import run_rollout
    from evoharness.envs import get_environment
    from evoharness.harness_repo.init import init_harness
    from evoharness.model_specs import agent_model

    tasks = [t.id for t in get_environment(ENV).list_tasks("dev")]
    with tempfile.TemporaryDirectory() as d:
        harness = init_harness(Path(d) / "harness").path
        out = []
        for i in range(n):
            cap = _Capture(agent_model(MODEL, i // len(tasks)))
            run_rollout(harness, ENV, tasks[i % len(tasks)], MODEL, i // len(tasks), model=cap)
            out.append(cap.calls)
    return out


def _replayer(whole: bool) -> tuple[Any, list[int]]:
    """A function replaying one captured rollout the given way, and the list its request bytes are added to."""
    from evoharness.agent.models import GatewayChatModel
    from evoharness.sandbox.gateway import Gateway
    from evoharness.sandbox.gateway_upstream import ModelUpstream

    current: dict[str, _Replay] = {}
    upstream = ModelUpstream(lambda: current["model"], "standin:weak")
    upstream.estimate_usage = False  # as the host-side stand-in (StandInUpstream)
    gw = Gateway(upstream, model="standin:weak")
    sent: list[int] = []

    class Client(GatewayChatModel):
        def _body(self, messages: list, tools: list | None, *, whole: bool = whole) -> bytes:
            return super()._body(messages, tools, whole=whole)

        def _exchange(self, data: bytes) -> tuple[int, bytes]:
            sent.append(len(data))
            reply = gw.handle("POST", self.path, data)
            return reply.status, json.dumps(reply.payload).encode()

    def replay(calls: list) -> None:
        token = gw.open_rollout()
        current["model"] = _Replay(calls)
        client = Client("/unused.sock", token, "standin:weak", 0)
        for messages, tools, ai in calls:
            got = client.invoke(messages, tools=tools)
            if (got.content, got.tool_calls) != (ai.content, ai.tool_calls):
                raise SystemExit(f"error: a replayed reply differs from the recorded one: {got!r} != {ai!r}")
        gw.close_rollout(token)

    return replay, sent


def main(argv: list[str] | None = None) -> int:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=DefaultsHelp)
    ap.add_argument("--rollouts", type=int, default=20, help="rollouts to capture (20)")
    ap.add_argument("--reps", type=int, default=10, help="passes over the captured rollouts per figure (10)")
    add_repeat(ap, default=5)
    args = ap.parse_args(argv)
    check_repeat(ap, args.repeat)
    if args.rollouts < 1 or args.reps < 1:
        ap.error("--rollouts and --reps must be at least 1")
    captured = _capture(args.rollouts)
    ways = {name: _replayer(whole) for name, whole in (("whole", True), ("incremental", False))}
    for replay, _ in ways.values():  # warm-up, and the bytes of one pass
        for calls in captured:
            replay(calls)
    nbytes = {name: sum(sent) / len(captured) for name, (_, sent) in ways.items()}
    figures: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.repeat):
        for name, (replay, _) in ways.items():
            start = time.thread_time()
            for _ in range(args.reps):
                for calls in captured:
                    replay(calls)
            figures[name].append((time.thread_time() - start) / (args.reps * len(captured)) * 1e6)
    calls = sum(len(c) for c in captured) / len(captured)
    print(f"model boundary, {args.rollouts} captured rollouts of {MODEL} on {ENV} ({calls:.2f} calls each), "
          f"{args.repeat} rounds in turn of {args.reps} passes")
    for name, values in figures.items():
        print(f"  {name:12} CPU per rollout {spread(values, '.0f', ' us')}; request bytes per rollout "
              f"{nbytes[name]:,.0f}")
    ratios = [w / i for w, i in zip(figures["whole"], figures["incremental"], strict=True)]
    print(f"  whole / incremental, round by round: {spread(ratios, '.2f', 'x')}")
    return 0


if __name__ == "__main__":
    same_checkout(__file__)
    raise SystemExit(main())
