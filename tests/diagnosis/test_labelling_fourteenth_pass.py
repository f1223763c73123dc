"""The fourteenth pass's labelling cuts (docs/benchmarks.md, "fourteenth session").

- No ``import`` statement runs inside a function the labeller calls per write or per message: one costs about a
  microsecond at every call even with the module loaded (the ninth pass's largest cut), and the violation log's
  ``_workspace_edit`` / ``_ends_run`` (every write of a failed run) and ``write_calls`` still made two or three of
  them. A module that imports another at its top, which imports it back, binds it at its foot instead (invariants
  reads detectors so). ``TraceView.violations`` keeps its import (once per failed run; context is imported by every
  module below invariants, so it cannot import invariants at its top or foot).
- The export's labelling (``Labeller.first_signal``) runs the claim check last, told the step of the first signal the
  other located detectors found: none of its signals after that step can come first, so it reads no reply after it
  and checks the final answer only where it lies at or before it (on tau-bench airline 55 of the 116 failed runs have
  a located signal before their answer). Its answer is ``classify``'s, compared on random runs that put policy
  violations, unbacked ids and final answers at random steps, and on the fixtures
  (tests/diagnosis/test_diagnosis_first_signal.py).
"""

from __future__ import annotations

import ast
import importlib
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

import evoharness.diagnosis
from evoharness.diagnosis.catalogue import default_catalogue
from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.detectors import UnbackedClaimDetector
from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.models import Trajectory

PACKAGE = Path(evoharness.diagnosis.__file__).parent
# a function allowed its import: (module, qualified name) -- once per failed run, not per write or message
ONCE_PER_RUN = {("context", "TraceView.violations")}


def _labelling_modules() -> list[str]:
    """The diagnosis modules the default catalogue's detectors come from, and those they import."""
    names = {type(d).__module__ for d in default_catalogue()} | {
        "evoharness.diagnosis.labeller", "evoharness.diagnosis.context", "evoharness.diagnosis.invariants",
        "evoharness.diagnosis.consent", "evoharness.diagnosis.write_targets", "evoharness.diagnosis.models"}
    for name in list(names):
        module = importlib.import_module(name)
        names |= {m.__name__ for m in vars(module).values()
                  if type(m) is type(ast) and m.__name__.startswith("evoharness.diagnosis.")}
    return sorted(n.rsplit(".", 1)[1] for n in names)


def _imports_in_functions(source: str) -> list[str]:
    found = []

    def walk(node: ast.AST, scope: list[str], in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom) and in_function:
                found.append(".".join(scope))
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                walk(child, [*scope, child.name], in_function or not isinstance(child, ast.ClassDef))
            else:
                walk(child, scope, in_function)

    walk(ast.parse(source), [], False)
    return found


@pytest.mark.parametrize("module", _labelling_modules())
def test_no_function_the_labeller_runs_holds_an_import_statement(module: str) -> None:
    found = [f for f in _imports_in_functions((PACKAGE / f"{module}.py").read_text())
             if (module, f) not in ONCE_PER_RUN]
    assert not found, f"{module}: import statements inside {found}"


ROOT = PACKAGE.parent
# The environments and the stand-in / gateway model code a rollout runs per tool call, customer turn or model request.
ROLLOUT_MODULES = ("envs/tau2_env", "envs/tau2_user", "envs/agentdojo_env", "envs/bfcl_env", "envs/synthetic",
                   "agent/standin", "agent/scripted", "agent/models", "sandbox/gateway_upstream",
                   "sandbox/gateway_standin", "sandbox/scoring")
# a function allowed its imports: an optional or heavy dependency loaded once (per process, env or rollout), never
# at every call, and the imports that keep LangChain and httpx out of a worker serving an offline model
ROLLOUT_ONCE = {
    ("envs/tau2_env", "_quiet_import"), ("envs/tau2_env", "Tau2Env.reward_info"),  # loguru; tau2, once a rollout
    ("envs/agentdojo_env", "AgentDojoEnv._suite"), ("envs/agentdojo_env", "AgentDojoEnv._runtime"),
    ("envs/bfcl_env", "_load"), ("envs/bfcl_env", "_turn_checks"), ("envs/bfcl_env", "BfclEnv._instances"),
    ("agent/models", "to_langchain"), ("agent/models", "openai_model"), ("agent/models", "resolve_model_spec"),
    ("agent/models", "gateway_model"),
}


@pytest.mark.parametrize("module", ROLLOUT_MODULES)
def test_no_function_a_rollout_runs_per_call_holds_an_import_statement(module: str) -> None:
    """The environments and stand-in model code imported inside their per-call functions (tau2's message classes at
    every tool call and customer turn, pydantic's ValidationError at every tau2 argument check, the gateway's
    message conversion at every model request, socket at every stand-in exchange): hoisted to the module's top
    where no cycle stops it; an optional dependency is bound once (ROLLOUT_ONCE)."""
    holding = _imports_in_functions((ROOT / f"{module}.py").read_text())
    found = [f for f in holding if (module, f) not in ROLLOUT_ONCE]
    assert not found, f"{module}: import statements inside {found}"
    stale = [f for m, f in ROLLOUT_ONCE if m == module and f not in holding]
    assert not stale, f"{module}: allowed imports no function holds any more: {stale}"


def test_the_scan_finds_an_import_inside_a_method() -> None:
    src = "import re\nclass A:\n    def f(self):\n        from os import path\n        return path\n"
    assert _imports_in_functions(src) == ["A.f"]


def test_either_module_of_the_cycle_imports_first() -> None:
    for first in ("invariants", "detectors", "context", "consent"):
        code = (f"import evoharness.diagnosis.{first}\nfrom evoharness.diagnosis import invariants\n"
                "assert invariants._detectors.delivers is not None")
        assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0, first


POLICY = "Obtain explicit user confirmation (yes) before booking. You must authenticate the user before acting."
IDS = ("HAT069", "ZFA04Y", "W2378156", "mia_li_3668", "QX77AB", "2024-05-17", "12345678")


def _call(rnd: random.Random, n: int, name: str) -> dict:
    args = json.dumps({"reservation_id": rnd.choice(IDS), "user_id": rnd.choice(IDS)})
    return {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": args}}


def _steps(rnd: random.Random, msgs: list[dict], count: int) -> None:
    for _ in range(count):
        r = rnd.random()
        if r < 0.35:
            n = len(msgs)
            name = rnd.choice(("get_user_details", "get_reservation_details", "book_reservation", "cancel_reservation"))
            msgs.append({"role": "assistant", "content": "", "tool_calls": [_call(rnd, n, name)]})
            result = rnd.choice((json.dumps({"reservation_id": rnd.choice(IDS), "status": rnd.choice(("active",
                                 "cancelled"))}), "Error: not found", f"user {rnd.choice(IDS)} found"))
            msgs.append({"role": "tool", "tool_call_id": f"c{n}", "name": name, "content": result})
        elif r < 0.7:
            msgs.append({"role": "assistant", "content": " ".join(rnd.choice(IDS + ("your", "reservation", "is",
                         "cancelled", "active", "$120", "flight", "ok?")) for _ in range(rnd.randint(1, 8)))})
        else:
            msgs.append({"role": "user", "content": rnd.choice(("yes", "no", "yes please go ahead", "what about "
                         + rnd.choice(IDS), "ok"))})


def _random_run(rnd: random.Random, k: int) -> Trajectory:
    """A failed tau-bench-like run: writes with and without a yes before them, replies naming ids the tools gave
    or not (and statuses), a final answer with numbers, at random steps -- some runs going on after the answer was
    said (its step is then no longer the last reply's)."""
    msgs: list[dict] = [{"role": "system", "content": POLICY},
                        {"role": "user", "content": "help me " + rnd.choice(IDS)}]
    _steps(rnd, msgs, rnd.randint(1, 12))
    answer = None
    if rnd.random() < 0.8:
        answer = " ".join(rnd.choice(IDS + ("done", "total", "$45", "1,200", "3 bags", "NEW9Z1Z")) for _ in range(5))
        msgs.append({"role": "assistant", "content": answer})
        if rnd.random() < 0.6:
            _steps(rnd, msgs, rnd.randint(1, 6))
    return Trajectory(id=f"r{k}", task_id="t", messages=msgs, final_answer=answer, score=0.0)


def test_first_signal_with_the_claim_check_bounded_is_classify_on_random_runs() -> None:
    rnd = random.Random(14)
    lab = Labeller()
    bounded_first = claim_first = 0
    for k in range(1200):
        t = _random_run(rnd, k)
        cls, first, signals = lab.classify(t)
        assert lab.first_signal(t) == (cls, first), t.id
        others = [s for s in signals if s.id not in ("F1.unbacked_claim", "F4.poor_delivery", "F4.first_write")]
        claim = next((s for s in signals if s.id == "F1.unbacked_claim"), None)
        bounded_first += bool(others and claim and claim.step > min(s.step for s in others))
        claim_first += bool(others and claim and first is claim)
    assert bounded_first > 100 and claim_first > 20  # both sides of the bound were exercised


def test_the_claim_check_told_a_bound_reads_no_reply_after_it() -> None:
    msgs = [{"role": "system", "content": POLICY}, {"role": "user", "content": "book it"},
            {"role": "assistant", "content": "", "tool_calls": [_call(random.Random(1), 1, "book_reservation")]},
            {"role": "tool", "tool_call_id": "c1", "name": "book_reservation", "content": "ok"},
            {"role": "assistant", "content": "Your reservation QX99ZZ is booked."},
            {"role": "user", "content": "thanks"},
            {"role": "assistant", "content": "Anything else? Your total is 1,234 on flight NEW9Z1Z."}]
    t = Trajectory(id="r", task_id="t", messages=msgs, final_answer=msgs[-1]["content"], score=0.0)
    cfg, claims = DiagnosisConfig(), UnbackedClaimDetector()
    assert [s.step for s in claims.detect(TraceView(t), cfg)] == [4]
    assert claims.detect(TraceView(t), cfg, stop=2) == []  # the reply at 4 is not read
    assert [s.step for s in claims.detect(TraceView(t), cfg, stop=4)] == [4]
    t.messages[4]["content"] = "Your reservation is booked."
    assert [s.step for s in claims.detect(TraceView(t), cfg)] == [6]  # the final answer's unbacked tokens
    assert claims.detect(TraceView(t), cfg, stop=5) == []
    assert [s.step for s in claims.detect(TraceView(t), cfg, stop=6)] == [6]
    lab = Labeller()
    cls, first, _ = lab.classify(t)
    assert first.id == "F4.policy_violation" and first.step == 2 and lab.first_signal(t) == (cls, first)


def test_a_final_answer_said_before_the_bound_is_still_checked() -> None:
    msgs = [{"role": "system", "content": POLICY}, {"role": "user", "content": "book it"},
            {"role": "assistant", "content": "", "tool_calls": [_call(random.Random(1), 1, "get_user_details")]},
            {"role": "tool", "tool_call_id": "c1", "name": "get_user_details", "content": "found"},
            {"role": "assistant", "content": "Booked, the total is 98765 points."},
            {"role": "user", "content": "and cancel the old one"},
            {"role": "assistant", "content": "", "tool_calls": [_call(random.Random(2), 2, "cancel_reservation")]},
            {"role": "tool", "tool_call_id": "c2", "name": "cancel_reservation", "content": "ok"},
            {"role": "assistant", "content": "Done."}]
    t = Trajectory(id="r", task_id="t", messages=msgs, final_answer=msgs[4]["content"], score=0.0)
    lab = Labeller()
    cls, first, signals = lab.classify(t)
    assert (first.id, first.step) == ("F1.unbacked_claim", 4) and any(s.step == 6 for s in signals)
    assert lab.first_signal(t) == (cls, first)  # told the bound 6, the check still reads the answer said at 4
