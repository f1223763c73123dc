"""The stand-in agent model (``standin:weak``, ``standin:strong``): an OFFLINE measuring instrument.

It reads the harness the way an instruction-following model does and has seeded capability limits
that a harness's controls can cut. It is handed the task's reference solution (``bind_task``: the
environment's ground-truth calls) as *what it would like to do*; everything else comes from what it
is sent: the system prompt (which carries the lessons), the user turns, the tool schemas and the
tool results. Every random draw is made up front from ``sha256("standin:{seed}:{task}:{rollout}")``,
so one seed makes the same draws under every harness and only its reactions differ.

Perception (what it reads, see docs/agent.md for the full table):

- **tools**: a tool is usable only if its schema was sent AND its name appears in the system prompt
  (or a user turn). A tool named in the prompt without a schema is tried when it is the closest name
  to the one it wants (an ``unknown_tool`` error); a tool it cannot see is never called.
- **instructions**: `evoharness.agent.directives.read_directives` over the system prompt and every
  later user turn: tools off, answer now, forbidden tools, argument format, repeats, delivery,
  verification, answer length. It obeys good and bad instructions alike.
- **tool results**: its answer quotes the results it saw (truncated results give wrong answers); a
  result opening with failure vocabulary (error, blocked, denied, invalid, unknown, failed, ...) is a
  rejection; an empty result is retried once (p=0.5) and then given up.
- **rejections**: a malformed call is fixed with p=0.6 when the error text names the tool's
  parameters, its JSON format or the intended tool, else p=0.2; resent unchanged otherwise (at most 4
  tries, then the action is dropped). A well-formed call that was rejected is retried once (p=0.5).

Capability limits (``standin:weak``; ``standin:strong`` has them at 0): a malformed call (0.30 per
call, 0.10 after a JSON-arguments instruction), a loop (0.25 per rollout, x0.4 after a no-repeat
instruction; a rejected repeat or an urging user turn ends it with p=0.85), a stall after its plan
(0.25, x0.5 after a conditional "stop calling tools"; ended the same way), forgetting to answer (0.25,
x0.4 after a must-deliver instruction; any later user turn makes it answer), and two content limits no
harness cuts: one wrong argument (0.15) and a vague answer (0.15).
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from evoharness.agent.directives import Directives, read_directives
from evoharness.agent.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from evoharness.agent.scripted import READ_ONLY, VAGUE_ANSWER, _wrong_name, perturb_one_argument
from evoharness.envs.base import TaskSpec, ToolCallSpec

STANDIN_RATES: dict[str, float] = {
    "malformed": 0.30, "malformed_reminded": 0.10, "fix_informative": 0.6, "fix_uninformative": 0.2,
    "repeat": 0.25, "stall": 0.25, "forget": 0.25, "heed": 0.85, "retry_rejected": 0.5,
    "wrong_args": 0.15, "wrong_answer": 0.15,
}
STRONG_RATES = STANDIN_RATES | {k: 0.0 for k in ("malformed", "malformed_reminded", "repeat", "stall", "forget",
                                                   "wrong_args", "wrong_answer")} | {"fix_informative": 1.0}
REJECTION = re.compile(r"^\W*(?:\w+\W+){0,4}?(?:error|errors|blocked|denied|not allowed|forbidden|refused|rejected|"
                       r"invalid|unknown|failed|failure|not permitted|disabled|unavailable|not available)\b", re.I)
MAX_MALFORMED_TRIES = 4
PERCEPTION_CACHE = 512  # texts whose reading the stand-ins of every rollout share (a harness's prompts, task turns)
NO_TOOLS_ANSWER = "I cannot look this up, so I cannot give a definite answer."
NOTHING_FOUND = "I could not find anything."


@dataclass
class _Draws:
    u_malformed: list[float]
    u_kind: list[float]
    u_fix: list[float]
    u_heed: list[float]
    repeat_u: float
    repeat_at: int | None
    stall_u: float
    forget_u: float
    wrong_answer: bool


@dataclass
class _Pending:
    id: str
    action: ToolCallSpec
    name: str  # the tool name actually called
    mode: str  # act | loop | stall | verify
    malformed: str | None = None  # None | "json" | "name" | "format"
    tries: int = 0


@dataclass
class _State:
    i: int = 0
    pending: _Pending | None = None
    seen: list[str] = field(default_factory=list)
    looped: bool = False
    forgot: bool = False
    verified: bool = False
    stall_n: int = 0
    call_n: int = 0
    fix_n: int = 0
    heed_n: int = 0
    retried: set[int] = field(default_factory=set)


@functools.lru_cache(maxsize=PERCEPTION_CACHE)
def _directives(text: str, names: tuple[str, ...]) -> Directives:
    """``read_directives``, once per text and tool list for every rollout served here."""
    return read_directives(text, list(names))


@functools.lru_cache(maxsize=PERCEPTION_CACHE)
def _listed(text: str, names: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    """The tools ``text`` names that have a schema (``names``), and the tool-like names it lists without one."""
    visible = frozenset(n for n in names if re.search(r"(?<![\w])" + re.escape(n) + r"(?![\w])", text))
    absent = tuple(w for w in re.findall(r"`?([a-z][a-z0-9]*(?:_[a-z0-9]+)+)`?", text) if w not in names)
    return visible, absent


def is_rejection(text: str) -> bool:
    """A tool result that reports a failure rather than data (failure vocabulary near its start)."""
    return bool(REJECTION.match(text or ""))


class StandInModel:
    """One instance per rollout (``bind_task`` before ``invoke``)."""

    def __init__(self, seed: int = 0, rates: dict[str, float] | None = None, name: str = "standin:weak") -> None:
        self.seed, self.name = seed, name
        self.rates = {**STANDIN_RATES, **(rates or {})}
        self.actions: list[ToolCallSpec] | None = None

    def bind_task(self, task: TaskSpec, ground_truth: list[ToolCallSpec], rollout: int = 0) -> None:
        digest = hashlib.sha256(f"standin:{self.seed}:{task.id}:{rollout}".encode()).hexdigest()
        rng = random.Random(int(digest[:16], 16))
        n, r = len(ground_truth), self.rates
        actions = [ToolCallSpec(name=c.name, args=json.loads(json.dumps(c.args, default=str))) for c in ground_truth]
        u_mal, u_kind = [rng.random() for _ in range(n)], [rng.random() for _ in range(n)]
        u_fix, u_heed = [rng.random() for _ in range(64)], [rng.random() for _ in range(64)]
        repeat_u, repeat_at = rng.random(), (rng.randrange(n) if n else None)
        stall_u, forget_u = rng.random(), rng.random()
        wrong_args, wrong_answer = rng.random() < r["wrong_args"], rng.random() < r["wrong_answer"]
        perturb_one_argument(actions, wrong_args, rng)
        self.actions = actions
        self.draws = _Draws(u_mal, u_kind, u_fix, u_heed, repeat_u, repeat_at, stall_u, forget_u, wrong_answer)
        self.st = _State()

    # ---- perception ---------------------------------------------------------------------------

    @staticmethod
    def _since_last_turn(messages: list[BaseMessage]) -> list[BaseMessage]:
        for j in range(len(messages) - 1, -1, -1):
            if isinstance(messages[j], AIMessage):
                return messages[j + 1:]
        return []

    def _heed(self) -> bool:
        u = self.draws.u_heed[self.st.heed_n % len(self.draws.u_heed)]
        self.st.heed_n += 1
        return u < self.rates["heed"]

    def _draw(self) -> float:
        u = self.draws.u_fix[self.st.fix_n % len(self.draws.u_fix)]
        self.st.fix_n += 1
        return u

    def _fix(self, informative: bool) -> bool:
        return self._draw() < self.rates["fix_informative" if informative else "fix_uninformative"]

    # ---- the turn -----------------------------------------------------------------------------

    def invoke(self, messages: list[BaseMessage], tools: list[dict[str, Any]] | None = None) -> AIMessage:
        if self.actions is None:
            raise RuntimeError("StandInModel needs bind_task(task, ground_truth) before invoke")
        schemas = {t["function"]["name"]: t["function"] for t in tools or [] if "function" in t}
        system = "\n".join(str(m.content) for m in messages if isinstance(m, SystemMessage))
        users = [str(m.content) for m in messages if isinstance(m, HumanMessage)]
        listed_text = system + "\n" + "\n".join(users)
        names = tuple(sorted(schemas))
        standing = _directives(system, names)
        new = self._since_last_turn(messages)
        urge = Directives()
        for m in new:
            if isinstance(m, HumanMessage) and any(isinstance(x, AIMessage) for x in messages):
                urge = urge.merged(_directives(str(m.content), names))
        self.visible, self.listed_absent = _listed(listed_text, names)
        self.d = standing
        st, d = self.st, standing
        results = {m.tool_call_id: str(m.content) for m in new if isinstance(m, ToolMessage)}
        user_turn = any(isinstance(m, HumanMessage) for m in new) and bool(st.call_n or st.forgot)

        if not st.call_n and not st.forgot and (d.tools_off or d.answer_now):
            return self._answer()
        if urge.answer_now and (st.forgot or self._heed()):
            return self._answer()
        if st.forgot and user_turn:
            return self._answer()

        p = st.pending
        if p is not None:
            res = results.get(p.id)
            outcome = "empty" if res is None or not res.strip() else "rejected" if is_rejection(res) else "ok"
            if outcome == "ok":
                st.seen.append(res or "")
            nxt = self._after(p, outcome, res or "", urge, schemas)
            if nxt is not None:
                return nxt
        return self._next(urge, schemas)

    def _after(self, p: _Pending, outcome: str, res: str, urge: Directives,
               schemas: dict[str, Any]) -> AIMessage | None:
        """React to the pending call's result; None = go on with the plan."""
        st, d = self.st, self.d
        urged = urge.urge_if_done or urge.answer_now
        if p.mode == "loop":
            if (outcome == "rejected" or urged) and self._heed():
                st.i += 1
                return None
            return self._emit(p.action, p.name, "loop")
        if p.mode == "stall":
            if (outcome == "rejected" or urged) and self._heed():
                return self._answer()
            return None
        if p.mode == "verify":
            return None
        if outcome == "ok":
            loop_rate = self.rates["repeat"] * (0.4 if d.no_repeat else 1.0)
            if self.draws.repeat_at == st.i and not st.looped and self.draws.repeat_u < loop_rate \
                    and not (urged and self._heed()):
                st.looped = True
                return self._emit(p.action, p.name, "loop")
            st.i += 1
            return None
        if outcome == "rejected" and p.malformed and not d.skip_checks:
            if p.tries + 1 >= MAX_MALFORMED_TRIES:
                st.i += 1
                return None
            # told to write another format, it sides with the error text only as often as with a bare one
            informative = p.malformed != "format" and self._informative(res, p.action, schemas)
            fixed = self._fix(informative)
            out = self._emit(p.action, p.name, "act", malformed=None if fixed else p.malformed)
            assert st.pending is not None
            st.pending.tries = p.tries + 1
            return out
        if outcome == "rejected" and p.name != p.action.name and p.action.name in res and self._fix(True):
            return self._emit(p.action, p.action.name, "act")  # the error named the tool it wanted
        if not d.skip_checks and not urged and st.i not in st.retried and self._draw() < self.rates["retry_rejected"]:
            st.retried.add(st.i)
            return self._emit(p.action, p.name, "act", malformed=p.malformed)
        st.i += 1
        return None

    def _next(self, urge: Directives, schemas: dict[str, Any]) -> AIMessage:
        st, d, acts = self.st, self.d, self.actions or []
        while st.i < len(acts):
            a = acts[st.i]
            name = self._tool_for(a.name)
            if name is None or name in d.forbidden or d.tools_off:
                st.i += 1  # it cannot see a tool for this action, or was told not to use it
                continue
            return self._emit(a, name, "act", malformed=self._malformed_kind(st.i))
        urged = urge.urge_if_done or urge.answer_now
        reads = [a for a in acts if READ_ONLY.match(a.name) and self._tool_for(a.name) == a.name
                 and a.name not in d.forbidden]
        if d.verify and not st.verified and reads and not urged:
            st.verified = True
            return self._emit(reads[-1], reads[-1].name, "verify")
        stall_rate = self.rates["stall"] * (0.5 if d.stop_when_done else 1.0)
        if reads and not urged and (self.draws.stall_u < stall_rate or d.answer_off) and not d.tools_off:
            call = reads[st.stall_n % len(reads)]
            st.stall_n += 1
            return self._emit(call, call.name, "stall")
        forget_rate = self.rates["forget"] * (0.4 if d.deliver else 1.0)
        if self.draws.forget_u < forget_rate and not st.forgot and not urged:
            st.forgot = True
            st.pending = None
            return AIMessage("")
        return self._answer()

    # ---- acting ----------------------------------------------------------------------------------

    def _tool_for(self, wanted: str) -> str | None:
        """The tool it calls for an action that needs ``wanted``: itself if visible, else the closest name
        the prompt lists (which may have no schema), else None."""
        if wanted in self.visible:
            return wanted
        close = difflib.get_close_matches(wanted, self.listed_absent, n=1, cutoff=0.6)
        return close[0] if close else None

    def _malformed_kind(self, i: int) -> str | None:
        d = self.d
        if d.format_bad:
            return "format"
        rate = self.rates["malformed_reminded" if d.format_good else "malformed"]
        if d.names_bad:
            return "name"
        if self.draws.u_malformed[i] >= rate:
            return None
        kind = self.draws.u_kind[i]
        if d.names_good and kind >= 0.5:
            return None
        return "name" if kind >= 0.5 else "json"

    @staticmethod
    def _informative(error: str, action: ToolCallSpec, schemas: dict[str, Any]) -> bool:
        low = error.lower()
        params = list(((schemas.get(action.name) or {}).get("parameters") or {}).get("properties") or {})
        return "json" in low or any(p.lower() in low for p in params) or action.name.lower() in low

    def _emit(self, action: ToolCallSpec, name: str, mode: str, malformed: str | None = None) -> AIMessage:
        st = self.st
        st.call_n += 1
        cid = f"call_{st.call_n}"
        st.pending = _Pending(cid, action, name, mode, malformed)
        args = dict(action.args)
        if malformed == "name" and args:
            k = sorted(args)[0]
            args[_wrong_name(k)] = args.pop(k)
        elif malformed in ("json", "format"):
            raw = (repr(args) if malformed == "json" else ", ".join(f"{k}={v}" for k, v in args.items())) or "{"
            return AIMessage("", invalid_tool_calls=[{"name": name, "args": raw, "id": cid,
                                                       "error": "not JSON", "type": "invalid_tool_call"}])
        return AIMessage("", tool_calls=[{"name": name, "args": args, "id": cid, "type": "tool_call"}])

    def _answer(self) -> AIMessage:
        st, d = self.st, self.d
        st.pending = None
        if d.fixed_answer:
            text = d.fixed_answer
        elif self.draws.wrong_answer:
            text = VAGUE_ANSWER
        elif not st.call_n and (d.tools_off or d.answer_now):
            text = NO_TOOLS_ANSWER
        else:
            seen = list(dict.fromkeys(st.seen))
            text = "Here is what I found:\n" + "\n".join(seen) if seen else NOTHING_FOUND
        if d.answer_words:
            text = " ".join(text.split()[: d.answer_words])
        return AIMessage(text)


def strong_model(seed: int = 0) -> StandInModel:
    """The stand-in with no capability limits: it still reads (and obeys) the harness."""
    return StandInModel(seed, rates=STRONG_RATES, name="standin:strong")
