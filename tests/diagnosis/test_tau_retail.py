"""The tau rules on tau-bench *retail* runs (tests/fixtures/traces/tau_retail/runs.json, written by its
make_sample.py with tau2's retail tools; no human labels): they were written on airline runs, and the held-back
set is retail. Read in both layouts the held-back runs may come in -- tau-bench's list of records and AgentRx's one
file per run with 1-based message ``index``es. Every reward-1 run is Healthy with no process signal at all, even
scored as a failure (its errors were all got past: a mistyped e-mail found by name and zip instead, an order id
without its '#', a payment id guessed from a card's last digits, a gift card short, a bad sum), and each failed run
is placed at the step its script fails at, never at its last reply for more than a quarter of them."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import load_paths

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "tau_retail" / "runs.json"
FORMATS = ("openai", "agentrx-tau")
PROCESS = ("F2", "F3")


def _records() -> list[dict]:
    return json.loads(RUNS.read_text())


def _load(tmp_path: Path, records: list[dict], fmt: str):
    tmp_path.mkdir(parents=True, exist_ok=True)
    if fmt == "openai":
        path = tmp_path / "retail.json"
        path.write_text(json.dumps(records))
        return list(load_paths([path]))
    folder = tmp_path / "data" / "tau_dataset"
    folder.mkdir(parents=True)
    for r in records:
        run = {**r, "traj": [{**m, "index": i + 1} for i, m in enumerate(r["traj"])]}
        (folder / f"{r['task_id']}.json").write_text(json.dumps(run))
    trajs = sorted(load_paths([folder]), key=lambda t: int(t.task_id))
    assert {t.meta["source_format"] for t in trajs} == {"agentrx-tau"}
    return trajs


def _labels(tmp_path, records, fmt):
    labeller = Labeller()
    return [labeller.label(t) for t in _load(tmp_path, records, fmt)]


@pytest.mark.parametrize("fmt", FORMATS)
def test_reward_1_retail_runs_are_healthy_with_no_process_signal(tmp_path, fmt):
    records = [r for r in _records() if r["reward"] == 1]
    labels = _labels(tmp_path, records, fmt)
    assert len(labels) == 4 and all(lab.failure_class == "healthy" for lab in labels)
    assert not [(lab.trajectory_id, s.id) for lab in labels for s in lab.signals if s.id.startswith(PROCESS)]


@pytest.mark.parametrize("fmt", FORMATS)
def test_recovered_retail_errors_are_no_process_label_even_scored_as_failures(tmp_path, fmt):
    """The reward-1 runs scored 0: what they did is the same, so nothing they got past may be the failure."""
    records = [{**copy.deepcopy(r), "reward": 0.0} for r in _records() if r["reward"] == 1]
    labels = _labels(tmp_path, records, fmt)
    assert not [(lab.trajectory_id, lab.first_signal.id) for lab in labels if lab.failure_class in PROCESS]
    assert not [(lab.trajectory_id, s.id) for lab in labels for s in lab.signals if s.id.startswith(PROCESS)]


@pytest.mark.parametrize("fmt", FORMATS)
def test_failed_retail_runs_are_placed_where_their_script_fails(tmp_path, fmt):
    records = [r for r in _records() if r["reward"] == 0]
    labels = _labels(tmp_path, records, fmt)
    got = {r["task_id"]: (lab.failure_class.value, lab.first_signal.step) for r, lab in zip(records, labels,
                                                                                             strict=True)}
    want = {r["task_id"]: ("F4", r["info"]["label"]["step"]) for r in records}
    assert got == want
    last = [r["task_id"] for r in records
            if r["info"]["label"]["step"] == max(i for i, m in enumerate(r["traj"]) if m["role"] == "assistant")]
    assert len(last) * 4 < len(records)  # the last reply is where under a quarter of them fail


def _conversation(tmp_path, *turns, reward=0.0):
    """A retail chat as a tau-bench record, read by the importer (``Error:`` results become tool errors):
    ("user"|"say", text) or ("call", name, args, result)."""
    traj = [{"role": "system", "content": "# Retail agent policy\nAuthenticate the user by email, or by name and "
                                          "zip code, and obtain explicit user confirmation (yes) before any change."}]
    for n, turn in enumerate(turns):
        if turn[0] == "call":
            _, name, args, result = turn
            traj += [{"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]},
                     {"role": "tool", "tool_call_id": f"c{n}", "name": name, "content": result}]
        else:
            traj.append({"role": "user" if turn[0] == "user" else "assistant", "content": turn[1]})
    [t] = _load(tmp_path, [{"task_id": 0, "reward": reward, "info": {}, "traj": traj, "trial": 0}], "openai")
    return t


NOT_FOUND = "Error: user not found"


def test_a_lookup_got_past_by_another_key_is_no_friction_but_one_never_got_past_is(tmp_path):
    """find_user_id_by_email failing twice, then find_user_id_by_name_zip going through: the user was found by
    another key (before: F2.tool_error, 'unrecovered'). The control: the name-and-zip look-up fails too."""
    def run(zip_result):
        return _conversation(
            tmp_path / zip_result[:5],
            ("user", "Hi, my email is raj.sanchez@example.com."),
            ("call", "find_user_id_by_email", {"email": "raj.sanchez@example.com"}, NOT_FOUND),
            ("call", "find_user_id_by_email", {"email": "rajsanchez@example.com"}, NOT_FOUND),
            ("call", "find_user_id_by_name_zip", {"first_name": "Raj", "last_name": "Sanchez", "zip": "92147"},
             zip_result),
            ("say", "I'm sorry, I could not help with that."), ("user", "Bye. ###STOP###"))
    got_past = Labeller().label(run("raj_sanchez_2970"))
    assert not [s.id for s in got_past.signals if s.id.startswith("F2.")]
    never = Labeller().label(run(NOT_FOUND))
    assert (never.first_signal.id, never.first_signal.step) == ("F2.tool_error", 3)


def test_reading_a_record_again_after_the_user_spoke_is_no_loop_but_reading_it_on_and_on_is(tmp_path):
    """The same look-up three times with a user message between each (a customer weighing options) is no loop
    (before: F3.repeated_action); three in a row with nothing between still is."""
    details = ("call", "get_product_details", {"product_id": "3821016478"}, '{"name": "Air Purifier"}')
    asked = _conversation(tmp_path / "asked", ("user", "Can I change the air purifier?"), details,
                          ("say", "Options: A, B."), ("user", "Which have night mode?"), details, ("say", "A has."),
                          ("user", "Is A in stock?"), details, ("say", "Yes."), ("user", "Thanks. ###STOP###"))
    assert not [s.id for s in Labeller().label(asked).signals if s.id.startswith("F3.")]
    looped = _conversation(tmp_path / "looped", ("user", "Can I change the air purifier?"), details, details, details,
                           ("say", "Options: A, B."), ("user", "Thanks. ###STOP###"))
    assert Labeller().label(looped).first_signal.id == "F3.repeated_action"


def test_a_shop_refusal_is_where_a_run_that_wrote_nothing_stalled(tmp_path):
    """'... cannot be exchanged' declines as '... cannot be modified' does (before: F4.poor_delivery at the end)."""
    lab = Labeller().label(_conversation(
        tmp_path, ("user", "Please exchange the camera in order #W4566809."),
        ("call", "get_order_details", {"order_id": "#W4566809"}, '{"order_id": "#W4566809", "status": "pending"}'),
        ("say", "Order #W4566809 is still pending, so its items cannot be exchanged."),
        ("user", "Nothing else you can do?"), ("say", "Sorry, exchanges happen after delivery. Anything else?"),
        ("user", "No. ###STOP###")))
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.stalled", 4)


PUBLIC = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "tau2_retail_leaderboard" / "results.json"


@pytest.mark.parametrize("reward", [1.0, 0.0])
def test_the_public_tau2_retail_run_has_no_process_signal(tmp_path, reward):
    """A public tau2-bench retail run (benchmarks/data/tau2_retail_leaderboard, reward 1): Healthy with no process
    signal; scored 0, still none, its exchange placed where the user confirmed it."""
    data = json.loads(PUBLIC.read_text())
    data["simulations"][0]["reward_info"]["reward"] = reward
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    [traj] = load_paths([path])
    lab = Labeller().label(traj)
    assert not [s.id for s in lab.signals if s.id.startswith(PROCESS)]
    if reward == 1.0:
        assert lab.failure_class == "healthy"
    else:  # where the exchange was proposed (the user confirmed it next; step 16: the domain policy is message 0)
        assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 16)
        assert traj.messages[16]["content"].startswith("Here's what I found")
        assert traj.messages[18]["tool_calls"][0]["function"]["name"] == "exchange_delivered_order_items"


def test_a_tau2_run_is_held_to_the_domain_policy_its_results_carry(tmp_path):
    """tau2's results.json carries the domain policy (info.environment_info.policy, the agent's system prompt); the
    importer dropped it, so the identity-check / confirmation rules never ran on a tau2 run: the public run cut to
    an exchange made at once, with no look-up of the user and no 'yes', was F1.unbacked_claim at the recap."""
    data = json.loads(PUBLIC.read_text())
    sim = data["simulations"][0]
    sim["messages"] = [sim["messages"][i] for i in (0, 1, 17, 18, 19, 20)]  # greeting, request, the exchange, recap
    sim["reward_info"]["reward"] = 0.0
    data["simulations"] = [sim]
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    [traj] = load_paths([path])
    assert traj.messages[0] == {"role": "system", "content": data["info"]["environment_info"]["policy"].strip()}
    lab = Labeller().label(traj)
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.policy_violation", 3)
    assert traj.messages[3]["tool_calls"][0]["function"]["name"] == "exchange_delivered_order_items"


def _forgot_email(tmp_path, reply):
    """The user lacks its e-mail (its instruction says so too), the agent answers, the user leaves."""
    path = tmp_path / "forgot.json"
    tmp_path.mkdir(parents=True, exist_ok=True)
    traj = [{"role": "system", "content": "# Retail agent policy\nAuthenticate the user by email, or by name and zip "
                                          "code."},
            {"role": "assistant", "content": "Hi! How can I help you today?"},
            {"role": "user", "content": "Hi, I'm Raj. I want to return a grill."},
            {"role": "assistant", "content": "Sure. Could you please provide your email address?"},
            {"role": "user", "content": "I don't remember my email, sorry."},  # step 4
            {"role": "assistant", "content": reply},  # step 5
            {"role": "user", "content": "Never mind, bye. ###STOP###"}]
    path.write_text(json.dumps([{"task_id": 1, "reward": 0.0, "trial": 0, "traj": traj, "info": {"task": {
        "instruction": "You are Raj Sanchez in 92147. You don't remember your email."}}}]))
    [t] = load_paths([path])
    return Labeller().label(t)


@pytest.mark.parametrize(("reply", "stalled"), [
    ("No problem! If you don't remember your email, please provide your first name, last name, and zip code "
     "instead.", False),
    ("I'm sorry, but I need your email address to proceed.", True),
    ("I understand, Raj. To proceed I must have your email address and your first name.", True),
])
def test_asking_for_another_key_to_find_the_user_is_no_stall(tmp_path, reply, stalled):
    """Retail authenticates by e-mail or by name and zip: offering the other key, naming the e-mail in passing, is a
    way on (before: F4.stalled at step 5); asking for the e-mail again, alone or beside what adds no key, is not."""
    lab = _forgot_email(tmp_path, reply)
    assert (lab.first_signal.id == "F4.stalled" and lab.first_signal.step == 5) is stalled, lab.first_signal


@pytest.mark.parametrize(("reply", "contradicts"), [
    ("Done: your order #W7736708 was delivered, and an exchange of the headphones is now requested.", False),
    ("Done: your order #W7736708 was cancelled, and an exchange of the headphones is now requested.", True),
])
def test_a_status_the_order_had_before_the_agents_own_write_is_history_not_a_misread(tmp_path, reply, contradicts):
    """After the exchange made the order 'exchange requested', "was delivered" states what an earlier result said
    (before: F1.unbacked_claim at the last reply, ahead of the run's first write); a status it never had still
    contradicts the tools."""
    order = '{"order_id": "#W7736708", "user_id": "raj_sanchez_2970", "status": "%s"}'
    lab = Labeller().label(_conversation(
        tmp_path, ("user", "Exchange my headphones from #W7736708, please."),
        ("call", "find_user_id_by_email", {"email": "raj.sanchez2046@example.com"}, "raj_sanchez_2970"),
        ("call", "get_order_details", {"order_id": "#W4566809"}, order.replace("#W7736708", "#W4566809")
         % "cancelled"),
        ("call", "get_order_details", {"order_id": "#W7736708"}, order % "delivered"),
        ("say", "Exchange the red headphones for the white ones on #W7736708, refund to your card? Confirm?"),
        ("user", "Yes."),
        ("call", "exchange_delivered_order_items", {"order_id": "#W7736708", "item_ids": ["3104857380"],
                                                    "new_item_ids": ["9805150490"],
                                                    "payment_method_id": "credit_card_3362387"},
         order % "exchange requested"),
        ("say", reply), ("user", "Thanks. ###STOP###")))
    assert (lab.first_signal.id == "F1.unbacked_claim") is contradicts, lab.first_signal
    if not contradicts:
        assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 8)


@pytest.mark.parametrize("found_by_name", [True, False])
def test_a_made_up_email_the_run_got_past_is_no_environment_fault(tmp_path, found_by_name):
    """The simulated user states an e-mail its instruction does not hold (raj.sanchez77@...), both look-ups of it
    fail, and the name-and-zip look-up finds the user: the slip did not shape the run, which fails later at the
    agent's refund proposal (before: E.user_off_script at the user's message, step 2). Where the name-and-zip
    look-up fails too and the agent gives up, the made-up e-mail is still the environment's fault."""
    [record] = [copy.deepcopy(r) for r in _records() if r["task_id"] == 203]
    record["info"]["task"]["instruction"] = ("You are Raj Sanchez, zip code 92147. Return the grill from order "
                                             "#W1067251, refund to your gift card.")
    for m in record["traj"]:
        for field in [m] + [c["function"] for c in m.get("tool_calls") or []]:
            key = "arguments" if "arguments" in field else "content"
            if isinstance(field.get(key), str):
                field[key] = field[key].replace("raj.sanchez@example.com", "raj.sanchez77@example.com")
    if not found_by_name:  # the name-and-zip look-up fails too, and the agent gives up
        cut = next(i for i, m in enumerate(record["traj"]) if m.get("name") == "find_user_id_by_name_zip")
        record["traj"][cut]["content"] = "Error: user not found"
        record["traj"][cut + 1:] = [{"role": "assistant", "content": "I'm sorry, I couldn't find your account."},
                                    {"role": "user", "content": "Okay, bye. ###STOP###"}]
    [lab] = _labels(tmp_path, [record], "openai")
    want = ("F4.first_write", 17) if found_by_name else ("E.user_off_script", 2)
    assert (lab.first_signal.id, lab.first_signal.step) == want


@pytest.mark.parametrize("last", ["All set, your address is updated.", "OK"])
def test_a_short_answer_the_write_holds_does_not_exempt_the_write_from_the_policy(tmp_path, last):
    """The address changed with no look-up of the user and no 'yes': a policy violation, whatever the agent said
    last. 'OK' (Oklahoma, the state the user gave) was taken for the delivery: the write's argument held the final
    answer's first 50 characters, so the write was the 'finish' call and no domain action."""
    t = _conversation(
        tmp_path, ("user", "Hi, I am Raj Sanchez. I moved to 12 Elm St, Tulsa, OK 74103. Can my address be changed?"),
        ("call", "modify_user_address", {"user_id": "raj_sanchez_2970", "address1": "12 Elm St", "address2": "",
                                         "city": "Tulsa", "state": "OK", "country": "USA", "zip": "74103"},
         '{"user_id": "raj_sanchez_2970"}'),
        ("say", last), ("user", "Thanks. ###STOP###"))
    assert t.final_answer == last
    lab = Labeller().label(t)
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.policy_violation", 2)
