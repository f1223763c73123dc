"""Multi-agent text logs: the failing step and agent, not the last message."""

from __future__ import annotations

import json

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.builder import TraceBuilder
from evoharness.traces.models import Trajectory


def _log(turns: list[tuple[str, str]], task: str = "How many athletes did the smallest team send?") -> Trajectory:
    msgs = [{"role": "user", "content": task}]
    msgs += [{"role": "assistant", "name": n, "content": c} for n, c in turns]
    return Trajectory(id="ma", task_id="ma", task=task, messages=msgs, final_answer=turns[-1][1],
                      meta={"failure_only": True})


def test_fabricated_data_is_the_failing_step_and_names_its_agent():
    turns = [
        ("Planner_Expert", "You are given: (1) a task and advises from your manager with a specific plan"),
        ("Data_Expert", "I will search the web for the 1928 results."),
        ("Computer_terminal", "exitcode: 1 (execution failed)\nCode output: ConnectionError"),
        ("Data_Expert", "The download failed, so let's simulate the dataset and proceed."),
        ("Computer_terminal", "exitcode: 0 (execution succeeded)\nCode output: CHN 1"),
        ("Verification_Expert", "FINAL ANSWER: CHN"),
    ]
    t = _log(turns)
    lab = Labeller().label(t)
    assert lab.first_signal.id == "F1.unsupported_fact"
    assert lab.first_signal.step == 4 and t.messages[4]["name"] == "Data_Expert"
    assert "simulat" in lab.first_signal.evidence
    # a tool agent is named for what it is (the name's last word): a computer-science expert still reasons
    expert = [(n.replace("Data_Expert", "WomenInComputerScienceHistory_Expert"), c) for n, c in turns]
    lab = Labeller().label(_log(expert))
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == (
        "F1.unsupported_fact", 4, "WomenInComputerScienceHistory_Expert")


def _placeholder_run(sentence: str) -> Trajectory:
    return _log([
        ("Planner_Expert", "You are given: (1) a task and advises from your manager with a specific plan"),
        ("Maps_Expert", sentence),
        ("Verification_Expert", "I checked the map by hand: the park is 0.3 miles away, the cafe 0.1 miles. "
                                "Let's assume the rest are just as close."),
        ("Maps_Expert", "FINAL ANSWER: three cafes"),
    ])


@pytest.mark.parametrize("sentence", [
    "We need to replace the placeholder `YOUR_API_KEY` with an actual key before the code can run.",
    "We need to replace the placeholder \u201cYOUR_API_KEY\u201d with an actual key before the code can run.",
    # the slot's name before the word, in other brackets, unquoted, or not named at all (6fc9262 read only a quoted
    # name right after "placeholder")
    "We need to replace the `YOUR_API_KEY` placeholder with an actual key before the code can run.",
    "Fill in the {api_key} placeholder in the script before the code can run.",
    "Please substitute the placeholder <YOUR_API_KEY> in line 3 before the code can run.",
    "We need to replace the placeholder for the API key before the code can run.",
    "The YOUR_API_KEY placeholder must be replaced before the code can run.",
])
def test_a_placeholder_named_as_a_slot_to_fill_is_unfinished_code_not_invented_data(sentence):
    """"Replace the placeholder `YOUR_API_KEY`" names a slot the code leaves to fill, however it is worded; the run
    fails where an agent then makes the data up."""
    lab = Labeller().label(_placeholder_run(sentence))
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F1.unsupported_fact", 3, "Verification_Expert")


@pytest.mark.parametrize("sentence", [
    "I'll use placeholder values for the distances.",
    "I'll use a placeholder 'N/A' for each distance.",  # a quoted value the agent puts in: still its own
    "Let me fill the missing distances with placeholder data.",  # the placeholder fills, it is not filled
    "I replaced the failed lookups with placeholder distances.",
])
def test_placeholder_values_an_agent_uses_are_still_invented_data(sentence):
    assert Labeller().label(_placeholder_run(sentence)).first_signal.step == 2


def test_orchestrator_ledger_without_progress_points_at_the_judged_action():
    ledger = {"is_progress_being_made": {"reason": "The search returned unrelated pages.", "answer": False},
              "is_in_loop": {"reason": "no", "answer": False}}
    t = _log([
        ("Orchestrator", "Initial plan:\n1. WebSurfer: find the page"),
        ("Orchestrator", "Please search for the 1928 Olympics athletes by country."),
        ("WebSurfer", "I typed '1928 olympics' into the search bar. Here is a screenshot of a cooking blog."),
        ("Orchestrator", "Updated Ledger:\n" + json.dumps(ledger, indent=2)),
        ("Orchestrator", "Please open Wikipedia instead."),
        ("WebSurfer", "I clicked 'Wikipedia'."),
        ("Orchestrator", "FINAL ANSWER: CUB"),
    ])
    lab = Labeller().label(t)
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.no_progress", 3)
    assert "unrelated pages" in lab.first_signal.evidence


def test_site_refusal_is_a_guardrail_and_quiet_logs_fall_back_to_the_first_commitment():
    blocked = _log([
        ("Orchestrator", "Please look up the census page."),
        ("WebSurfer", "I clicked 'census'. The page says: Access Denied. Please complete the CAPTCHA."),
        ("Orchestrator", "FINAL ANSWER: 12"),
    ])
    lab = Labeller().label(blocked)
    assert (lab.failure_class, lab.first_signal.step) == ("F2", 2)
    quiet = _log([
        ("Orchestrator", "Please look up the census page."),
        ("WebSurfer", "I clicked 'census'."),
        ("Orchestrator", "FINAL ANSWER: 12"),
    ])
    lab = Labeller().label(quiet)
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_commitment", 1)


def test_single_agent_tool_traces_are_not_read_as_multi_agent():
    t = (TraceBuilder("t").user("cancel order 42").call("get_order", {"id": 42}, result="order 42: pending")
         .deliver("Let's assume it is cancelled.").build(score=0.0))
    ids = {s.id for s in Labeller().label(t).signals}
    assert not ids & {"F1.unsupported_fact", "F4.no_progress", "F2.guardrail", "F4.first_commitment"}


def test_opening_handoff_with_code_is_the_first_commitment_unless_it_reports_a_failure():
    opening = ("You are given: (1) a task and advises from your manager with a specific plan and (2) a general task.\n"
               "## Results and reason from last response\n{}\n```python\nprint(count_even(rows))\n```")
    turns = [("Planner_Expert", opening.format("Code for counting the even addresses:")),
             ("Computer_terminal", "exitcode: 0 (execution succeeded)\nCode output: 4"),
             ("Verification_Expert", "Let's assume the count is 4. FINAL ANSWER: four")]
    lab = Labeller().label(_log(turns))
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F4.handoff_code", 1, "Planner_Expert")
    redone = [(turns[0][0], opening.format("The task was not completed: the file could not be read.")), *turns[1:]]
    lab = Labeller().label(_log(redone))
    assert lab.first_signal.id != "F4.handoff_code"  # a handoff that says it failed is redone, not relied on


def _ledger(satisfied: bool, progress: bool = True) -> str:
    return "Updated Ledger:\n" + json.dumps({
        "is_request_satisfied": {"reason": "r", "answer": satisfied},
        "is_in_loop": {"reason": "r", "answer": False},
        "is_progress_being_made": {"reason": "r", "answer": progress}}, indent=2)


def test_the_final_answers_value_is_located_where_it_first_appears():
    t = _log([
        ("Orchestrator", "Initial plan:\n1. WebSurfer: find the results page"),
        ("Orchestrator", "Please find the 1928 Olympics athletes by country."),
        ("WebSurfer", "I clicked 'Results'. The smallest team listed is Cuba with 1 athlete."),
        ("Orchestrator", _ledger(False)),
        ("Orchestrator", "Please confirm the smallest team."),
        ("WebSurfer", "I scrolled down. Cuba sent one athlete."),
        ("Orchestrator", _ledger(True)),
        ("Orchestrator", "FINAL ANSWER: Cuba\nSCENARIO.PY COMPLETE !#!#"),
    ])
    lab = Labeller().label(t)
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F4.answer_origin", 3, "WebSurfer")
    assert "'cuba'" in lab.first_signal.evidence



@pytest.mark.timeout(60)
def test_a_final_answer_padded_with_blanks_is_read_as_the_answer():
    """A final answer line followed by 300,000 blanks is read as its value. The harness-noise pattern began with
    ``\\s*``, tried at every blank when no noise follows: ~45 CPU-s at 100,000, minutes at 300,000 (past the
    timeout)."""
    t = _log([
        ("Orchestrator", "Initial plan:\n1. WebSurfer: find the results page"),
        ("Orchestrator", "Please find the 1928 Olympics athletes by country."),
        ("WebSurfer", "I clicked 'Results'. The smallest team listed is Cuba with 1 athlete."),
        ("Orchestrator", _ledger(True)),
        ("Orchestrator", "FINAL ANSWER: Cuba" + " \t" * 150_000),
    ])
    lab = Labeller().label(t)
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F4.answer_origin", 3, "WebSurfer")
    assert "'cuba'" in lab.first_signal.evidence

def test_without_an_origin_the_report_the_orchestrator_accepted_is_the_failing_step():
    turns = [
        ("Orchestrator", "Initial plan:\n1. WebSurfer: find the results page"),
        ("Orchestrator", "Please find the 1928 Olympics athletes by country."),
        ("WebSurfer", "I clicked 'Results'. Here is a screenshot of the results page."),
        ("Orchestrator", _ledger(False)),
        ("Orchestrator", "Please read the smallest team off the table."),
        ("WebSurfer", "I scrolled down. The table lists the teams."),
        ("Orchestrator", _ledger(True)),
        ("Orchestrator", "FINAL ANSWER: Cuba"),
    ]
    lab = Labeller().label(_log(turns))
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F4.accepted_report", 6, "WebSurfer")
    # a non-answer has no value to trace: the accepted report still locates the failure
    lab = Labeller().label(_log([*turns[:-1], ("Orchestrator", "FINAL ANSWER: Unable to determine")]))
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.accepted_report", 6)
    # never satisfied, no stall, no value: the first commitment, as before
    quiet = [t if "Updated Ledger" not in t[1] else (t[0], _ledger(False)) for t in turns[:-1]]
    lab = Labeller().label(_log([*quiet, ("Orchestrator", "FINAL ANSWER: Unable to determine")]))
    assert lab.first_signal.id == "F4.first_commitment"


def test_a_page_dump_under_an_agents_name_is_tool_output_and_code_that_failed_is_the_first_commitment():
    page = "Address: https://example.org/results\nTitle: 1928 results\nViewport position: page 1 of 2\n"
    t = _log([
        ("Planner_Expert", "You are given: (1) a task and advises from your manager with a specific plan"),
        ("WebServing_Expert", page + "Team sizes: 1203 entries, 4411 athletes, 2883 officials."),
        ("Data_Expert", "I will count the teams from the page.\n```python\nprint(min(teams))\n```"),
        ("Computer_terminal", "exitcode: 0 (execution succeeded)\nCode output: 3"),
        ("Data_Expert", "Now the smallest team.\n```python\nprint(smallest(teams))\n```"),
        ("Computer_terminal", "exitcode: 1 (execution failed)\nCode output: NameError: smallest"),
        ("Verification_Expert", "FINAL ANSWER: CUB"),
    ])
    lab = Labeller().label(t)
    # the page's numbers are what the page says, not an invented fact; the failure is the code that failed
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F4.first_commitment", 5, "Data_Expert")
    assert "failed first (step 6)" in lab.first_signal.evidence
    from evoharness.diagnosis.multiagent import responsible_agent
    # at a terminal's output the answerable agent is the one whose code it ran; a surfer answers for itself
    assert [responsible_agent(t.messages, i) for i in (4, 6, 2, 7)] == [
        "Data_Expert", "Data_Expert", "WebServing_Expert", "Verification_Expert"]
    surfer = _log([("Orchestrator", "Please open the results page."), ("WebSurfer", "I clicked 'Results'.")])
    assert responsible_agent(surfer.messages, 2) == "WebSurfer"
    no_failure = [(m["name"], m["content"]) for m in t.messages[1:5]] + [("Verification_Expert", "FINAL ANSWER: CUB")]
    lab = Labeller().label(_log(no_failure))
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_commitment", 3)  # the first code


def test_a_log_that_ends_on_a_terminals_output_has_no_final_answer_claim():
    turns = [("Planner_Expert", "You are given: (1) a task and advises from your manager with a specific plan"),
             ("Data_Expert", "I will read the team sizes from the census file.")]
    output = "exitcode: 0 (execution succeeded)\nCode output: X7731 Q9902"
    ends_on_terminal = _log([*turns, ("Computer_terminal", output)])
    assert "F1.unbacked_claim" not in {s.id for s in Labeller().label(ends_on_terminal).signals}
    ends_on_agent = _log([*turns, ("Data_Expert", "The smallest team is X7731 with Q9902 athletes.")])
    assert "F1.unbacked_claim" in {s.id for s in Labeller().label(ends_on_agent).signals}


def test_magentic_ones_failed_script_run_locates_the_code_that_failed_not_the_instruction_to_run_it():
    code = "```python\nimport pandas as pd\nprint(pd.read_csv('teams.csv').min())\n```"
    turns = [
        ("Orchestrator", "Please write a script that reads the team sizes."),
        ("Assistant", "Here is the script:\n" + code),
        ("Orchestrator", "Please run the script above."),
        ("ComputerTerminal", "The script ran, then exited with Unix exit code: 1\nIts output was:\nFileNotFoundError"),
        ("Orchestrator", "FINAL ANSWER: 12"),
    ]
    lab = Labeller().label(_log(turns))
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F4.first_commitment", 2, "Assistant")
    assert "failed first (step 4)" in lab.first_signal.evidence
    ran = [*turns[:3], ("ComputerTerminal", "The script ran, then exited with Unix exit code: 0\nIts output was:\n12"),
           turns[4]]
    assert "failed first" not in Labeller().label(_log(ran)).first_signal.evidence  # exit 0 is no failure


def test_a_failed_run_of_the_handoffs_own_code_is_located_at_the_handoff():
    # the handoff says the last attempt failed, so it is no F4.handoff_code; but the executor runs its code at once,
    # and that run fails before any agent wrote code: the code whose run failed first is the handoff's
    opening = ("You are given: (1) a task and advises from your manager with a specific plan and (2) a general task.\n"
               "## Results and reason from last response\nThe download could not be completed.\n"
               "```python\nprint(first_year_above(50))\n```")
    turns = [("FinancialData_Expert", opening),
             ("Computer_terminal", "exitcode: 1 (execution failed)\nCode output: NameError: first_year_above"),
             ("DataValidation_Expert", "Let me define it.\n```python\ndef first_year_above(x):\n    return 2007\n```"),
             ("Computer_terminal", "exitcode: 0 (execution succeeded)\nCode output: 2007"),
             ("Verification_Expert", "The first year above $50 is 2007, as the run printed.")]
    lab = Labeller().label(_log(turns))
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F4.first_commitment", 1, "FinancialData_Expert")
    assert "handoff's code, whose run failed first (step 2)" in lab.first_signal.evidence
    # a reasoning turn that wrote code before the failed run is still the code's author
    rewritten = [turns[0], ("DataValidation_Expert", "```python\nprint(first_year_above(50))\n```"),
                 ("Computer_terminal", "exitcode: 1 (execution failed)\nCode output: NameError"),
                 ("Verification_Expert", "The run failed, so the year is unknown.")]
    lab = Labeller().label(_log(rewritten))
    assert (lab.first_signal.step, lab.agent) == (2, "DataValidation_Expert")


def test_ag2s_unknown_language_reply_is_no_failed_run():
    # AG2's executor answers a fence whose language it does not know with exit code 1 and "unknown language X": it ran
    # nothing, so the code whose run failed first is the code of the later run that did fail
    turns = [("Planner_Expert", "You are given: (1) a task and advises from your manager with a specific plan"),
             ("Data_Expert", "The expected layout:\n```json\n{\"team\": \"CUB\"}\n```"),
             ("Computer_terminal", "exitcode: 1 (execution failed)\nCode output: \nunknown language json\n"),
             ("Data_Expert", "Counting the teams.\n```python\nprint(smallest(teams))\n```"),
             ("Computer_terminal", "exitcode: 1 (execution failed)\nCode output: NameError: smallest"),
             ("Verification_Expert", "The smallest team is unknown.")]
    lab = Labeller().label(_log(turns))
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_commitment", 4)
    assert "failed first (step 5)" in lab.first_signal.evidence
    # the blocks before the unknown one ran (and printed); the wording without the newline is AG2's too
    for output in ("Code output: \nNowak 2160\n\nunknown language unknown\n",
                   "Code output: unknown language plaintext"):
        ran = [*turns[:2], ("Computer_terminal", "exitcode: 1 (execution failed)\n" + output), *turns[3:]]
        assert "failed first (step 5)" in Labeller().label(_log(ran)).first_signal.evidence
    # a script's own error that quotes the words is a run that failed
    own = [*turns[:2], ("Computer_terminal", "exitcode: 1 (execution failed)\nCode output: Script started\n"
                                             "ValueError: unknown language unknown\n"), *turns[3:]]
    assert "failed first (step 3)" in Labeller().label(_log(own)).first_signal.evidence


def test_an_address_a_phone_number_or_coordinates_are_no_new_numbers():
    # where a place is splits into several numbers (house number and ZIP, a phone's groups, latitude and longitude):
    # one of them met the two-new-numbers bar of F1.unsupported_fact alone
    opening = ("Planner_Expert", "You are given: (1) a task and advises from your manager with a specific plan")
    places = ["The gym is at 458 W Dickens Ave, Chicago, IL 60614.",
              "Five Points Academy, 148 Lafayette St, New York, NY 10013, phone (212) 555-1234.",
              "The park lies at 40.7265, -73.9815 (40°43′35″N 73°58′53″W); call +44 20 7946 0958."]
    for place in places:
        lab = Labeller().label(_log([opening, ("Local_Expert", place), ("Verification_Expert", "Done.")],
                                    task="Which gym is nearest the park?"))
        assert "F1.unsupported_fact" not in {s.id for s in lab.signals}, place
    # new figures beside an address still are
    lab = Labeller().label(_log([opening, ("Local_Expert", places[0] + " It has 1,250 members and 340 machines."),
                                 ("Verification_Expert", "Done.")], task="Which gym is nearest the park?"))
    assert (lab.first_signal.id, lab.first_signal.step) == ("F1.unsupported_fact", 2)
    assert "1,250, 340" in lab.first_signal.evidence
    # years, counts and temperatures are no place: "in 20500 cases" is no ZIP, "2019 Supreme Court" no street
    lab = Labeller().label(_log([opening, ("Local_Expert", "In 2019 Supreme Court records list 20500 cases at 104°F."),
                                 ("Verification_Expert", "Done.")], task="Which gym is nearest the park?"))
    assert lab.first_signal.id == "F1.unsupported_fact" and "2019, 20500, 104" in lab.first_signal.evidence


def test_a_code_run_report_is_a_tools_output_whoever_posts_it():
    # AG2's two-agent chat: the user_proxy runs the assistant's code and posts the executor's report under its own
    # name; the report's numbers are what the code printed (no invented fact), and at a failed run the answerable
    # agent is the one whose code it ran, as at a terminal's output
    code = "```python\nprint(team_sizes('1928.csv'))\n```"
    turns = [("user_proxy", "How many athletes did the smallest team send to the 1928 Olympics?"),
             ("assistant", "I will read the team sizes.\n" + code),
             ("user_proxy", "exitcode: 0 (execution succeeded)\nCode output: CUB 1, PAN 1, 46 nations, 2883 athletes"),
             ("assistant", "Now the smallest team.\n```python\nprint(smallest(teams))\n```"),
             ("user_proxy", "exitcode: 1 (execution failed)\nCode output: NameError: smallest"),
             ("assistant", "The smallest team is CUB.")]
    t = _log(turns)
    lab = Labeller().label(t)
    assert "F1.unsupported_fact" not in {s.id for s in lab.signals}
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F4.first_commitment", 4, "assistant")
    from evoharness.diagnosis.multiagent import responsible_agent
    assert [responsible_agent(t.messages, i) for i in (3, 5, 1)] == ["assistant", "assistant", "user_proxy"]
    # Magentic-One's and AutoGen's executor wordings under another name are reports too
    for report in ("The script ran, then exited with Unix exit code: 0\nIts output was:\n4411 athletes, 2883 officials",
                   "The script ran but produced no output to console. The Unix exit code was: 1."):
        ran = _log([*turns[:2], ("executor_agent", report), turns[5]])
        assert responsible_agent(ran.messages, 3) == "assistant"
        assert "F1.unsupported_fact" not in {s.id for s in Labeller().label(ran).signals}
    # a reasoning turn that quotes the words later in its text is still reasoning
    quoted = _log([*turns[:2], ("assistant", "If it fails with exitcode: 1 we retry; 4411 athletes, 2883 officials.")])
    assert "F1.unsupported_fact" in {s.id for s in Labeller().label(quoted).signals}


def test_an_executors_no_code_reply_answers_to_the_message_it_answered():
    # AG2's terminal answers a message without code with "There is no code from the last 1 message ...": nothing ran, so
    # the step is not the author of some older code's; it is the agent whose message the terminal answered
    from evoharness.diagnosis.multiagent import responsible_agent
    no_code = ("There is no code from the last 1 message for me to execute. Group chat manager should let other "
               "participants to continue the conversation.")
    turns = [("Planner_Expert", "You are given: (1) a task and advises from your manager with a specific plan"),
             ("Data_Expert", "Counting the teams.\n```python\nprint(count(teams))\n```"),
             ("Computer_terminal", "exitcode: 0 (execution succeeded)\nCode output: 46"),
             ("Verification_Expert", "46 nations took part, as the run printed; the smallest sent one athlete."),
             ("Computer_terminal", no_code),
             ("Verification_Expert", "TERMINATE")]
    t = _log(turns)
    assert [responsible_agent(t.messages, i) for i in (3, 5)] == ["Data_Expert", "Verification_Expert"]
    # posted under a name that does not say executor (AG2's user_proxy), it is still no reasoning turn
    proxied = _log([turns[0], ("assistant", "The smallest team sent 1 athlete."), ("user_proxy", no_code)])
    assert responsible_agent(proxied.messages, 3) == "assistant"
    lab = Labeller().label(proxied)
    assert lab.first_signal.step != 3 and lab.agent == "assistant"


# One rule names an agent's role, whatever framework wrote the log: the name's head noun -- its last word once trailing
# "agent" and numbers are dropped -- says it (the table in docs/diagnosis.md, "Agent roles").
ROLE_TABLE = [
    ("Orchestrator", "orchestrator"), ("MagenticOneOrchestrator", "orchestrator"),
    ("orchestrator_agent", "orchestrator"), ("LedgerOrchestrator", "orchestrator"),
    ("Computer_terminal", "executor"), ("ComputerTerminal", "executor"),
    ("Executor", "executor"), ("executor_agent", "executor"), ("CodeExecutorAgent", "executor"),
    ("code_executor_2", "executor"), ("WebSurfer", "tool"), ("WebSurferAgent", "tool"), ("MultimodalWebSurfer", "tool"),
    ("file_surfer_agent", "tool"), ("browser", "tool"), ("Coder", "agent"), ("assistant_agent", "agent"),
    ("user_proxy", "agent"), ("WomenInComputerScienceHistory_Expert", "agent"), ("Orchestrator_Expert", "agent"),
    ("agent", "agent"), ("Agent_1", "agent"), ("", "agent"),
    # an interpreter runs code when it is the whole name or code's (7b79d40 made every one an executor: an expert who
    # interprets results, data or a language wrote no reasoning turn)
    ("Interpreter", "executor"), ("Code_Interpreter", "executor"), ("python_interpreter_agent", "executor"),
    ("Results_Interpreter", "agent"), ("Data_Interpreter", "agent"), ("LanguageInterpreter", "agent"),
]


def test_an_agents_role_is_its_names_head_noun_without_agent_or_a_number():
    from evoharness.diagnosis.multiagent import agent_role
    assert [(name, agent_role(name)) for name, _ in ROLE_TABLE] == ROLE_TABLE


def test_autogen_04_names_are_read_as_their_roles():
    # AutoGen 0.4's Magentic-One orchestrator is "MagenticOneOrchestrator"; other teams name agents "...Agent" /
    # "..._agent". Before, only the exact name "Orchestrator" was an orchestrator and those names no tool or executor
    ledger = {"is_progress_being_made": {"reason": "The search returned unrelated pages.", "answer": False},
              "is_in_loop": {"reason": "no", "answer": False}}
    t = _log([
        ("MagenticOneOrchestrator", "Please search for the 1928 Olympics athletes by country."),
        ("WebSurferAgent", "I typed '1928 olympics' into the search bar. Here is a screenshot of a cooking blog."),
        ("MagenticOneOrchestrator", "Updated Ledger:\n" + json.dumps(ledger, indent=2)),
        ("MagenticOneOrchestrator", "FINAL ANSWER: unable to determine"),
    ])
    lab = Labeller().label(t)
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F4.no_progress", 2, "WebSurferAgent")
    blocked = _log([("MagenticOneOrchestrator", "Please look up the census page."),
                    ("WebSurferAgent", "I clicked 'census'. The page says: Access Denied. Complete the CAPTCHA."),
                    ("MagenticOneOrchestrator", "FINAL ANSWER: 12")])
    lab = Labeller().label(blocked)
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F2.guardrail", 2, "WebSurferAgent")
    # AutoGen 0.4's CodeExecutorAgent prints a successful run's output bare: under "executor_agent" its numbers are
    # what the code printed (no invented fact), and the agent answerable there is the one whose code it ran
    code = _log([("coder_agent", "I will count the rows.\n```python\nprint(len(rows), len(set(rows)))\n```"),
                 ("executor_agent", "48213 1290"),
                 ("coder_agent", "FINAL ANSWER: 48213")])
    lab = Labeller().label(code)
    assert "F1.unsupported_fact" not in {s.id for s in lab.signals}
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F4.answer_origin", 2, "coder_agent")


def test_at_a_tool_result_the_agent_that_made_the_call_answers_for_it():
    from evoharness.diagnosis.multiagent import responsible_agent
    call = {"id": "c1", "type": "function", "function": {"name": "book_flight", "arguments": "{}"}}
    msgs = [{"role": "user", "content": "Book UA 1532."},
            {"role": "assistant", "name": "booking_agent", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "name": "book_flight", "content": "sold out"}]
    assert responsible_agent(msgs, 2) == "booking_agent"  # before: "book_flight", the tool's name
    # a single agent's trace names no agent: nothing changes there (the result's own name, or none)
    unnamed = [msgs[0], {**msgs[1], "name": None}, msgs[2]]
    assert responsible_agent(unnamed, 2) == "book_flight"
    assert responsible_agent([msgs[0], {**msgs[1], "name": None}, {**msgs[2], "name": None}], 2) is None
