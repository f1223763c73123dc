"""The harness linter: defects that are visible in the harness files themselves, with the signals they explain.

`lint_harness(view, tools, trajectories, labels)` reads a `HarnessView` (the files at one commit), the
tools the environment and the harness offer (``[{name, description}]``) and, optionally, the anchor's
trajectories and labels (for budgets and for how often each finding's signals fired). Rules:

- ``prompt.hidden_tool``: a tool the agent is given but the rendered system prompt never names.
- ``prompt.absent_tool``: a tool-like name (``snake_case`` in backticks or before ``(``) in the prompt
  or lessons that no tool has.
- ``instructions.no_tools`` / ``instructions.answer_at_once`` / ``instructions.no_answer``: sentences in
  the prompt or lessons forbidding tools, ordering an answer before any work, or forbidding an answer
  (they contradict every task, which needs tools and an answer). A forbidden answer also lists the cost signal
  ``cost.blocked_call``: where a loop guard blocks the calls the agent keeps making instead of answering, the
  defect costs steps and blocked calls, not score, and no F3 signal fires (any block counts). So do a call format
  and a middleware block, each the cost signal of its own cause (`evoharness.traces.cost.block_cause`):
  ``cost.blocked_call.format`` (its rejected calls, made again as JSON) and ``cost.blocked_call.middleware.<module>``
  (the module's blocks, which the agent routes around). A finding supported by its cause's signal is repaired under
  that target, so the repair's verdict counts those blocks only.
- ``instructions.call_format``: a sentence asking for tool arguments in a format other than the JSON
  object the function-calling format takes (or negating JSON), or for renamed argument names.
- ``instructions.forbids_tool``: a negated use of a tool the agent is given.
- ``instructions.contradicts_task``: a negated verb + object that the task's own policy text orders
  (must/always/should ... the same verb and object).
- ``middleware.rewrites_results`` / ``middleware.blocks_tools`` / ``middleware.rewrites_messages``: hooks
  (found with ``ast``) that return replacement tool results (slices, constants), return a string from
  ``before_tool`` (a block; the tools compared in its conditions are named), or replace the messages.
- ``middleware.rewrites_calls``: a ``before_tool`` that returns anything but None or its call unchanged
  and no string: a replacement call (rewritten arguments) or a computed value (a result served in the
  tool's place, e.g. from a cache) -- the tool no longer runs what the agent asked for.
- ``instructions.dictates_answer`` / ``instructions.limits_answer`` (read with the anchor's trajectories): a
  sentence in the prompt or lessons that quotes a reply the agent then gives word for word as the final answer
  of two tasks or more (a fixed reply cannot answer different tasks), or that caps the answer at a few words
  (ten or fewer) where most final answers sit at that cap. The trajectories decide, not the wording alone: a
  quoted reply nobody gives, or a cap the answers do not press against, is no finding.
- ``middleware.rewrites_replies``: an ``after_model`` that returns anything but None or its message unchanged
  (a reply clipped or rewritten: the final answer the task is scored on, or the calls, are no longer the model's).
- ``tools.shadows_tool``: a harness ``tools/`` module declaring a tool the environment offers by the same name (the
  loop runs the harness's function instead, and it never sees the environment's state).
- ``policies.budget``: ``max_steps`` below the reference agent's default or below what runs that were
  still making distinct calls when the budget ended needed; a loop guard or nudge whose number can
  never be reached within ``max_steps``.

The linter's sentence rules are its own (it does not share the stand-in model's reader): a finding is
a hypothesis for the analyst, and verification decides. A finding's ``support`` is the number of the
given trajectories in which one of its ``signals`` fired: its score signals (the labels') in the failed (not Healthy)
ones, else its cost signals in any (read from the trajectories, `evoharness.traces.cost`), so a defect that only
costs steps is proposable too.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from evoharness.agent.harness import DEFAULT_POLICIES, DEFAULT_SYSTEM_PROMPT, Harness, HarnessError
from evoharness.diagnosis.models import FailureClass
from evoharness.harness_repo.policies import Policies
from evoharness.roles.models import Evidence, Finding, HarnessView
from evoharness.traces.cost import BLOCKED, cause_signal, cost_evidence, is_cost_signal, middleware_signal

PROMPT, LESSONS, POLICIES = "prompts/system.md", "lessons.md", "policies.yaml"
DEFAULT_MAX_STEPS = 12
_NEG = r"(?:do not|don't|never|must not|should not|cannot|can't|avoid|refrain from|no longer)"
_SENT = re.compile(r"(?<=[.!?;])\s+|\n+")
_COND = re.compile(r"\b(?:if|when|once|after|until|unless|whenever)\b")
_TOOL_NOUN = r"(?:tools?|functions?|tool calls?|function calls?)"
_NO_TOOLS = re.compile(_NEG + r"\s+(?:\w+\s+){0,2}?(?:call|use|invoke|run|make)\s+(?:any\s+|the\s+)?" + _TOOL_NOUN
                       + r"(?!\s+(?:that|which|you|not|other|outside|except|unless|more))"
                       r"|without\s+(?:using|calling|any)\s+(?:any\s+)?" + _TOOL_NOUN)
_ANSWER_AT_ONCE = re.compile(r"\b(?:answer|reply|respond)\b.{0,40}?\b(?:immediately|right away|at once|straight away|"
                             r"directly|first)\b")
_NO_ANSWER = re.compile(_NEG + r"\s+(?:\w+\s+){0,2}?(?:give|write|send|deliver|provide)\s+(?:a\s+|the\s+|your\s+)?"
                        r"(?:final\s+)?answer")
_ARGS = re.compile(r"\b(?:arguments?|parameters?|args)\b")
_NON_JSON = re.compile(r"\b(?:python|yaml|xml|key=value|key-value|plain text|comma[- ]separated|positional|"
                       r"camel ?case|abbreviat\w*)\b")
_TOOLISH = re.compile(r"`([a-z][a-z0-9]*(?:_[a-z0-9]+)+)`|\b([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\(")
_DUTY = re.compile(r"\b(?:must|always|should|need to|required to|make sure)\b")


def _sentences(text: str) -> list[tuple[str, str]]:
    """(original line-ish text, normalised lower-case sentence)."""
    out = []
    for raw in _SENT.split(text or ""):
        norm = re.sub(r"^[\s#>*\-+\d.)]+", "", raw).replace("`", "").strip().lower()
        if norm:
            out.append((raw.strip(), norm))
    return out


def render_prompt(view: HarnessView, tools: list[dict[str, str]], task: str = "TASK") -> str | None:
    """The system prompt the reference agent would send (None when it does not render)."""
    try:
        policies = Policies.from_yaml(view.text(POLICIES)).model_dump()
    except ValueError:
        policies = dict(DEFAULT_POLICIES)
    template = view.files.get(PROMPT, DEFAULT_SYSTEM_PROMPT)
    try:
        return Harness(root=None, template=template, lessons=view.text(LESSONS),  # type: ignore[arg-type]
                       policies=policies).render_system(task, tools)
    except HarnessError:
        return None


def _instruction_findings(path: str, text: str, tool_names: list[str], task_text: str) -> list[Finding]:
    out: list[Finding] = []
    task_sents = [s for _, s in _sentences(task_text) if _DUTY.search(s)]
    for raw, s in _sentences(text):
        cond = bool(_COND.search(s))
        neg = re.search(r"\b" + _NEG + r"\b", s) is not None
        if not cond and _NO_TOOLS.search(s):
            out.append(Finding(rule="instructions.no_tools", path=path, quote=raw,
                               detail="forbids tool use, which every task needs",
                               signals=["F4.poor_delivery", "F1.unbacked_claim"]))
        elif not cond and _ANSWER_AT_ONCE.search(s) and not neg:
            out.append(Finding(rule="instructions.answer_at_once", path=path, quote=raw,
                               detail="orders an answer before any tool work",
                               signals=["F4.poor_delivery", "F1.unbacked_claim"]))
        if not cond and _NO_ANSWER.search(s) and "without" not in s:
            out.append(Finding(rule="instructions.no_answer", path=path, quote=raw,
                               detail="forbids the final answer every task needs",
                               signals=["F3.step_budget_exhausted", "F3.no_delivery", "F3.repeated_action",
                                        BLOCKED]))
        if _ARGS.search(s) and ((re.search(r"\bjson\b", s) and neg) or (_NON_JSON.search(s) and not neg)):
            out.append(Finding(rule="instructions.call_format", path=path, quote=raw,
                               detail="asks for tool arguments in another form than the JSON object of the "
                                      "tool's schema",
                               signals=["F2.format_rejected", "F2.invalid_arguments", cause_signal("format")]))
        if neg and not cond:
            named = [n for n in tool_names if re.search(r"\b" + re.escape(n.lower()) + r"\b", s)
                     or _verb_noun(n, s)]
            if named:
                out.append(Finding(rule="instructions.forbids_tool", path=path, quote=raw, tools=named,
                                   detail=f"forbids {', '.join(named)}, a tool the agent is given",
                                   signals=["F4.poor_delivery", "F3.no_delivery"]))
            m = re.search(_NEG + r"\s+(\w+)\s+(?:\w+\s+)?(\w{4,})", s)
            if m and not named:
                verb, obj = m.group(1), m.group(2)
                duty = next((t for t in task_sents if re.search(rf"\b{re.escape(verb)}\w*\b", t)
                             and re.search(rf"\b{re.escape(obj[:5])}", t)), None)
                if duty and len(verb) >= 3:
                    out.append(Finding(rule="instructions.contradicts_task", path=path, quote=raw,
                                       detail=f"contradicts the task's policy: {duty[:160]!r}",
                                       signals=["F4.poor_delivery", "F3.no_delivery"]))
    return out


_QUOTED = re.compile(r"'([^'\n]{3,120})'|\"([^\"\n]{3,120})\"|\u201c([^\u201d\n]{3,120})\u201d")
_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
                 "ten": 10}
_WORD_CAP = re.compile(r"\b(\d{1,2}|" + "|".join(_NUMBER_WORDS) + r")\s+words?\b")
_ANSWER_NOUN = re.compile(r"\b(?:answers?|repl(?:y|ies)|respon(?:d|se|ses)|messages?)\b")


def _squash(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def _final_answers(trajectories: list[Any]) -> list[tuple[str, str, int]]:
    """(task id, final answer squashed, its word count) of each trajectory that gave one: ``final_answer``, else its
    last assistant text."""
    out = []
    for t in trajectories:
        answer = getattr(t, "final_answer", None)
        if not isinstance(answer, str) or not answer.strip():
            answer = next((m.get("content") for m in reversed(getattr(t, "messages", None) or [])
                           if m.get("role") == "assistant" and isinstance(m.get("content"), str)
                           and m["content"].strip() and not m.get("tool_calls")), None)
        if isinstance(answer, str) and answer.strip():
            out.append((str(getattr(t, "task_id", "")), _squash(answer), len(answer.split())))
    return out


def _answer_findings(path: str, text: str, answers: list[tuple[str, str, int]]) -> list[Finding]:
    """Sentences that dictate the final answer's words, or cap it at a few words, as the answers show."""
    out: list[Finding] = []
    if not answers:
        return out
    for raw, s in _sentences(text):
        for m in _QUOTED.finditer(raw):
            quoted = _squash(next(g for g in m.groups() if g))
            if not quoted:
                continue
            tasks = {task for task, a, _ in answers if a == quoted}
            if len(tasks) >= 2:
                out.append(Finding(rule="instructions.dictates_answer", path=path, quote=raw,
                                   detail=f"the final answer of {len(tasks)} different tasks is this sentence's quoted "
                                          f"reply word for word: a fixed reply cannot answer different tasks",
                                   signals=["F4.poor_delivery", "F1.unbacked_claim"]))
                break
        cap = _WORD_CAP.search(s)
        if cap and _ANSWER_NOUN.search(s):
            n = int(cap.group(1)) if cap.group(1).isdigit() else _NUMBER_WORDS[cap.group(1)]
            at_cap = [task for task, _, words in answers if 0 < words <= n + 1 and words >= (n + 1) // 2]
            if 0 < n <= 10 and len(set(at_cap)) >= 2 and len(at_cap) * 2 > len(answers):
                out.append(Finding(rule="instructions.limits_answer", path=path, quote=raw,
                                   detail=f"caps the answer at {n} words, and {len(at_cap)} of {len(answers)} "
                                          f"final answers sit at that cap: too few words to carry a task's answer",
                                   signals=["F4.poor_delivery", "F1.unbacked_claim"]))
    return out


def _verb_noun(tool: str, sentence: str) -> bool:
    parts = [p for p in tool.lower().split("_") if p]
    if len(parts) < 2:
        return False
    m = re.search(_NEG + r"\s+" + re.escape(parts[0]) + r"\s+(?:any\s+|a\s+|the\s+)?(\w+)", sentence)
    return bool(m) and m.group(1).rstrip("s") in {p.rstrip("s") for p in parts[1:]}


def _hook_findings(path: str, source: str, tool_names: list[str]) -> list[Finding]:
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return [Finding(rule="middleware.broken", path=path, detail=f"does not parse: {e.msg}",
                        signals=["F2.harness_error"])]
    lines = source.splitlines()
    out: list[Finding] = []
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None
                   and not (isinstance(n.value, ast.Constant) and n.value.value is None)]
        if not returns:
            continue
        quote = lines[returns[0].lineno - 1].strip() if returns[0].lineno <= len(lines) else ""
        if fn.name == "after_tool":
            params = [a.arg for a in fn.args.args]
            result = params[1] if len(params) > 1 else "result"
            if all(isinstance(r.value, ast.Name) and r.value.id == result for r in returns):
                continue
            how = "truncates" if any(isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Slice)
                                     for r in returns for n in ast.walk(r.value)) else "rewrites or drops"
            out.append(Finding(rule="middleware.rewrites_results", path=path, quote=quote,
                               detail=f"after_tool {how} the tool results the agent reads",
                               signals=["F4.poor_delivery", "F1.unbacked_claim", "F3.repeated_action"]))
        elif fn.name == "before_tool":
            params = [a.arg for a in fn.args.args]
            call = params[0] if params else "call"
            changed = [r for r in returns if not (isinstance(r.value, ast.Name) and r.value.id == call)]
            strings = [r for r in changed if isinstance(r.value, (ast.Constant, ast.JoinedStr, ast.BinOp))
                       and not (isinstance(r.value, ast.Constant) and not isinstance(r.value.value, str))]
            if not strings:
                if changed:  # a replacement call (rewritten arguments) or a computed value (a served result)
                    how = ("rewrites the calls the agent makes before the tool runs them"
                           if all(isinstance(r.value, ast.Dict) for r in changed)
                           else "may answer calls itself or rewrite them (it returns a computed value)")
                    out.append(Finding(rule="middleware.rewrites_calls", path=path,
                                       quote=lines[changed[0].lineno - 1].strip(), detail=f"before_tool {how}",
                                       signals=["F2.invalid_arguments", "F2.blocked_call", "F4.poor_delivery",
                                                "F1.unbacked_claim", "F3.repeated_action", "F3.no_delivery"]))
                continue
            consts = {n.value for n in ast.walk(fn) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
            named = sorted({t for t in tool_names for c in consts if c and (c == t or t.startswith(c)
                                                                          or (len(c) > 3 and c in t))})
            out.append(Finding(rule="middleware.blocks_tools", path=path, quote=quote, tools=named,
                               detail="before_tool blocks " + (", ".join(named) if named else "tool calls"),
                               signals=["F2.blocked_call", "F4.poor_delivery", "F3.no_delivery",
                                        middleware_signal(path)]))
        elif fn.name == "after_model":
            params = [a.arg for a in fn.args.args]
            message = params[0] if params else "message"
            changed = [r for r in returns if not (isinstance(r.value, ast.Name) and r.value.id == message)]
            if changed:  # a reply other than the model's: its text clipped or replaced, its calls changed
                how = "clips" if any(isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Slice)
                                     for r in changed for n in ast.walk(r.value)) else "rewrites"
                out.append(Finding(rule="middleware.rewrites_replies", path=path,
                                   quote=lines[changed[0].lineno - 1].strip(),
                                   detail=f"after_model {how} the model's replies (its final answer or its calls) "
                                          "before the loop reads them",
                                   signals=["F4.poor_delivery", "F1.unbacked_claim", "F2.invalid_arguments",
                                            "F3.no_delivery"]))
        elif fn.name == "before_model":
            out.append(Finding(rule="middleware.rewrites_messages", path=path, quote=quote,
                               detail="before_model replaces the messages the model is sent",
                               signals=["F4.poor_delivery", "F3.repeated_action", "F3.no_delivery"]))
    return out


def _budget_findings(view: HarnessView, trajectories: list[Any]) -> list[Finding]:
    pol = view.policies()
    out: list[Finding] = []
    steps = pol.get("max_steps", DEFAULT_MAX_STEPS)
    if not isinstance(steps, int):
        return out
    cut = [t for t in trajectories if str(getattr(t, "termination", "")) in ("step_budget", "Termination.step_budget")
           and _progressing(t)]
    need = max((_distinct_calls(t) + 2 for t in cut), default=0)
    if steps < DEFAULT_MAX_STEPS or (cut and need > steps):
        why = []
        if steps < DEFAULT_MAX_STEPS:
            why.append(f"below the reference agent's default {DEFAULT_MAX_STEPS}")
        if cut:
            why.append(f"{len(cut)} run(s) were still making new calls when it ran out (they needed >= {need})")
        out.append(Finding(rule="policies.budget", path=POLICIES, quote=f"max_steps: {steps}",
                           detail=f"max_steps {steps} is " + "; ".join(why),
                           signals=["F3.step_budget_exhausted", "F3.no_delivery"]))
    guard = pol.get("loop_guard") or {}
    if isinstance(guard, dict) and guard.get("enabled") and isinstance(guard.get("max_repeats"), int) \
            and guard["max_repeats"] >= max(steps, 1):
        out.append(Finding(rule="policies.budget", path=POLICIES, quote=f"max_repeats: {guard['max_repeats']}",
                           detail=f"loop_guard.max_repeats {guard['max_repeats']} can never be reached within "
                                  f"max_steps {steps}: the guard does nothing",
                           signals=["F3.repeated_action", "F3.step_budget_exhausted"]))
    nudge = pol.get("checkpoint_nudge") or {}
    if isinstance(nudge, dict) and nudge.get("enabled") and isinstance(nudge.get("every"), int) \
            and nudge["every"] >= max(steps, 1):
        out.append(Finding(rule="policies.budget", path=POLICIES, quote=f"every: {nudge['every']}",
                           detail=f"checkpoint_nudge.every {nudge['every']} never fires within max_steps {steps}",
                           signals=["F3.step_budget_exhausted", "F3.no_delivery", "F3.repeated_action"]))
    return out


def _calls(t: Any) -> list[str]:
    return [c["function"]["name"] + str(c["function"].get("arguments")) for m in t.messages
            for c in m.get("tool_calls") or []]


def _distinct_calls(t: Any) -> int:
    return len(set(_calls(t)))


def _progressing(t: Any) -> bool:
    calls = _calls(t)
    return len(calls) >= 2 and calls[-1] != calls[-2] and len(set(calls)) >= len(calls) - 1


def lint_harness(view: HarnessView, tools: list[dict[str, str]] | None = None, trajectories: list[Any] | None = None,
                 labels: list[Any] | None = None, task_text: str = "") -> list[Finding]:
    """Every finding for the harness in ``view`` (see the module docstring)."""
    tools = tools or []
    names = [t["name"] for t in tools]
    out: list[Finding] = []
    prompt = render_prompt(view, tools)
    if prompt is not None and names:
        hidden = [n for n in names if not re.search(r"(?<!\w)" + re.escape(n) + r"(?!\w)", prompt)]
        if hidden:
            out.append(Finding(rule="prompt.hidden_tool", path=PROMPT, tools=hidden,
                               detail=f"the rendered prompt never names {', '.join(hidden)}: the agent is given "
                                      "these tools but not told about them",
                               signals=["F4.poor_delivery", "F3.no_delivery", "F1.unbacked_claim"]))
        listed = {a or b for a, b in _TOOLISH.findall(prompt)}
        absent = sorted(n for n in listed if n not in names)
        if absent:
            out.append(Finding(rule="prompt.absent_tool", path=PROMPT, tools=absent,
                               detail=f"the prompt names {', '.join(absent)}, which no tool is called",
                               signals=["F2.unknown_tool", "F4.poor_delivery"]))
    out += _shadow_findings(view, names)
    answers = _final_answers(trajectories or [])
    for path in sorted(view.files):
        if path == LESSONS or (path.startswith("prompts/") and path.endswith((".md", ".txt", ".j2"))):
            out += _instruction_findings(path, view.files[path], names, task_text)
            out += _answer_findings(path, view.files[path], answers)
        elif path.startswith("middleware/") and path.endswith(".py"):
            out += _hook_findings(path, view.files[path], names)
    out += _budget_findings(view, trajectories or [])
    if labels:
        out = [with_support(f, trajectories or [], labels) for f in out]
    return out


def _shadow_findings(view: HarnessView, names: list[str]) -> list[Finding]:
    """Harness tools named like a tool someone else offers (the environment): the loop runs the harness's function
    in that tool's place, and a harness function gets only the arguments -- never the environment's state -- so the
    agent's lookups and actions no longer reach the environment. ``names`` holds every tool offered, the harness's
    own once per module that declares it: a name offered more often than the harness declares it is shadowed."""
    declared = {path: declared_tools(text) for path, text in sorted(view.files.items())
                if path.startswith("tools/") and path.endswith(".py")}
    ours = [n for found in declared.values() for n in found]
    out = []
    for path, found in declared.items():
        shadowed = sorted({n for n in found if names.count(n) > ours.count(n)})
        if shadowed:
            out.append(Finding(rule="tools.shadows_tool", path=path, tools=shadowed, quote=", ".join(shadowed),
                               detail=f"{path} declares {', '.join(shadowed)}, which the environment offers: the "
                                      "harness's function runs in its place, without the environment's state",
                               signals=["F4.poor_delivery", "F1.unbacked_claim", "F2.tool_error",
                                        "F2.invalid_arguments"]))
    return out


def with_support(f: Finding, trajectories: list[Any], labels: list[Any]) -> Finding:
    """``f`` with its support, target signal, task ids and evidence from the labelled trajectories.

    A finding that names tools (blocked, forbidden) counts only the trajectories that mention one of
    them, when any does (a hidden tool is mentioned by none: then all count). A score signal counts where the run
    failed (not Healthy): a score signal recorded on a run that reached the healthy threshold explains no failure,
    and a repair verified on score can gain nothing there (the culprit search counts the same way,
    `graph.culprit_signals`). The target is the finding's signal that fired most there; the evidence quotes that
    signal. With none, the finding's cost signals are counted on every run (`_cost_support`): a cost is paid on
    healthy runs too."""
    by_traj = {t.id: t for t in trajectories}
    if f.tools:
        def mentions(lab: Any) -> bool:
            t = by_traj.get(lab.trajectory_id)
            return t is not None and any(n in str(m.get("content") or "") + str(m.get("tool_calls") or "")
                                         for m in t.messages[1:] for n in f.tools)
        relevant = [lab for lab in labels if mentions(lab)]
        labels = relevant or labels
    failed = [lab for lab in labels if lab.failure_class != FailureClass.healthy]
    counts: dict[str, int] = {}
    for lab in failed:
        for s in {s.id for s in lab.signals} & set(f.signals):
            counts[s] = counts.get(s, 0) + 1
    if not counts:
        return _cost_support(f, by_traj, labels)
    target = max(f.signals, key=lambda s: (counts.get(s, 0), -f.signals.index(s)))
    hits = [(lab, sig) for lab in failed for sig in lab.signals if sig.id == target]
    hits = list({lab.trajectory_id: (lab, sig) for lab, sig in hits}.values())
    evidence = [Evidence(trajectory_id=lab.trajectory_id, task_id=lab.task_id, step=sig.step,
                         quote=(sig.evidence or "")[:200]) for lab, sig in hits[:3]]
    return f.model_copy(update={"support": len(hits), "target": target, "evidence": evidence,
                                "task_ids": sorted({lab.task_id for lab, _ in hits})})


def _cost_support(f: Finding, by_traj: dict[str, Any], labels: list[Any]) -> Finding:
    """``f`` supported by its cost signals (`evoharness.traces.cost`) when none of its score signals fired: a defect
    the harness's controls turn into cost (a loop the guard blocks) rather than a failure. Its target is then the
    cost signal, and a repair is verified on cost (`verification/cost.py`)."""
    hits: dict[str, list[tuple[Any, tuple[int | None, str]]]] = {}
    for sig in (s for s in f.signals if is_cost_signal(s)):
        for lab in labels:
            t = by_traj.get(lab.trajectory_id)
            where = cost_evidence(t, sig) if t is not None else None
            if where is not None:
                hits.setdefault(sig, []).append((lab, where))
    if not hits:
        return f.model_copy(update={"support": 0, "target": None, "evidence": [], "task_ids": []})
    target = max(hits, key=lambda s: (len(hits[s]), -f.signals.index(s)))
    found = hits[target]
    evidence = [Evidence(trajectory_id=lab.trajectory_id, task_id=lab.task_id, step=step, quote=quote)
                for lab, (step, quote) in found[:3]]
    return f.model_copy(update={"support": len(found), "target": target, "evidence": evidence,
                                "task_ids": sorted({lab.task_id for lab, _ in found})})


def declared_tools(source: str) -> list[str]:
    """Tool names a harness ``tools/*.py`` module declares in ``TOOLS`` (read with ``ast``: never run)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "TOOLS" for t in targets) and \
                    isinstance(node.value, (ast.List, ast.Tuple)):
                for e in node.value.elts:
                    if isinstance(e, ast.Name):
                        names.append(e.id)
                    elif isinstance(e, ast.Dict):
                        for k, v in zip(e.keys, e.values, strict=False):
                            if isinstance(k, ast.Constant) and k.value == "name" and isinstance(v, ast.Constant):
                                names.append(str(v.value))
    return names
