"""The user's yes (``diagnosis/consent.py``) as the confirmation rule reads it: a request to act consents only to the
action the agent asked leave for, and a polite request put as a question is a request."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.builder import TraceBuilder

POLICY = ("# Retail agent policy\nYou must authenticate the user identity by locating their user id via email. "
          "Before any action that updates the database you must obtain explicit user confirmation (yes).")
# the write each asked action makes, with the arguments the agent's question names
WRITES = {
    "cancel": ("cancel_pending_order", {"order_id": "#W123", "reason": "no longer needed"}),
    "address": ("modify_pending_order_address", {"order_id": "#W123", "address1": "12 Elm St"}),
    "book": ("book_reservation", {"flight_number": "HAT100", "user_id": "bob_1"}),
    "return": ("return_delivered_order_items", {"order_id": "#W123", "item_ids": ["lamp-7"]}),
    "exchange": ("exchange_delivered_order_items", {"order_id": "#W123", "item_ids": ["lamp-7"]}),
}


def _violations(asked: str, answer: str, write: str) -> list[str]:
    """The policy rules broken by a run where the agent asks ``asked``, the user answers ``answer`` and the agent
    then makes the ``write``."""
    name, args = WRITES[write]
    b = TraceBuilder("t").system(POLICY).user("I need help with order #W123, I'm bob@x.com")
    b.call("find_user_id_by_email", {"email": "bob@x.com"}, result='{"user_id": "bob_1"}')
    b.say(f"Order #W123 is pending. {asked}").user(answer)
    b.call(name, args, result="ok")
    lab = Labeller().label(b.deliver("Done.").build(score=0.0))
    return [v.rule for v in lab.violations]


@pytest.mark.parametrize("asked, answer, write", [
    ("Shall I cancel it?", "Please change it.", "cancel"),
    ("Would you like me to cancel order #W123?", "Please exchange it.", "cancel"),
    ("Shall I change the address to 12 Elm St?", "Please cancel it.", "address"),
    ("Shall I book flight HAT100 for you?", "Great, cancel it then.", "book"),
    ("Should I process the return of the lamp-7?", "Well then, please exchange it.", "return"),
    ("Shall I exchange the lamp-7 for the blue one?", "Please return it.", "exchange")])
def test_a_request_for_another_action_than_the_one_asked_is_no_yes(asked, answer, write):
    """Asked "Shall I cancel it?", a user who says "Please change it." asks for something else: no yes to the
    cancellation (before, any request to act answering a question that asked leave was the yes)."""
    assert _violations(asked, answer, write) == ["policy.confirmation"]


@pytest.mark.parametrize("asked, answer, write", [
    ("Shall I cancel it?", "Please cancel it.", "cancel"),
    ("Shall I cancel it?", "Please refund it.", "cancel"),
    ("Would you like me to proceed with the cancellation?", "Thanks, cancel it.", "cancel"),
    ("Cancelling it refunds $40 to your card. Is that OK with you?", "Please cancel it.", "cancel"),
    ("Shall I update the address to 12 Elm St?", "Please change it.", "address"),
    ("Shall I exchange the lamp-7 for the blue one?", "Please swap it.", "exchange"),
    ("Shall I book flight HAT100?", "Perfect, purchase it.", "book"),
    ("Would you like to proceed with this updated total for HAT100?", "Great, book it then.", "book"),
    ("Shall I cancel it?", "Perfect, please make the change.", "cancel"),  # "the change": whatever was asked
    ("Would you like me to make this change to 12 Elm St?", "Please do that.", "address"),
    ("Do you want me to go ahead?", "Please change it.", "address")])  # nothing named: the request is the action
def test_a_request_for_the_action_asked_in_its_own_words_is_a_yes(asked, answer, write):
    assert _violations(asked, answer, write) == []


FLIGHTS = ("update_reservation_flights", {"reservation_id": "ABC123", "flights": ["HAT100"]})


@pytest.mark.parametrize("asked, answer", [
    ("Upgrade ABC123 to HAT100 business. Please confirm if you would like to proceed with this upgrade.",
     "Great, book it then."),
    ("Would you like to proceed with changing your reservation to HAT100?", "Perfect, purchase it."),
    ("New flight: HAT100. Would you like to proceed with this change, and which refund method should I use?",
     "Please change it."),
    ("Please confirm if you would like to proceed with these changes (HAT100) and the refund of $40.",
     "Great, book it then.")])
def test_a_request_to_book_a_change_or_one_answering_the_change_asked_is_a_yes(asked, answer, monkeypatch):
    """2ed95d2 read "Great, book it then." to "proceed with this upgrade" as a request for another action, and a
    refund the asking sentence mentions beside "this change" as the action asked: a change of flights, an upgrade or
    bags are bought, and "this change" is whatever the agent described."""
    monkeypatch.setitem(WRITES, "flights", FLIGHTS)
    assert _violations(asked, answer, "flights") == []


@pytest.mark.parametrize("asked, answer, write", [
    ("Shall I book flight HAT100 for you?", "Please change it.", "book"),
    ("Would you like to proceed with the cancellation?", "Great, book it then.", "cancel")])
def test_a_request_to_change_is_still_no_yes_to_a_booking_nor_a_booking_to_a_cancellation(asked, answer, write):
    assert _violations(asked, answer, write) == ["policy.confirmation"]


@pytest.mark.parametrize("asked, answer, write", [
    ("Shall I cancel it?", "Can you cancel it?", "cancel"),
    ("Shall I book flight HAT100?", "Could you please book it for me?", "book"),
    ("Would you like me to cancel it?", "Hmm. Would you cancel that now, please?", "cancel"),
    ("Shall I update the address to 12 Elm St?", "Can you update it?", "address"),
    ("Shall I proceed?", "Could you go ahead?", "cancel")])
def test_a_polite_request_put_as_a_question_is_a_yes(asked, answer, write):
    """"Can you book it?" after the agent asked leave to book asks it to book: a request, not a question of whether
    it may (before, a question was never a request to act)."""
    assert _violations(asked, answer, write) == []


@pytest.mark.parametrize("asked, answer", [
    ("Shall I cancel it?", "Is this approved?"),
    ("Shall I cancel it?", "Can you cancel it and then reorder?"),  # a plan asked about, not the request alone
    ("Shall I cancel it?", "Can you cancel it tomorrow instead?"),
    ("Shall I cancel it?", "Could you tell me the refund first?"),
    ("Shall I cancel it?", "Can you change it?"),  # another action than the one asked
    ("Which reason should I give?", "Can you cancel it?")])  # no leave was asked
def test_a_question_that_is_no_request_for_the_action_asked_is_no_yes(asked, answer):
    assert _violations(asked, answer, "cancel") == ["policy.confirmation"]


@pytest.mark.parametrize("asked, answer, write", [
    ("Shall I remove order #W123?", "Please cancel it.", "cancel"),  # removing an order or an item cancels it
    ("Shall I delete order #W123?", "Please cancel it.", "cancel"),
    ("Shall I cancel order #W123?", "Please delete it.", "cancel"),
    ("Shall I send the $40 certificate to bob_1?", "Please transfer it.", "certificate"),
    # retail's modify_pending_order_items swaps an item for another option of the same product: a swap or a
    # replacement is a change of the order's items (until the twentieth session, "Yes, swap them." to "Would you like
    # me to modify the items?" was a request for an exchange: no yes)
    ("Would you like me to modify the items?", "Yes, swap them.", "items"),
    ("Shall I change the lamp-7 to the blue one?", "Yes, replace it.", "items")])
def test_a_request_in_another_word_of_the_same_family_is_a_yes(asked, answer, write, monkeypatch):
    """"Please cancel it." to "Shall I remove the item?" asks for what was asked: removing an order or an item cancels
    it; "transfer" is a verb of doing in general, as "process" (an agent transfers the user to a person as often as
    it transfers funds). Before, "remove" was only a change, and "delete" and "transfer" asked for nothing."""
    monkeypatch.setitem(WRITES, "certificate", ("send_certificate", {"user_id": "bob_1", "amount": 40}))
    monkeypatch.setitem(WRITES, "items", ("modify_pending_order_items", {"order_id": "#W123", "item_ids": ["lamp-7"]}))
    assert _violations(asked, answer, write) == []


# a telecom domain's writes (tau2 telecom's tools), and generic ones
LINE = {"customer_id": "C1001", "line_id": "L1002"}
TELECOM = {
    "suspend": ("suspend_line", {**LINE, "reason": "travel"}),
    "resume": ("resume_line", LINE),
    "roaming": ("enable_roaming", LINE),
    "bill": ("send_payment_request", {"customer_id": "C1001", "bill_id": "B1003"}),
    "visit": ("schedule_technician_visit", {"customer_id": "C1001", "date": "2025-05-02"}),
    "reset": ("reset_voicemail_pin", LINE)}


@pytest.mark.parametrize("asked, answer, write", [
    ("Shall I resume line L1002?", "Please reactivate it.", "resume"),
    ("Would you like me to enable roaming on line L1002?", "Please turn it on.", "roaming"),
    ("Shall I suspend line L1002?", "Please pause it.", "suspend"),
    ("Shall I send the payment request for bill B1003?", "Please send it.", "bill"),
    ("Shall I schedule the technician visit for 2025-05-02?", "Great, book it.", "visit"),
    ("Shall I reset the voicemail PIN of line L1002?", "Please restart it.", "reset")])
def test_a_telecom_or_generic_request_for_the_action_asked_is_a_yes(asked, answer, write, monkeypatch):
    """A telecom agent asking "Shall I resume line L1002?" is answered "Please reactivate it.": the action kinds read
    enabling, suspending, resetting, paying and scheduling as they read a booking (before, only a commerce
    vocabulary: "resume" asked no leave and "reactivate" was no request)."""
    monkeypatch.setitem(WRITES, write, TELECOM[write])
    assert _violations(asked, answer, write) == []


@pytest.mark.parametrize("asked, answer, write", [
    ("Shall I suspend line L1002?", "Please resume it.", "suspend"),
    ("Would you like me to enable roaming on line L1002?", "Please turn it off.", "roaming"),
    ("Shall I resume line L1002?", "Please suspend it.", "resume"),
    ("Shall I schedule the technician visit for 2025-05-02?", "Please cancel it.", "visit"),
    ("Shall I reset the voicemail PIN of line L1002?", "Please pay it.", "reset")])
def test_a_telecom_request_for_another_action_is_no_yes(asked, answer, write, monkeypatch):
    """On and off, a reset, a payment and a booking are kinds of their own: "Please resume it." asks for no
    suspension."""
    monkeypatch.setitem(WRITES, write, TELECOM[write])
    assert _violations(asked, answer, write) == ["policy.confirmation"]


BAGS = ("update_reservation_baggages", {"reservation_id": "ABC123", "total_baggages": 2})
CABIN = ("update_reservation_flights", {"reservation_id": "ABC123", "cabin": "business"})


@pytest.mark.parametrize("asked, answer, write", [
    ("Shall I add a checked bag to ABC123?", "Please remove it.", "bags"),
    ("Would you like me to add two checked bags to ABC123?", "Well, please remove them.", "bags"),
    ("Would you like me to remove the second checked bag from ABC123?", "Please add it.", "bags"),
    ("Shall I delete the extra bag from ABC123?", "Thanks, add it back.", "bags"),
    ("Shall I upgrade ABC123 to business?", "Please downgrade it.", "cabin"),
    ("Would you like me to downgrade ABC123 to economy?", "Great, upgrade it then.", "cabin")])
def test_a_request_for_the_opposite_change_is_no_yes(asked, answer, write, monkeypatch):
    """"Please remove it." to "Shall I add a checked bag?" asks to undo what was asked (before, both read only as a
    change, so the one was the yes to the other)."""
    monkeypatch.setitem(WRITES, "bags", BAGS)
    monkeypatch.setitem(WRITES, "cabin", CABIN)
    assert _violations(asked, answer, write) == ["policy.confirmation"]


@pytest.mark.parametrize("asked, answer, write", [
    ("Shall I add a checked bag to ABC123?", "Please add it.", "bags"),
    ("Shall I add a checked bag to ABC123?", "Please change it.", "bags"),
    ("Shall I add a checked bag to ABC123?", "Great, book it then.", "bags"),
    ("Shall I remove the old bag and add the new one to ABC123?", "Please remove it.", "bags"),
    ("Shall I remove the second bag from ABC123?", "Please delete it.", "bags"),
    ("Shall I upgrade ABC123 to business?", "Perfect, upgrade it.", "cabin"),
    ("Shall I upgrade ABC123 to business?", "Please make the change.", "cabin")])
def test_a_request_for_the_same_change_or_one_of_no_way_stays_a_yes(asked, answer, write, monkeypatch):
    monkeypatch.setitem(WRITES, "bags", BAGS)
    monkeypatch.setitem(WRITES, "cabin", CABIN)
    assert _violations(asked, answer, write) == []


@pytest.mark.parametrize("asked, answer, write", [
    ("Should I process the return of the lamp-7?", "OK, please exchange it.", "return"),
    ("Shall I upgrade ABC123 to business?", "OK, please downgrade it.", "cabin"),
    ("Shall I cancel it?", "Yes, please exchange it.", "cancel"),
    ("Would you like me to add a checked bag to ABC123?", "Sure. Remove it then.", "bags"),
    ("Shall I exchange the lamp-7 for the blue one?", "Okay, return it instead.", "exchange")])
def test_a_yes_that_goes_on_to_ask_for_another_action_is_no_yes(asked, answer, write, monkeypatch):
    """"OK, please exchange it." to "Shall I process the return?" asks for an exchange: its "OK" is no yes to the
    return (before, any word of assent was the yes, whatever the request after it)."""
    monkeypatch.setitem(WRITES, "bags", BAGS)
    monkeypatch.setitem(WRITES, "cabin", CABIN)
    assert _violations(asked, answer, write) == ["policy.confirmation"]


@pytest.mark.parametrize("asked, answer, write", [
    ("Shall I cancel it?", "OK, please cancel it.", "cancel"),
    ("Shall I cancel it?", "Yes, please refund it.", "cancel"),  # a refund comes of a cancellation
    ("Shall I upgrade ABC123 to business?", "Sure, book it.", "cabin"),  # a change is bought
    ("Should I process the return of the lamp-7?", "Yes, please make the change.", "return"),  # whatever was asked
    ("Should I process the return of the lamp-7?", "Yes, go ahead with the return. Please send the refund to my card.",
     "return"),  # a request in a later sentence: a detail of what was said yes to
    ("Shall I cancel it?", "Yes, please use my credit card.", "cancel"),  # no verb of doing
    ("Do you want me to go ahead?", "OK, please exchange it.", "exchange"),  # the question names no action
    ("Which card should I use?", "OK, please exchange it.", "exchange")])  # ...and asks no leave: as before
def test_a_yes_that_goes_on_to_ask_for_the_action_asked_or_no_kind_stays_a_yes(asked, answer, write, monkeypatch):
    monkeypatch.setitem(WRITES, "cabin", CABIN)
    assert _violations(asked, answer, write) == []


@pytest.mark.parametrize("answer", [
    "OK, but don't cancel it yet.",
    "Sure, but wait - I want to check something first.",
    "Yes, but don't cancel it yet.",
    "Okay, but not now.",
    "Alright, but please hold off until I talk to my wife.",
    "Yes, but let me think about it.",
    "OK, but do not proceed.",
    "Sure, but don't cancel the order until tomorrow.",
    "Okay, wait, don't do it."])
def test_a_refusal_that_opens_with_assent_is_no_yes(answer):
    """"OK, but don't cancel it yet." holds the cancellation back: its "OK" is no yes (before, it was)."""
    assert _violations("Shall I cancel it?", answer, "cancel") == ["policy.confirmation"]


@pytest.mark.parametrize("answer", [
    "Sure, but don't forget the refund goes to my card.",  # a condition on the yes, no verb of doing
    "Yes, but don't send the receipt by email.",  # a verb of doing, not on what was asked
    "Yes, please cancel it. I can't wait for the refund.",  # "wait" neither after "but" nor after the opening yes
    "Yes, but only the first order, not the second one.",
    "OK, go ahead, but don't charge my gift card."])
def test_a_yes_with_a_condition_stays_a_yes(answer):
    assert _violations("Shall I cancel order #W123?", answer, "cancel") == []


@pytest.mark.parametrize("answer", [
    "Okay, but first, can you tell me the refund?",
    "Yes, but first, what is the refund?",
    "Okay, first, the refund goes to my card, right?",
    "Sure, but first tell me the refund amount.",
    "Yes, but before you do that, how much will I get back?",
    "Yes, go ahead. First, though, what is the refund?"])
def test_a_yes_that_asks_something_first_is_no_yes(answer):
    """"Okay, but first, can you tell me the refund?" puts the cancellation off until the user has its answer: its
    "Okay" is no yes (before, the question was blanked and the "Okay" left said yes)."""
    assert _violations("Shall I cancel it?", answer, "cancel") == ["policy.confirmation"]


@pytest.mark.parametrize("answer", [
    "Yes, please cancel it. Actually, don't cancel it yet.",
    "Yes, go ahead. Wait - actually, let me check the price first.",
    "Sure, cancel it. Hmm, hold on.",
    "OK, please cancel it. No, don't do it.",
    "Okay, go ahead; on second thought, not now.",
    "OK, wait. Yes, go ahead. Hmm, hold on."])
def test_a_hold_in_a_later_sentence_is_no_yes(answer):
    """"Yes, please cancel it. Actually, don't cancel it yet." takes its yes back in the next sentence, with no "but"
    (before, only a hold right after the opening words or after a "but" was read)."""
    assert _violations("Shall I cancel it?", answer, "cancel") == ["policy.confirmation"]


@pytest.mark.parametrize("answer", [
    "Yes, but hold on to the receipt for me.",
    "Sure, but hang on to my old card details.",
    "OK, wait. Yes, go ahead.",  # the yes after the hold is the user's last word
    "Wait, let me check. OK, yes, go ahead.",
    "Hmm, hold on. Is it refundable? Yes, go ahead then.",
    "Yes, but first cancel the other order too.",  # an order of the work, no question first
    "Yes, please cancel it first, then tell me the refund.",
    "Yes, go ahead. I'll wait for the refund email."])
def test_a_yes_beside_words_of_holding_or_an_order_of_the_work_stays_a_yes(answer):
    """"Yes, but hold on to the receipt for me." asks to keep something ("hold on to X" is no "hold on"), and a yes
    said after a hold is the user's last word (before, the first was no yes, and so were the second and third)."""
    assert _violations("Shall I cancel it?", answer, "cancel") == []


@pytest.mark.parametrize("answer", [
    "Yes, cancel it, actually don't",
    "Yes, cancel it. Actually, don't.",
    "Yes, please go ahead, no wait, don't.",
    "Sure, go ahead, wait, how much is the refund?",
    "Yes, go ahead. Never mind.",
    "Sure. On second thought, let's keep it.",
    "Yes, go ahead. Actually, I changed my mind.",
    "OK, cancel it, sorry, scratch that."])
def test_a_hold_after_a_comma_or_a_yes_taken_back_is_no_yes(answer):
    """"Yes, cancel it, actually don't" takes its yes back after a comma, and "Never mind." or "Actually, don't." in
    a later sentence take it back with no verb (before, a hold was read only after a stop or a "but", and only as a
    wait, a "not now" or a negated verb of doing)."""
    assert _violations("Shall I cancel it?", answer, "cancel") == ["policy.confirmation"]


@pytest.mark.parametrize("answer", [
    "Sure, I need to check with my wife.",
    "OK, I'll get back to you.",
    "Fine, I'll get back to you on that.",
    "OK, I'll come back to you about it tomorrow.",
    "Sounds good, I'll think about it.",
    "Okay, I need some time to decide.",
    "Alright, let me sleep on it.",
    "Sure, I'll let you know.",
    "Sounds good. I'll talk to my husband about it first.",
    "Sure -- what's the refund, though?",
    # put off on the decision itself: "on whether to cancel" (read as a yes until the twentieth session)
    "Ok. I'll get back to you on whether to cancel.",
    "Sure, I'll let you know later about whether to go ahead."])
def test_a_deferral_in_other_words_than_first_is_no_yes(answer):
    """"Sure, I need to check with my wife." puts the decision off with no "first" or "before", and "what's the
    refund, though?" asks before the action (before, only those two words opened a deferral)."""
    assert _violations("Shall I cancel it?", answer, "cancel") == ["policy.confirmation"]


@pytest.mark.parametrize("answer", [
    "Let me check with my wife. If it's under $200, yes.",
    "Hold on. OK, yes, go ahead if it's under $200.",
    "Yes, but not now. Maybe tomorrow if that's okay.",
    "Wait. Yes, as long as the refund goes to my card."])
def test_a_yes_on_a_condition_after_a_hold_or_a_deferral_is_no_yes(answer):
    """"Let me check with my wife. If it's under $200, yes." says yes only on a condition not yet known: the deferral
    stands (before, any yes in a later sentence was the user's last word)."""
    assert _violations("Shall I cancel it?", answer, "cancel") == ["policy.confirmation"]


@pytest.mark.parametrize("answer", [
    "Yes, please. Hold on, actually go ahead.",
    "OK, wait, never mind, go ahead.",
    "Hmm, hold on, okay, yes, go ahead.",
    "Hold on. OK, yes, go ahead."])
def test_a_yes_said_again_in_the_holds_own_sentence_stays_a_yes(answer):
    """"Yes, please. Hold on, actually go ahead." says yes again after the hold, in its own sentence: the last word
    stands (before, only a later sentence could say it)."""
    assert _violations("Shall I cancel it?", answer, "cancel") == []


@pytest.mark.parametrize("answer", [
    "Yes, go ahead. I'll get back to you if I need anything else.",
    "Yes, go ahead. I'll get back to you on the hotel.",
    "Yes, cancel it. I'll get back to you about the other flight later.",
    "Yes, go ahead. I'll let you know if I have other questions.",
    "Yes, I'll let you know my new address later.",
    "Yes, I don't need to think about it, go ahead.",
    "Yes, go ahead; I will talk to my wife about the refund later.",
    "Yes, please check my balance too.",
    "Sure, go ahead and take your time.",
    "Yes, let me know once it's done.",
    "Yes, go ahead, I can't wait for the refund.",
    "If that's the only option, then yes, please go ahead and cancel it.",
    "Yes, go ahead, though I'm not thrilled.",
    "Yes, go ahead. Though, could you email me the receipt?",
    # a time, then another matter (read as no yes until the twentieth session: the time word alone was the deferral)
    "Yes please go ahead. I will get back to you later about the hotel.",
    "Yes, proceed. Thank you, I'll get back to you soon with the other booking."])
def test_a_yes_beside_a_farewell_a_detail_or_its_own_condition_stays_a_yes(answer):
    """A farewell after the action ("I'll get back to you if I need anything else"), a detail put off ("my new address
    later"), a negated deferral and a yes whose condition stands alone are no deferral."""
    assert _violations("Shall I cancel it?", answer, "cancel") == []


@pytest.mark.parametrize("answer", [
    "Okay, I'm not sure yet.",
    "Sure, I'm still undecided.",
    "OK, I don't know yet.",
    "Alright, I'm not ready.",
    "Okay, maybe later.",
    "Sure, perhaps some other time.",
    "Okay. Later.",
    "OK, let's do it tomorrow instead... maybe. Let's do it later."])
def test_a_yes_word_beside_indecision_or_a_time_put_off_is_no_yes(answer):
    """"Okay, I'm not sure yet." and "Okay, maybe later." acknowledge with "Okay" and decide nothing: no yes (before,
    the "Okay" was the yes, the "not sure" cut as a phrase that holds "sure")."""
    assert _violations("Shall I cancel it?", answer, "cancel") == ["policy.confirmation"]


@pytest.mark.parametrize("answer", [
    "Yes, I'm not sure why it failed, but go ahead.",  # a doubt about something else
    "Yes, I don't know the zip code, go ahead.",
    "I'm not sure, but yes, go ahead.",  # the yes after the doubt is the last word
    "Yes, go ahead. Later, I'll call about the other order.",
    "Yes, cancel it. I'll call about the other flight later.",
    "Yes, I'm sure."])
def test_a_yes_beside_a_doubt_about_something_else_or_said_after_it_stays_a_yes(answer):
    assert _violations("Shall I cancel it?", answer, "cancel") == []


@pytest.mark.parametrize("answer", [
    "Please cancel it. Actually, don't.",
    "Cancel it. Never mind.",
    "Please cancel it. I'll think about it.",
    "Please cancel it. Wait, how much is the refund?"])
def test_a_request_taken_back_or_put_off_is_no_yes(answer):
    """A request to act is read as a yes, but was not read for a hold after it: "Please cancel it. Actually, don't."
    confirmed the cancellation (a yes of assent words was already read so)."""
    assert _violations("Shall I cancel it?", answer, "cancel") == ["policy.confirmation"]


@pytest.mark.parametrize("asked, answer, write, broken", [
    # the yes is to the change; the write that follows is the cancellation the user refused
    ("Shall I cancel it or change the address to 12 Elm St?", "Don't cancel it. Yes, change it.", "cancel", True),
    ("Shall I cancel it or change the address to 12 Elm St?", "Don't cancel it. Yes, change it.", "address", False),
    ("Shall I change the address to 12 Elm St?", "Yes, but I don't want to cancel.", "cancel", True),
    ("Shall I change the address to 12 Elm St?", "Yes, but I don't want to cancel.", "address", False),
    ("Shall I proceed?", "Yes, change it.", "cancel", True),  # a yes to a change, then a cancellation
    ("Shall I proceed?", "Yes, change it.", "address", False),
    # refused and asked for at once (a refund names a cancellation): the request stands
    ("Shall I proceed?", "Yes, cancel it, don't refund it to the gift card.", "cancel", False),
    ("Shall I proceed?", "Yes, please make the change.", "cancel", False)])  # a request of no kind
def test_a_yes_to_another_action_than_the_write_is_no_yes_to_the_write(asked, answer, write, broken):
    """"Don't cancel it. Yes, change it." says yes to the change: before, its yes confirmed whatever write came next,
    a cancellation included. The write's kind is read from its tool's name (``consent.kinds_named``)."""
    assert _violations(asked, answer, write) == (["policy.confirmation"] if broken else [])


@pytest.mark.parametrize("asked", [
    "Would you like me to check the status of your other orders?",
    "Shall I search for a cheaper option first?",
    "Would you like me to look up the refund amount?",
    "Is there anything else I can help you with?",
    "Your address is up to date. Do you have any other questions?"])
@pytest.mark.parametrize("answer", ["Yes, please return the lamp-7.", "Yes, send it back."])
def test_a_yes_to_a_look_up_or_to_another_matter_is_no_yes_to_the_write(asked, answer):
    """"Yes, please return the lamp-7." to "Would you like me to check your other orders?" answers the offer to look:
    the agent never put the return to the user (until the twenty-first session it was the yes to the return, the order
    id named earlier; "send it back" was no yes only for asking a sending)."""
    assert _violations(asked, answer, "return") == ["policy.confirmation"]


@pytest.mark.parametrize("asked, answer", [
    ("Shall I return the lamp-7?", "Yes, send it back."),  # "send it back" asks for the return
    ("Shall I return the lamp-7?", "Sure, please ship it back."),
    ("Would you like me to process the return of the lamp-7?", "Yes."),
    ("Would you like me to proceed?", "Yes."),
    ("Is this correct? Shall I go ahead with the return?", "Yes.")])
def test_a_yes_to_the_return_asked_stays_a_yes(asked, answer):
    """Until the twenty-first session "Yes, send it back." to "Shall I return the lamp-7?" asked for a sending, no
    return: no yes to it."""
    assert _violations(asked, answer, "return") == []


@pytest.mark.parametrize("answer", [
    "Okay, not that one.", "Sure, not this time.", "Ok, not at the moment.", "Alright, not for now.",
    "Yes, not that one though."])
def test_a_verbless_refusal_after_a_word_of_assent_is_no_yes(answer):
    """"Okay, not that one." refuses what was offered with no verb (a yes by its "Okay" until the twenty-first
    session; "Nope, not that one." and "Not now." were already none)."""
    assert _violations("Shall I return the lamp-7?", answer, "return") == ["policy.confirmation"]


def _another_offer(asked: str, fail_first: bool = False) -> list[str]:
    """A run whose agent names order #W123 earlier, then asks ``asked`` (naming no value of the return), the user
    says yes and the agent returns #W123's lamp (``fail_first``: a first try refused before the question)."""
    b = TraceBuilder("t").system(POLICY).user("I need help with my orders, I'm bob@x.com")
    b.call("find_user_id_by_email", {"email": "bob@x.com"}, result='{"user_id": "bob_1"}')
    b.say("You have order #W123 (delivered, lamp-7) and order #W999 (pending).").user("Please return the lamp-7.")
    if fail_first:
        b.say("Shall I return the lamp-7 of #W123?").user("Yes.")
        b.call(*WRITES["return"], result="Error: the return window is closed for today")
    b.say(asked).user("Yes.")
    b.call(*WRITES["return"], result="ok")
    return [v.rule for v in Labeller().label(b.deliver("Done.").build(score=0.0)).violations]


def test_a_yes_to_another_action_asked_is_no_yes_to_the_write_but_a_retry_keeps_its_yes():
    """"Shall I cancel order #W999?" -- "Yes." then a return of #W123: the yes answered the cancellation (before, the
    order id named earlier made it the yes to the return). A retry of a write the tool refused keeps the yes its
    first try had (the user asked for the action and never got it)."""
    assert _another_offer("Shall I cancel order #W999?") == ["policy.confirmation"]
    assert _another_offer("Shall I return the lamp-7 of #W123?") == []
    assert _another_offer("Shall I search for another day?", fail_first=True) == []


@pytest.mark.parametrize("answer", [
    "Not that one, okay.", "Wait. Okay.", "Not now, ok!",  # a closing "okay": a tag on the hold, no yes again
    "Not the lamp, the other one, yes.", "Sure, not that one, the other one.",  # a yes to another one
    "Not that one -- the blue one, okay?",
    "No, the other one, yes.", "Nope -- a different one, yes please.", "Hmm, no, the blue one. Sure."])
def test_a_closing_okay_or_a_yes_to_another_one_than_offered_is_no_yes(answer):
    """Until the twenty-second session "Not that one, okay." was a yes (its closing "okay" read as the yes said again)
    and "Not the lamp, the other one, yes." too (a yes to an item the agent had not put, the write on the one refused
    confirmed by it); "No, the other one, yes." was one until the twenty-third (a bare "no" before the other one)."""
    assert _violations("Shall I return the lamp-7?", answer, "return") == ["policy.confirmation"]


@pytest.mark.parametrize("answer", [
    "Hold on, okay, go ahead.", "OK, wait. Yes, go ahead.", "Yes, not the gift card, my credit card.",
    "Yes, go ahead. I do not want the other one.",
    "No, one more thing: yes, go ahead.", "No, a one-time refund is fine. Yes, go ahead."])  # no other one asked
def test_a_yes_said_again_after_a_hold_or_beside_a_detail_stays_a_yes(answer):
    assert _violations("Shall I return the lamp-7?", answer, "return") == []
