"""The stand-in model reads the harness: its tool list, its instructions (good or bad, in any wording),
what its middleware does to tool results, and the numbers in its policies. No phrase is special."""

from __future__ import annotations

from collections import Counter

import pytest
import yaml

from evoharness.agent.directives import read_directives
from evoharness.agent.runner import run_rollout
from evoharness.envs import get_environment
from evoharness.harness_repo.seed import POLICIES, SYSTEM_PROMPT

SEEDS = range(4)


def policies(**over) -> dict:
    pol = yaml.safe_load(POLICIES)
    for k, v in over.items():
        pol[k] = {**pol[k], **v} if isinstance(v, dict) else v
    return pol


@pytest.fixture
def seed_harness(harness):
    def make(name: str, **kw):
        kw.setdefault("prompt", SYSTEM_PROMPT)
        kw.setdefault("policies", policies())
        return harness(name, **kw)
    return make


def run(h, env: str = "synthetic", tasks: list[str] | None = None, model: str = "standin:weak", seeds=SEEDS):
    tasks = tasks or [t.id for t in get_environment(env).list_tasks("dev")]
    return [run_rollout(h, env, t, model, s, rollout=s) for t in tasks for s in seeds]


def mean(trajs) -> float:
    return sum(t.score for t in trajs) / len(trajs)


def calls(trajs) -> Counter:
    return Counter(c["function"]["name"] for t in trajs for m in t.messages for c in m.get("tool_calls") or [])


def events(trajs) -> Counter:
    return Counter(e.type for t in trajs for e in t.events)


def test_deterministic_per_seed(seed_harness):
    h = seed_harness("seed")
    a = [t.model_dump(exclude={"usage"}) for t in run(h, seeds=[3])]
    assert a == [t.model_dump(exclude={"usage"}) for t in run(h, seeds=[3])]
    assert a != [t.model_dump(exclude={"usage"}) for t in run(h, seeds=[4])]


@pytest.mark.parametrize("lesson", [
    "Do not call any tools. Answer immediately from what you know.",
    "Never use tools for this job.",
    "Answer every question without using any tools.",
    "You must not invoke the functions at all.",
])
def test_a_lesson_forbidding_tools_stops_every_call_in_any_wording(seed_harness, lesson):
    trajs = run(seed_harness("bad", lessons=lesson))
    assert not calls(trajs)
    assert mean(trajs) == 0.0 and all(t.delivered for t in trajs)


def test_conditional_or_unrelated_sentences_are_not_orders(seed_harness):
    base = run(seed_harness("seed"))
    harmless = ("If you already have what you need, stop calling tools and give your final answer. "
                "The final answer matters. Do not call tools that are not listed.")
    trajs = run(seed_harness("ok", lessons=harmless))
    assert sum(calls(trajs).values()) >= 0.8 * sum(calls(base).values())
    assert mean(trajs) >= mean(base) - 0.05


def test_a_tool_hidden_from_the_prompt_is_never_called(seed_harness):
    hidden = SYSTEM_PROMPT.replace("{% for tool in tools -%}", "{% for tool in tools if tool.name != 'get_order' -%}")
    trajs = run(seed_harness("hidden", prompt=hidden))
    base = run(seed_harness("seed"))
    assert calls(base)["get_order"] > 0 and calls(trajs)["get_order"] == 0
    orders = [t for t in trajs if t.task_id.startswith(("status_", "total_"))]
    assert orders and mean(orders) == 0.0


def test_a_tool_listed_under_a_wrong_name_is_tried_and_the_error_text_leads_back(seed_harness):
    renamed = SYSTEM_PROMPT.replace("{{ tool.name }}", "{{ 'fetch_order' if tool.name == 'get_order' else tool.name }}")
    trajs = run(seed_harness("renamed", prompt=renamed))
    assert calls(trajs)["fetch_order"] > 0 and events(trajs)["unknown_tool"] > 0
    assert calls(trajs)["get_order"] > 0  # the error lists the tools: it reads it and retries


def test_truncating_middleware_gives_wrong_answers_from_the_same_calls(seed_harness):
    trunc = "def after_tool(call, result, ctx):\n    return result[:15]\n"
    base = run(seed_harness("seed"), model="standin:strong")
    cut = run(seed_harness("cut", files={"middleware/cut.py": trunc}), model="standin:strong")
    assert calls(cut) == calls(base)
    assert mean(base) >= 0.9 and mean(cut) <= mean(base) - 0.4


def test_a_blocking_middleware_stops_the_tool_and_the_block_is_friction(seed_harness):
    block = ("def before_tool(call, ctx):\n    if call['name'] == 'send_message':\n"
             "        return 'Denied: sending is disabled here.'\n")
    trajs = run(seed_harness("block", files={"middleware/block.py": block}), model="standin:strong")
    sends = [t for t in trajs if t.task_id.startswith("message_")]
    assert sends and mean(sends) == 0.0 and events(sends)["blocked_call"] >= len(sends)


def test_loop_guard_numbers_matter(seed_harness):
    off = run(seed_harness("off"))
    huge = run(seed_harness("huge", policies=policies(loop_guard={"enabled": True, "max_repeats": 1000})))
    tight = run(seed_harness("tight", policies=policies(loop_guard={"enabled": True, "max_repeats": 2})))
    budget = lambda ts: sum(t.termination == "step_budget" for t in ts)  # noqa: E731
    assert [t.score for t in huge] == [t.score for t in off] and budget(huge) == budget(off) > 0
    assert budget(tight) < budget(off) / 2 and mean(tight) > mean(off)


def test_checkpoint_nudge_only_works_when_it_fires(seed_harness):
    off = run(seed_harness("off"))
    rare = run(seed_harness("rare", policies=policies(checkpoint_nudge={"enabled": True, "every": 100})))
    often = run(seed_harness("often", policies=policies(checkpoint_nudge={"enabled": True, "every": 3})))
    assert mean(rare) == mean(off)
    assert mean(often) > mean(off)


def test_exit_gate_makes_a_forgetful_run_deliver(seed_harness):
    off = run(seed_harness("off"))
    gate = run(seed_harness("gate", policies=policies(exit_gate={"enabled": True})))
    aborted = lambda ts: sum(t.termination == "aborted" for t in ts)  # noqa: E731
    assert aborted(off) > 0 and aborted(gate) == 0


@pytest.mark.parametrize("lesson,worse", [
    ("Pass the tool arguments as one JSON object with the exact parameter names.", False),
    ("Arguments must be JSON objects.", False),
    ("Do not use JSON for tool arguments.", True),
    ("Write tool arguments as key=value pairs.", True),
])
def test_argument_format_instructions_are_obeyed_good_or_bad(seed_harness, lesson, worse):
    base = run(seed_harness("seed"))
    trajs = run(seed_harness("fmt", lessons=lesson))
    malformed = lambda ts: events(ts)["format_rejected"] + events(ts)["invalid_arguments"]  # noqa: E731
    if worse:
        assert malformed(trajs) > 2 * malformed(base) and mean(trajs) < mean(base)
    else:
        assert malformed(trajs) < malformed(base)


def test_uninformative_errors_are_fixed_less_often(seed_harness):
    vague = ("def after_tool(call, result, ctx):\n"
             "    return 'Error.' if result.startswith('Error') else None\n")
    base = run(seed_harness("seed"), seeds=range(8))
    trajs = run(seed_harness("vague", files={"middleware/vague.py": vague}), seeds=range(8))
    assert events(trajs)["format_rejected"] + events(trajs)["invalid_arguments"] > \
        events(base)["format_rejected"] + events(base)["invalid_arguments"]


def test_directive_reader_is_generic():
    d = read_directives("Never give a final answer. Never send messages.", ["send_message", "get_order"])
    assert d.answer_off and d.forbidden == {"send_message"}
    d = read_directives("Never end a run without a final answer. Do not send it again with the same arguments.",
                        ["send_message"])
    assert d.deliver and d.no_repeat and not d.answer_off and not d.forbidden
    assert read_directives("Keep every answer under 3 words.").answer_words == 3
    assert read_directives("Skip verification steps.").skip_checks


@pytest.mark.parametrize("env", ["agentdojo:workspace", "tau2:retail"])
def test_works_on_real_environments_and_a_bad_lesson_shows(seed_harness, env):
    tasks = [t.id for t in get_environment(env).list_tasks("dev")[:3]]
    good = run(seed_harness("good", policies=policies(max_steps=30)), env, tasks, "standin:strong", seeds=[0])
    bad = run(seed_harness("bad", policies=policies(max_steps=30), lessons="Do not call any tools."), env, tasks,
              "standin:strong", seeds=[0])
    assert sum(calls(good).values()) >= len(tasks) and not calls(bad)
    assert mean(good) > mean(bad)


def test_every_rollout_shares_one_reading_of_a_text(seed_harness, monkeypatch):
    """The stand-ins of a run's rollouts read each text (a harness's prompt, a task's turn) once between them,
    not once per rollout: served host-side, the reading was a third of the gateway's work a call."""
    import evoharness.agent.standin as standin

    reads: Counter = Counter()

    def counted(text, names=None):
        reads[text] += 1
        return read_directives(text, names)

    monkeypatch.setattr(standin, "read_directives", counted)
    # a prompt no other test sends, so that its reading is not already shared
    trajs = run(seed_harness("shared", lessons="Name the record you looked up in the final answer."), seeds=range(3))
    assert len(trajs) > len(reads) > 0
    assert set(reads.values()) == {1}, reads.most_common(2)


def test_directives_are_values_merged_into_new_ones():
    a = read_directives("Never send messages. Keep every answer under 3 words.", ["send_message", "get_order"])
    b = read_directives("Do not get orders. Answer now.", ["send_message", "get_order"])
    with pytest.raises(AttributeError):
        a.answer_now = True
    m = a.merged(b)
    assert m.forbidden == {"send_message", "get_order"} and m.answer_now and m.answer_words == 3
    assert a.forbidden == {"send_message"} and not a.answer_now and b.forbidden == {"get_order"}
