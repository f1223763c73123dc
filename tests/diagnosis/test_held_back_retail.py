"""Hand-written tau-bench retail runs (the retail domain's tools, policy and ids) in which the agent gets past a tool's
``Error: ...`` result another way than calling the same tool again, written as tau-bench's record list (``openai``)
and as AgentRx's one file per run (``agentrx-tau``) and read by the importers. Such friction is never the failure:
a reward-1 run is Healthy with no F2 signal, a failed one is labelled where it went wrong after. Controls: the same
errors with no way past them stay ``F2.tool_error``."""

from __future__ import annotations

import json

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import load_paths

POLICY = ("# Retail agent policy\nAs a retail agent, you can help users cancel or modify pending orders, return or "
          "exchange delivered orders, modify their default user address, or provide information about their own "
          "profile, orders, and related products.\n- At the beginning of the conversation, you have to authenticate "
          "the user identity by locating their user id via email, or via name + zip code.\n- Before taking "
          "consequential actions that update the database (cancel, modify, return, exchange), you have to list the "
          "action detail and obtain explicit user confirmation (yes) to proceed.\n")
ORDER = {"order_id": "#W2378156", "user_id": "yusuf_rossi_9620", "status": "delivered",
         "items": [{"name": "T-Shirt", "item_id": "9612497925", "options": {"color": "red", "size": "M"}}],
         "payment_history": [{"payment_method_id": "credit_card_9513926", "amount": 53.43}]}


class Run:
    def __init__(self, task: str) -> None:
        self.traj = [{"role": "system", "content": POLICY}, {"role": "user", "content": task}]
        self.users = [task]

    def call(self, name: str, result, **args) -> Run:
        cid = f"call_{len(self.traj)}"
        self.traj += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]},
            {"role": "tool", "tool_call_id": cid, "name": name,
             "content": result if isinstance(result, str) else json.dumps(result)}]
        return self

    def say(self, text: str) -> Run:
        self.traj.append({"role": "assistant", "content": text})
        return self

    def user(self, text: str) -> Run:
        self.traj.append({"role": "user", "content": text})
        self.users.append(text)
        return self

    def record(self, reward: float) -> dict:
        # the simulated user's instruction holds what the user says (no E.user_off_script)
        return {"task_id": 7, "trial": 0, "reward": reward, "traj": self.traj,
                "info": {"task": {"instruction": "You are Yusuf Rossi. " + " ".join(self.users)}}}


def _authenticated_another_way(give_up: bool = False) -> Run:
    """The name + zip look-up fails twice (the user's zip mistyped), the agent asks for the e-mail and finds the
    user by it, then makes the exchange (``give_up``: it hands the user to a human instead)."""
    r = Run("Hi, I want to exchange the red t-shirt from my last order for a blue one.")
    r.say("I can help with that. Could you please provide your email, or your name and zip code?")
    r.user("Sure, I'm Yusuf Rossi, zip 19122.")
    r.call("find_user_id_by_name_zip", "Error: user not found", first_name="Yusuf", last_name="Rossi", zip="19122")
    r.call("find_user_id_by_name_zip", "Error: user not found", first_name="yusuf", last_name="rossi", zip="19122")
    if give_up:
        r.call("transfer_to_human_agents", "Transfer successful", summary="User cannot be authenticated.")
        return r.say("YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.")
    r.say("I couldn't find you by name and zip code. Could you give me your email address instead?")
    r.user("Oh, it's yusuf.rossi7301@example.com")
    r.call("find_user_id_by_email", "yusuf_rossi_9620", email="yusuf.rossi7301@example.com")
    return _exchange(r)


def _exchange(r: Run) -> Run:
    r.call("get_order_details", ORDER, order_id="#W2378156")
    r.call("get_product_details", {"name": "T-Shirt", "variants": {"8349118980": {
        "options": {"color": "blue", "size": "M"}, "available": True, "price": 53.43}}}, product_id="9523456873")
    r.say("I can exchange your red T-Shirt (item 9612497925) for the blue one in size M (item 8349118980) at the same "
          "price, using credit_card_9513926. Shall I proceed?")
    r.user("Yes, please.")
    r.call("exchange_delivered_order_items", {**ORDER, "status": "exchange requested"}, order_id="#W2378156",
           item_ids=["9612497925"], new_item_ids=["8349118980"], payment_method_id="credit_card_9513926")
    r.say("Your exchange has been requested. You will receive an email with instructions for the return.")
    return r.user("Thanks! ###STOP###")


def _computed_without_the_calculator(give_up: bool = False) -> Run:
    """The calculator refuses the expression twice; the agent adds the prices itself and makes the return
    (``give_up``: it tells the user it cannot work the refund out)."""
    r = Run("I want to return both items of order #W2378156 and know my refund. Email yusuf.rossi7301@example.com")
    r.call("find_user_id_by_email", "yusuf_rossi_9620", email="yusuf.rossi7301@example.com")
    r.call("get_order_details", {**ORDER, "items": [{"name": "Lamp", "item_id": "1569765161", "price": 211.8},
                                                     {"name": "Mug", "item_id": "4458619711", "price": 23.12}]},
           order_id="#W2378156")
    r.call("calculate", "Error: invalid syntax", expression="211.8 + 23.12 $")
    r.call("calculate", "Error: invalid syntax", expression="211,8 + 23,12")
    if give_up:
        return r.say("I'm sorry, I am not able to work out your refund right now.").user("###STOP###")
    r.say("Returning the Lamp ($211.80) and the Mug ($23.12) refunds $234.92 to credit_card_9513926. Proceed?")
    r.user("Yes.")
    r.call("return_delivered_order_items", {**ORDER, "status": "return requested"}, order_id="#W2378156",
           item_ids=["1569765161", "4458619711"], payment_method_id="credit_card_9513926")
    r.say("The return is requested; $234.92 will be refunded to your card.")
    return r.user("Thanks ###STOP###")


def _labels(tmp_path, records, fmt):
    if fmt == "openai":
        path = tmp_path / "retail.json"
        path.write_text(json.dumps(records))
    else:
        path = tmp_path / "data" / "tau_dataset"
        path.mkdir(parents=True)
        for n, rec in enumerate(records):
            run = {**rec, "task_id": n, "traj": [{**m, "index": i + 1} for i, m in enumerate(rec["traj"])]}
            (path / f"{n}.json").write_text(json.dumps(run))
    trajs = list(load_paths([path]))
    assert {t.meta["source_format"] for t in trajs} == {fmt}
    assert all(e.type == "tool_error" for t in trajs for e in t.events) and all(len(t.events) == 2 for t in trajs)
    return [Labeller().label(t) for t in trajs]


RECOVERED = [_authenticated_another_way, _computed_without_the_calculator]


@pytest.mark.parametrize("fmt", ["openai", "agentrx-tau"])
@pytest.mark.parametrize("run", RECOVERED, ids=lambda f: f.__name__.strip("_"))
def test_an_error_got_past_another_way_is_no_friction_label(tmp_path, fmt, run):
    ok, failed = _labels(tmp_path, [run().record(1.0), run().record(0.0)], fmt)
    assert ok.failure_class == "healthy"
    assert [s.id for lab in (ok, failed) for s in lab.signals if s.id.startswith(("F2.", "F3."))] == []
    # the failed run is located at what it did after the errors: the change it proposed and the user confirmed
    assert failed.first_signal.id == "F4.first_write" and "confirmed by the user" in failed.first_signal.evidence
    assert failed.quote.startswith(("I can exchange your red T-Shirt", "Returning the Lamp"))


@pytest.mark.parametrize("fmt", ["openai", "agentrx-tau"])
@pytest.mark.parametrize("run", RECOVERED, ids=lambda f: f.__name__.strip("_"))
def test_the_same_errors_with_no_way_past_them_are_friction(tmp_path, fmt, run):
    """The control: the agent hands the user to a human, or gives up, after the two errors: ``F2.tool_error`` at the
    first of them."""
    [failed] = _labels(tmp_path, [run(give_up=True).record(0.0)], fmt)
    assert failed.first_signal.id == "F2.tool_error"
    assert failed.quote in ("Error: user not found", "Error: invalid syntax")
    assert failed.first_signal.step in (5, 7)  # the first error's result (after the look-ups before it)


def _changed_another_thing(same_tool: bool = False) -> Run:
    """The payment change is refused twice; the agent then changes the order's address (a sibling write: the same
    leading words, ``modify_pending_order_*``) and ends (``same_tool``: the payment change goes through at last)."""
    r = Run("Change the payment of my pending order #W2378156 to my gift card, and its address to 101 Main St.")
    r.call("find_user_id_by_email", "yusuf_rossi_9620", email="yusuf.rossi7301@example.com")
    r.call("get_user_details", {"user_id": "yusuf_rossi_9620", "payment_methods": {
        "gift_card_6136092": {"source": "gift_card", "balance": 12.0, "id": "gift_card_6136092"},
        "credit_card_9513926": {"source": "credit_card", "id": "credit_card_9513926"}}}, user_id="yusuf_rossi_9620")
    r.call("get_order_details", {**ORDER, "status": "pending"}, order_id="#W2378156")
    r.say("I'll pay order #W2378156 with gift_card_6136092 and ship it to 101 Main St. Proceed?")
    r.user("Yes.")
    r.call("modify_pending_order_payment", "Error: insufficient gift card balance", order_id="#W2378156",
           payment_method_id="gift_card_6136092")
    r.call("modify_pending_order_payment", "Error: insufficient gift card balance", order_id="#W2378156",
           payment_method_id="gift_card_6136092")
    if same_tool:
        r.call("modify_pending_order_payment", {**ORDER, "status": "pending"}, order_id="#W2378156",
               payment_method_id="credit_card_9513926")
    r.call("modify_pending_order_address", {**ORDER, "status": "pending"}, order_id="#W2378156",
           address1="101 Main St", address2="", city="Philadelphia", state="PA", country="USA", zip="19122")
    r.say("Your order's address is updated.")
    return r.user("Thanks ###STOP###")


@pytest.mark.parametrize("fmt", ["openai", "agentrx-tau"])
def test_a_failed_write_is_not_got_past_by_a_sibling_write(tmp_path, fmt):
    """A sibling tool is another way to what a failed look-up was for (``find_user_id_by_email`` after
    ``find_user_id_by_name_zip``); a sibling write is another change (``modify_pending_order_address`` after
    ``modify_pending_order_payment``, airline's ``update_reservation_baggages`` after ``..._flights``): the payment
    change never went through, so the refusals stay ``F2.tool_error``. The same write going through later recovers
    them (control)."""
    [failed] = _labels(tmp_path, [_changed_another_thing().record(0.0)], fmt)
    assert failed.first_signal.id == "F2.tool_error"
    assert failed.quote == "Error: insufficient gift card balance"
    (tmp_path / "control").mkdir()
    [got_past] = _labels(tmp_path / "control", [_changed_another_thing(same_tool=True).record(0.0)], fmt)
    assert [s.id for s in got_past.signals if s.id.startswith("F2.")] == []


def test_many_failed_look_ups_are_labelled_in_linear_time(tmp_path):
    """The friction rule asks at each friction step whether the agent got past it (``_recovered``), and which turn
    the step is in: each question read every call, or every turn (4,000 failed look-ups before the user was found:
    7.7 s a label; 16,000: minutes). The answer is the same: got past, so the run sits on its write."""
    import time

    r = Run("Cancel my order #W2378156.")
    for i in range(8_000):
        r.call("find_user_id_by_email", "Error: user not found", email=f"yusuf{i}@example.com")
    r.call("find_user_id_by_email", "yusuf_rossi_9620", email="yusuf.rossi7301@example.com")
    r.say("I'll cancel order #W2378156 (reason: no longer needed). Proceed?").user("Yes.")
    r.call("cancel_pending_order", {**ORDER, "status": "cancelled"}, order_id="#W2378156", reason="no longer needed")
    path = tmp_path / "retail.json"
    path.write_text(json.dumps([r.say("Cancelled.").record(0.0)]))
    [traj] = load_paths([path])
    start = time.process_time()
    lab = Labeller().label(traj)
    assert time.process_time() - start < 2
    assert lab.first_signal.id == "F4.first_write"
    assert [s.id for s in lab.signals if s.id.startswith("F2.")] == []
