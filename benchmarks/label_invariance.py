"""Metamorphic checks of the rule labeller on tuning data: rewordings a reader would not judge by must not move a run's
label (class, step, agent); a few edits that change what happened must.

The held-back sets (tau-bench retail runs with human step labels, SWE-bench runs of other agents and models) are worded
differently from the sets the rules were tuned on. Each transformation here rewrites the tuning runs as another
benchmark, agent or user might have written them -- tool and agent names, the policy's sentences, a confirmation asked
or given in other words, layout, shell tool names and flags, an executor's exit report -- and the table counts the runs
whose label moved. Only tuning data is read: tau-bench airline (GPT-4o, 200 runs), Who&When Algorithm-Generated, the
mini-swe-agent sample and ``benchmarks/data/swe_fresh_runs`` -- never Who&When Hand-Crafted, AgentRx or
the blind SWE sets.

    python benchmarks/label_invariance.py [--data DIR] [--only NAME...] [--show N] [--json]

Each row: the transformation, the set, what it must do (``hold``: no label moves; ``change``: the rewritten failed runs
must show the failure the edit made -- a reward-1 run is Healthy whatever it did), and ``missed / checked``: the runs
the transformation applies to, and among them those whose label moved (``hold``) or that did not show the failure
(``change``). ``--show N`` prints the first ``N`` moved runs of each row. Exit 1 when a row
misses its expectation (for scripting), 2 on bad input.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import re
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from evoharness.benchrepeat import same_checkout
from evoharness.diagnosis.consent import affirmative
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.invariants import write_calls
from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.models import Label
from evoharness.traces.importers import load_paths
from evoharness.traces.models import Trajectory

ROOT = Path(__file__).resolve().parents[1]
TAU = "tau_bench_airline_gpt4o/gpt-4o-airline.json"
WHO = "who_and_when/Who&When/Algorithm-Generated"
MINI = "mini_swe_agent_sample/trajs"
FRESH = ROOT / "benchmarks" / "data" / "swe_fresh_runs"

# ---- words --------------------------------------------------------------------------------------------------------
# A user's yes in the words the rules were tuned on, and in others a reader takes for the same yes
YES_COMMON = ("Yes please.", "Go ahead.", "Sure, do it.", "Confirmed.", "Yes, that's correct.", "OK, proceed.")
YES_OTHER = ("Absolutely.", "Yup, that works for me.", "Sounds good.", "I agree.", "Approved.", "Alright, go for it.",
             "Definitely, let's do that.", "Of course, please go on.", "That's right.", "Certainly, by all means.")
# a yes said as a bare request to act, with no word of assent: a yes where it answers the agent asking leave for the
# action (consent.affirmed). "The change" stands for whatever was asked; a request that names an action names the
# write's own (by the verb its tool's name opens with): "Please change it" is no yes to a cancellation
YES_IMPERATIVE = ("Perfect, please make the change.",)
YES_IMPERATIVE_NAMED = {"book": "Great, book it then.", "update": "Please change it.", "cancel": "Please cancel it.",
                        "send": "Please send it."}
# the agent asking for the yes
ASKS = ("Shall I proceed?", "Do you want me to go ahead?", "Please confirm.", "Is that OK with you?",
        "Should I go ahead with this?", "Would you like me to make this change?", "Can I go ahead and do that?")
# the airline policy's confirmation sentence and identity clause, paraphrased
CONFIRM_SENTENCE = "you must list the action details and obtain explicit user confirmation (yes) to proceed."
CONFIRM_PARAPHRASES = (
    "you must list the action details and get the user's explicit approval before you proceed.",
    "you must describe the action and ask the user to confirm it; act only once the user agrees.",
    "you must spell out the details and wait until the user explicitly consents.",
    "you must list the details, and the user must agree to them before you go ahead.",
    "you must read the details back and obtain the user's express permission first.",
)
OBTAIN_ID = "obtain the user id"
OBTAIN_ID_PARAPHRASES = ("ask for the user id", "get the user ID", "collect the user's user id",
                         "request the user id")
# tool verbs and nouns of another API of the same domain
VERB_SYNONYMS = {"get": "retrieve", "search": "lookup", "list": "fetch", "update": "modify", "book": "create",
                 "cancel": "void", "send": "issue", "calculate": "compute", "transfer": "escalate"}
NOUN_SYNONYMS = {"reservation": "booking", "user": "customer", "flight": "trip", "baggages": "bags"}
VERB_SYNONYMS_2 = {"get": "show", "search": "find", "update": "change", "book": "make", "cancel": "delete",
                   "send": "grant", "calculate": "evaluate", "transfer": "handoff"}
NOUN_SYNONYMS_2 = {"reservation": "trip", "user": "profile", "baggages": "luggage"}
# other agents' shell tools (OpenHands, Claude Code, Cursor, Codex, SWE-agent-like and plain names)
SHELL_NAMES = ("execute_bash", "Bash", "run_terminal_cmd", "shell", "exec_command", "run_shell_command", "terminal")
# the executor of a multi-agent log, named otherwise (the content still shows exit codes)
EXECUTOR_NAMES = ("Code_Executor", "ComputerTerminal", "code_runner", "Python_Sandbox", "Interpreter")


# ---- the sets -----------------------------------------------------------------------------------------------------

def set_paths(data: Path) -> dict[str, Path]:
    return {"tau-airline": data / TAU, "who-and-when/AG": data / WHO, "swe-mini": data / MINI, "swe-fresh": FRESH}


def load_sets(data: Path) -> dict[str, list[Trajectory]]:
    out = {}
    for name, path in set_paths(data).items():
        if not path.exists():
            raise FileNotFoundError(path)
        out[name] = list(load_paths([path]))
    return out


def key(label: Label, rename: dict[str, str] | None = None) -> tuple:
    step = label.first_signal.step if label.first_signal else None
    agent = label.agent
    if rename and agent is not None:
        agent = {v: k for k, v in rename.items()}.get(agent, agent)
    return str(label.failure_class), step, agent


def _copy(t: Trajectory, messages: list[dict], meta: dict | None = None) -> Trajectory:
    return t.model_copy(update={"messages": messages, "meta": meta if meta is not None else copy.deepcopy(t.meta)})


def _texts(m: dict) -> Iterable[str]:
    c = m.get("content")
    return [c] if isinstance(c, str) else []


def _sub_everywhere(t: Trajectory, fn: Callable[[str], str], tool_names: Callable[[str], str] | None = None,
                    roles: tuple[str, ...] = ("system", "user", "assistant", "tool")) -> Trajectory:
    """Every message text (of ``roles``) and call argument put through ``fn``; tool names through ``tool_names``."""
    msgs, meta = copy.deepcopy(t.messages), copy.deepcopy(t.meta)
    for k, v in meta.items():  # the task's own words (tau-bench's user instruction), as the messages
        if isinstance(v, str) and k != "source_format":
            meta[k] = fn(v)
    for m in msgs:
        if isinstance(m.get("content"), str) and m.get("role") in roles:
            m["content"] = fn(m["content"])
        for c in m.get("tool_calls") or []:
            f = c.get("function", {})
            if isinstance(f.get("arguments"), str) and "assistant" in roles:
                f["arguments"] = fn(f["arguments"])
            if tool_names and isinstance(f.get("name"), str):
                f["name"] = tool_names(f["name"])
        if tool_names and m.get("role") == "tool" and isinstance(m.get("name"), str):
            m["name"] = tool_names(m["name"])
    out = _copy(t, msgs, meta)
    if isinstance(t.final_answer, str):
        out.final_answer = fn(t.final_answer)
    return out


def _tool_names(t: Trajectory) -> set[str]:
    return {c["function"]["name"] for m in t.messages for c in m.get("tool_calls") or []
            if isinstance(c.get("function", {}).get("name"), str)}


def rename_tools(t: Trajectory, new: Callable[[str], str]) -> Trajectory | None:
    """Every tool renamed (``new``) in its calls, its results and wherever a text names it (the system prompt)."""
    names = sorted(_tool_names(t), key=len, reverse=True)
    if not names:
        return None
    mapping = {n: new(n) for n in names}
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    out = _sub_everywhere(t, lambda s: pattern.sub(lambda m: mapping[m.group(1)], s), lambda n: mapping.get(n, n))
    tools = out.meta.get("tools")
    if isinstance(tools, list):
        for tool in tools:
            fn = tool.get("function", tool) if isinstance(tool, dict) else None
            if isinstance(fn, dict) and fn.get("name") in mapping:
                fn["name"] = mapping[fn["name"]]
    return out


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.title() for w in rest)


def joined(name: str) -> str:
    """The name as one lower-case word, no separator (``searchflights``, ``transfertohumanagents``)."""
    return name.replace("_", "").lower()


def namespaced(name: str) -> str:
    return f"mcp__airline__{name}"


def synonyms(name: str, verbs: dict[str, str] = VERB_SYNONYMS, nouns: dict[str, str] = NOUN_SYNONYMS) -> str:
    words = name.split("_")
    words[0] = verbs.get(words[0], words[0])
    return "_".join(nouns.get(w, w) for w in words)


def synonyms_2(name: str) -> str:
    return synonyms(name, VERB_SYNONYMS_2, NOUN_SYNONYMS_2)


# ---- tau-bench: the policy ----------------------------------------------------------------------------------------

def _system(t: Trajectory, fn: Callable[[str], str | None]) -> Trajectory | None:
    msgs = copy.deepcopy(t.messages)
    done = False
    for m in msgs:
        if m.get("role") == "system" and isinstance(m.get("content"), str):
            new = fn(m["content"])
            if new is not None and new != m["content"]:
                m["content"], done = new, True
    return _copy(t, msgs) if done else None


def _pick(options: tuple[str, ...], t: Trajectory) -> str:
    return options[sum(map(ord, t.id)) % len(options)]


def confirm_paraphrased(t: Trajectory) -> Trajectory | None:
    return _system(t, lambda s: s.replace(CONFIRM_SENTENCE, _pick(CONFIRM_PARAPHRASES, t)) if CONFIRM_SENTENCE in s
                   else None)


def identity_paraphrased(t: Trajectory) -> Trajectory | None:
    return _system(t, lambda s: s.replace(OBTAIN_ID, _pick(OBTAIN_ID_PARAPHRASES, t)) if OBTAIN_ID in s else None)


def policy_prose(t: Trajectory) -> Trajectory | None:
    """Markdown to plain prose: headings become sentences, each section's bullets one paragraph (one line)."""
    def prose(s: str) -> str:
        paras, cur = [], []
        for ln in s.splitlines():
            stripped = ln.strip()
            if stripped.startswith("#"):
                if cur:
                    paras.append(" ".join(cur))
                cur = [stripped.lstrip("#").strip() + "."]
            elif stripped:
                cur.append(re.sub(r"^(?:[-*]|\d+[.)])\s+", "", stripped))
        if cur:
            paras.append(" ".join(cur))
        return "\n\n".join(paras)
    return _system(t, prose)


def policy_reordered(t: Trajectory) -> Trajectory | None:
    """Each section's bullets in another order (the same order for every run: one policy)."""
    def reorder(s: str) -> str:
        blocks = re.split(r"(\n(?=#))", s)
        out = []
        for b in blocks:
            lines = b.split("\n")
            bullets = [i for i, ln in enumerate(lines) if ln.startswith("- ")]
            texts = [lines[i] for i in bullets]
            random.Random(len(b)).shuffle(texts)
            for i, text in zip(bullets, texts, strict=True):
                lines[i] = text
            out.append("\n".join(lines))
        return "".join(out)
    return _system(t, reorder)


# ---- tau-bench: the conversation ----------------------------------------------------------------------------------

def _yes_writes(t: Trajectory) -> dict[int, str]:
    """The user messages that say yes just before a write, each with the write's tool name: the last user message
    before each write, when it is an affirmative, short and holds no digit (no detail of the action rides on it)."""
    view = TraceView(t)
    msgs, out = t.messages, {}
    for w in write_calls(view):
        u = next((i for i in range(w.step - 1, -1, -1) if msgs[i].get("role") == "user"), None)
        text = msgs[u].get("content") if u is not None else None
        if isinstance(text, str) and affirmative(text) and len(text.split()) <= 20 and not re.search(r"\d", text) \
                and u not in out:
            out[u] = w.name
    return out


def _yes_steps(t: Trajectory) -> list[int]:
    return list(_yes_writes(t))


def reworded_yes(options: tuple[str, ...], named: dict[str, str] | None = None
                 ) -> Callable[[Trajectory], Trajectory | None]:
    """Each yes before a write said as one of ``options``, or as ``named``'s words for the verb the write's tool name
    opens with."""
    def transform(t: Trajectory) -> Trajectory | None:
        writes = _yes_writes(t)
        if not writes:
            return None
        msgs = copy.deepcopy(t.messages)
        for k, (i, name) in enumerate(writes.items()):
            said = options + ((named[verb],) if named and (verb := name.split("_")[0]) in named else ())
            msgs[i]["content"] = said[(sum(map(ord, t.id)) + k) % len(said)]
        return _copy(t, msgs)
    return transform


LAST_QUESTION = re.compile(r"[^.!?\n]*\b(?:proceed|confirm|go ahead|would you like)\b[^.!?\n]*\?\s*$", re.I)


def reworded_ask(t: Trajectory) -> Trajectory | None:
    """The agent's closing question before a yes ("Would you like to proceed?") in other words."""
    msgs = copy.deepcopy(t.messages)
    done = False
    for k, u in enumerate(_yes_steps(t)):
        a = next((i for i in range(u - 1, -1, -1) if msgs[i].get("role") == "assistant"), None)
        text = msgs[a].get("content") if a is not None else None
        if isinstance(text, str) and not msgs[a].get("tool_calls") and LAST_QUESTION.search(text):
            msgs[a]["content"] = LAST_QUESTION.sub(" " + ASKS[(sum(map(ord, t.id)) + k) % len(ASKS)], text, count=1)
            done = True
    return _copy(t, msgs) if done else None


def yes_removed(t: Trajectory) -> Trajectory | None:
    """MUST change: the user's yes before the first write becomes a question that says no yes."""
    steps = _yes_steps(t)
    if not steps:
        return None
    msgs = copy.deepcopy(t.messages)
    msgs[steps[0]]["content"] = "Hmm, what would the total be again?"
    return _copy(t, msgs)


def _prose_only(fn: Callable[[str], str]) -> Callable[[str], str]:
    """``fn`` on a text's prose, its fenced code blocks (a command, a patch) left as they are."""
    def apply(s: str) -> str:
        parts = s.split("```")
        return "```".join(fn(p) if k % 2 == 0 else p for k, p in enumerate(parts))
    return apply


def whitespace(t: Trajectory) -> Trajectory | None:
    """Prose padded with blank lines, CRLF line ends and two spaces after a full stop (code blocks, call arguments and
    tool output as they were: a blank there is part of a command or a file)."""
    msgs = copy.deepcopy(t.messages)
    pad = _prose_only(lambda s: s.replace("\n", " \r\n").replace(". ", ".  "))
    for m in msgs:
        if isinstance(m.get("content"), str) and m.get("role") in ("system", "user", "assistant"):
            m["content"] = "\n " + pad(m["content"]) + "  \n"
    return _copy(t, msgs)


ISO_DATE = re.compile(r"\b(20\d\d)-(\d\d)-(\d\d)(?:T(\d\d:\d\d:\d\d))?")


def dates_reformatted(t: Trajectory) -> Trajectory | None:
    """ISO dates as ``2024/05/15`` and timestamps as ``2024/05/15 15:00:00``, everywhere (the API's own format)."""
    if not any(ISO_DATE.search(s) for m in t.messages for s in _texts(m)):
        return None
    return _sub_everywhere(t, lambda s: ISO_DATE.sub(
        lambda m: f"{m[1]}/{m[2]}/{m[3]}" + (f" {m[4]}" if m[4] else ""), s))


RESERVATION_ID = re.compile(r'"reservation_id"\s*:\s*"([A-Z0-9]{6})"')


def ids_reformatted(t: Trajectory) -> Trajectory | None:
    """Every reservation id written with a prefix (``ZFA04Y`` -> ``RES-ZFA04Y``), wherever it appears."""
    ids = {i for m in t.messages for s in _texts(m) for i in RESERVATION_ID.findall(s)}
    ids |= {i for m in t.messages for c in m.get("tool_calls") or []
            for i in RESERVATION_ID.findall(c.get("function", {}).get("arguments") or "")}
    if not ids:
        return None
    pattern = re.compile(r"\b(" + "|".join(sorted(ids)) + r")\b")
    return _sub_everywhere(t, lambda s: pattern.sub(r"RES-\1", s))


def _relaid(x: object, depth: int = 0) -> object:
    """``x`` with an unknown field in every object that is a message (has a ``role``) and at the top."""
    if isinstance(x, list):
        return [_relaid(v, depth + 1) for v in x]
    if isinstance(x, dict):
        out = {k: _relaid(v, depth + 1) for k, v in x.items()}
        if "role" in x:
            out["metadata"] = {"latency_ms": 12.5, "tags": []}
        if depth == 0:
            out["exported_by"] = "another-harness 2.1"
        return out
    return x


def json_layout(path: Path, tmp: Path) -> list[Trajectory]:
    """A set's JSON files written back indented, keys sorted, with unknown fields (``_relaid``; a tau-bench list's
    records each at the top), and read back by the importer; other files copied as they are."""
    # the folder the set's files sit in, and what beside them the importer reads (the mini-swe-agent sample's results
    # are in ``logs/`` beside ``trajs/``)
    root = path.parent if path.is_file() or path.name == "trajs" else path
    files = [path] if path.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    dest_root = tmp / root.name
    for f in files:
        dest = dest_root / f.relative_to(root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if f.suffix == ".json":
            data = json.loads(f.read_text())
            data = [_relaid(r) for r in data] if isinstance(data, list) else _relaid(data)
            dest.write_text(json.dumps(data, indent=4, sort_keys=True))
        else:
            dest.write_bytes(f.read_bytes())
    return list(load_paths([dest_root / path.relative_to(root) if root != path else dest_root]))


# ---- SWE runs -----------------------------------------------------------------------------------------------------

def shell_renamed(t: Trajectory) -> Trajectory | None:
    if "bash" not in _tool_names(t):
        return None
    new = _pick(SHELL_NAMES, t)
    return _sub_everywhere(t, lambda s: s, lambda n: new if n == "bash" else n)


FLAG_REWRITES = (
    (re.compile(r"\bgrep -rn\b"), "grep -r -n"),
    (re.compile(r"\bgrep -n\b"), "grep --line-number"),
    (re.compile(r"\bsed -i (?=['\"])"), "sed -i.bak "),
    (re.compile(r"\bls -la\b"), "ls -al"),
    (re.compile(r"\bpython -m pytest\b"), "pytest"),
    (re.compile(r"\bpython3? (?=\S+\.py\b)"), "python3 -u "),
    (re.compile(r"\bcat (?=[\w./-]+\.py\b)"), "cat -- "),
)


def flags_rewritten(t: Trajectory) -> Trajectory | None:
    def rewrite(s: str) -> str:
        for pattern, repl in FLAG_REWRITES:
            s = pattern.sub(repl, s)
        return s
    out = _sub_everywhere(t, rewrite, roles=("assistant",))
    return out if out.messages != t.messages else None


PYTEST_SUMMARY = re.compile(r"=+ (?:(\d+) failed)?(?:, )?(?:(\d+) passed)?(?:, [^=\n]*)? in [\d.]+s(?: \([^)]*\))? =+")


def unittest_output(t: Trajectory) -> Trajectory | None:
    """pytest's closing summary line written as unittest prints it."""
    def rewrite(s: str) -> str:
        def line(m: re.Match) -> str:
            failed, passed = int(m[1] or 0), int(m[2] or 0)
            tail = f"FAILED (failures={failed})" if failed else "OK"
            return f"{'-' * 70}\nRan {failed + passed} tests in 0.412s\n\n{tail}"
        return PYTEST_SUMMARY.sub(line, s)
    out = _sub_everywhere(t, rewrite, roles=("tool", "user"))
    return out if out.messages != t.messages else None


def _first_read(t: Trajectory) -> tuple[int, dict, dict] | None:
    """The first shell call that only reads (``cat``, ``ls``, ``grep``, ``find``), with its result message."""
    for i, m in enumerate(t.messages):
        for c in m.get("tool_calls") or []:
            cmd = json.loads(c["function"].get("arguments") or "{}").get("command", "")
            if re.match(r"(?:cat|ls|grep|find|head|nl)\b", cmd) and "|" not in cmd and ">" not in cmd:
                res = next((r for r in t.messages[i + 1:] if r.get("tool_call_id") == c["id"]), None)
                if res is not None and len(m.get("tool_calls")) == 1:
                    return i, m, res
    return None


def _loop(t: Trajectory, edits: bool) -> Trajectory | None:
    found = _first_read(t)
    if found is None:
        return None
    i, call_msg, res = found
    j = t.messages.index(res)
    inserted = []
    for k in range(3):
        if edits:
            cid = f"edit_{k}"
            cmd = f"sed -i 's/^# step {k}$/# step {k + 1}/' setup.py"
            inserted.append({"role": "assistant", "content": f"THOUGHT: edit.\n\n```bash\n{cmd}\n```",
                             "tool_calls": [{"id": cid, "type": "function",
                                             "function": {"name": "bash", "arguments": json.dumps({"command": cmd})}}]})
            inserted.append({"role": "tool", "tool_call_id": cid, "name": "bash",
                             "content": "<returncode>0</returncode>\n<output>\n</output>"})
        m2, r2 = copy.deepcopy(call_msg), copy.deepcopy(res)
        cid = f"{call_msg['tool_calls'][0]['id']}_again{k}"
        m2["tool_calls"][0]["id"] = r2["tool_call_id"] = cid
        inserted += [m2, r2]
    return _copy(t, copy.deepcopy(t.messages[: j + 1]) + inserted + copy.deepcopy(t.messages[j + 1:]))


def read_looped(t: Trajectory) -> Trajectory | None:
    """MUST change: the first read sent three more times with the same result, nothing between: a loop."""
    return _loop(t, edits=False)


def read_looped_with_edits(t: Trajectory) -> Trajectory | None:
    """The same repeats, an in-place edit before each: progress, no loop."""
    return _loop(t, edits=True)


# ---- multi-agent logs ---------------------------------------------------------------------------------------------

def _agents(t: Trajectory) -> set[str]:
    return {m["name"] for m in t.messages if isinstance(m.get("name"), str) and m.get("role") == "assistant"}


def rename_agents(t: Trajectory, mapping: dict[str, str]) -> Trajectory:
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(mapping, key=len, reverse=True))) + r")\b")
    out = _sub_everywhere(t, lambda s: pattern.sub(lambda m: mapping[m.group(1)], s))
    for m in out.messages:
        if m.get("name") in mapping:
            m["name"] = mapping[m["name"]]
    for k in ("mistake_agent",):
        if out.meta.get(k) in mapping:
            out.meta[k] = mapping[out.meta[k]]
    return out


AG2_REPORT = re.compile(r"^exitcode: (\d+) \(execution (?:succeeded|failed)\)\nCode output:")
# the executor's report of a run in other executors' words
REPORTS = ("Process finished with exit code {}\nOutput:", "Exit code: {}\nOutput:", "[Command exited with code {}]\n",
           "Return code: {}\nstdout:")


def executor_report_reworded(t: Trajectory) -> Trajectory | None:
    """AG2's ``exitcode: 1 (execution failed)\nCode output:`` opening an executor's report, in another's words."""
    msgs, done = copy.deepcopy(t.messages), False
    head = _pick(REPORTS, t)
    for m in msgs:
        c = m.get("content")
        if isinstance(c, str) and AG2_REPORT.match(c):
            m["content"], done = AG2_REPORT.sub(lambda g: head.format(g[1]), c, count=1), True
    return _copy(t, msgs) if done else None


def experts_renamed(t: Trajectory) -> tuple[Trajectory, dict[str, str]] | None:
    """Every ``*_Expert`` renamed ``*_Specialist`` (the executor keeps its name)."""
    mapping = {a: a.removesuffix("_Expert") + "_Specialist" for a in _agents(t) if a.endswith("_Expert")}
    return (rename_agents(t, mapping), mapping) if mapping else None


def executor_renamed(t: Trajectory) -> tuple[Trajectory, dict[str, str]] | None:
    if "Computer_terminal" not in _agents(t):
        return None
    mapping = {"Computer_terminal": _pick(EXECUTOR_NAMES, t)}
    return rename_agents(t, mapping), mapping


# ---- the table ----------------------------------------------------------------------------------------------------

@dataclass
class Check:
    name: str
    sets: tuple[str, ...]
    transform: Callable
    expect: str = "hold"  # or "change": the rewritten run must show the failure (``shows``)
    shows: Callable[[Label, Trajectory], bool] | None = None
    same_label: bool = True  # "hold" also asks the same (class, step, agent); False: ``shows`` alone (steps moved)


def _confirmation_flagged(label: Label, t: Trajectory) -> bool:
    """The violation log holds the write that followed the removed yes."""
    return any(v.rule == "policy.confirmation" for v in label.violations)


def _loop_shown(label: Label, t: Trajectory) -> bool:
    return any(s.id == "F3.repeated_action" for s in label.signals)


def _no_loop(label: Label, t: Trajectory) -> bool:
    return not any(s.id == "F3.repeated_action" for s in label.signals)


TAU_SETS = ("tau-airline",)
SWE_SETS = ("swe-mini", "swe-fresh")
CHECKS = (
    Check("tool names camelCase", TAU_SETS, lambda t: rename_tools(t, camel)),
    Check("tool names one lower-case word (searchflights)", TAU_SETS, lambda t: rename_tools(t, joined)),
    Check("tool names namespaced (mcp__airline__*)", TAU_SETS, lambda t: rename_tools(t, namespaced)),
    Check("tool names synonyms (retrieve_customer_details)", TAU_SETS, lambda t: rename_tools(t, synonyms)),
    Check("tool names synonyms (show_profile_details)", TAU_SETS, lambda t: rename_tools(t, synonyms_2)),
    Check("policy: confirmation paraphrased", TAU_SETS, confirm_paraphrased),
    Check("policy: obtain the user id paraphrased", TAU_SETS, identity_paraphrased),
    Check("policy: markdown -> prose paragraphs", TAU_SETS, policy_prose),
    Check("policy: bullets reordered", TAU_SETS, policy_reordered),
    Check("user's yes: common words", TAU_SETS, reworded_yes(YES_COMMON)),
    Check("user's yes: other words", TAU_SETS, reworded_yes(YES_OTHER)),
    Check("user's yes: a bare request to act", TAU_SETS, reworded_yes(YES_IMPERATIVE, YES_IMPERATIVE_NAMED)),
    Check("agent's confirmation question reworded", TAU_SETS, reworded_ask),
    Check("whitespace (CRLF, padding, double spaces)", TAU_SETS + ("who-and-when/AG",) + SWE_SETS, whitespace),
    Check("dates as 2024/05/15", TAU_SETS, dates_reformatted),
    Check("reservation ids prefixed (RES-ZFA04Y)", TAU_SETS, ids_reformatted),
    Check("json layout: indent, key order, unknown fields", TAU_SETS + ("who-and-when/AG",) + SWE_SETS, json_layout),
    Check("user's yes removed before a write", TAU_SETS, yes_removed, "change", _confirmation_flagged),
    Check("shell tool renamed (execute_bash, Bash, ...)", SWE_SETS, shell_renamed),
    Check("command flags rewritten", SWE_SETS, flags_rewritten),
    Check("pytest summary as unittest's", ("swe-mini",), unittest_output),  # (swe_fresh's runs print none)
    Check("a read repeated 3x, nothing between", SWE_SETS, read_looped, "change", _loop_shown),
    Check("a read repeated 3x, an edit before each", SWE_SETS, read_looped_with_edits, "hold", _no_loop,
          same_label=False),
    Check("experts renamed (*_Specialist)", ("who-and-when/AG",), experts_renamed),
    Check("executor renamed (Code_Executor, ...)", ("who-and-when/AG",), executor_renamed),
    Check("executor's exit report reworded", ("who-and-when/AG",), executor_report_reworded),
)


def run_check(check: Check, sets: dict[str, list[Trajectory]], labeller: Labeller, base: dict[str, Label],
              paths: dict[str, Path]) -> dict[str, tuple[int, int, list[str]]]:
    """Per set: (runs that miss the expectation, runs checked, their ids and labels before -> after)."""
    out = {}
    for name in check.sets:
        missed, checked, shown = 0, 0, []
        if check.transform is json_layout:
            with tempfile.TemporaryDirectory() as tmp:
                relaid = {u.id: u for u in json_layout(paths[name], Path(tmp))}
            pairs = [(t, (relaid[t.id], None)) for t in sets[name] if t.id in relaid]
            missed += len(sets[name]) - len(pairs)  # a run the importer no longer reads
            shown += [f"{t.id}: not read back" for t in sets[name] if t.id not in relaid]
        else:
            pairs = []
            for t in sets[name]:
                res = check.transform(t)
                if res is None:
                    continue
                pairs.append((t, res if isinstance(res, tuple) else (res, None)))
        for t, (u, rename) in pairs:
            before = base[t.id]
            if check.expect == "change" and before.failure_class == "healthy":
                continue  # a reward-1 run is Healthy whatever it did: no failure for the edit to show
            after = labeller.label(u)
            checked += 1
            if check.expect == "change":
                ok = check.shows(after, u)
            else:
                ok = (not check.same_label or key(after, rename) == key(before)) \
                    and (check.shows is None or check.shows(after, u))
            if not ok:
                missed += 1
                shown.append(f"{t.id}: {key(before)} -> {key(after, rename)} "
                             f"{after.first_signal.id if after.first_signal else ''}")
        out[name] = (missed, checked, shown)
    return out


def main(argv: list[str] | None = None) -> int:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=DefaultsHelp)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--only", nargs="*", default=None, help="checks whose name holds one of these words")
    ap.add_argument("--show", type=int, default=0, help="print the first N runs that miss, per row")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    checks = [c for c in CHECKS if args.only is None or any(w.lower() in c.name.lower() for w in args.only)]
    if not checks:  # a mistyped word printed the table's header alone, exit 0: every check passed, it seemed
        print(f"error: --only {' '.join(args.only)}: no check's name holds these words (names: "
              f"{'; '.join(c.name for c in CHECKS)})", file=sys.stderr)
        return 2
    try:
        sets = load_sets(args.data)
    except FileNotFoundError as e:
        print(f"error: not found: {e}", file=sys.stderr)
        return 2
    labeller = Labeller()
    base = {t.id: labeller.label(t) for ts in sets.values() for t in ts}
    rows, failed = [], False
    for c in checks:
        for set_name, (missed, checked, shown) in run_check(c, sets, labeller, base, set_paths(args.data)).items():
            rows.append({"check": c.name, "set": set_name, "expect": c.expect, "missed": missed,
                         "checked": checked, "runs": shown[: args.show]})
            failed |= missed > 0
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(f"{'transformation':48} {'set':16} {'expect':6} {'missed / checked':>16}")
        for r in rows:
            print(f"{r['check']:48} {r['set']:16} {r['expect']:6} {r['missed']:>7} / {r['checked']:<7}")
            for line in r["runs"]:
                print(f"    {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    same_checkout(__file__)
    raise SystemExit(main())
