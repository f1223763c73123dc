"""A value relayed is not a value introduced: numbers an agent rounds from an earlier output are not new."""

from __future__ import annotations

from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.multiagent import _rounded_from
from evoharness.traces.models import Trajectory

TASK = "Which bar is closest to the museum?"


def _log(turns: list[tuple[str, str]]) -> Trajectory:
    msgs = [{"role": "user", "content": TASK}]
    msgs += [{"role": "assistant", "name": n, "content": c} for n, c in turns]
    return Trajectory(id="relay", task_id="relay", task=TASK, messages=msgs, final_answer=turns[-1][1],
                      meta={"failure_only": True})


def _turns(verifier: str) -> list[tuple[str, str]]:
    return [
        ("Geo_Expert", "You are given: (1) a task and advises from your manager with a specific plan"),
        ("Geo_Expert", "```python\nprint(distances(bars))\n```"),
        ("Computer_terminal", "exitcode: 0 (execution succeeded)\nCode output: {'Oak Tavern': 791.6543403552349, "
                              "'Brew House': 950.9136044916677, 'Garage': 1264.2472314127963}"),
        ("Verification_Expert", verifier),
    ]


def test_numbers_rounded_from_a_tool_output_are_relayed_not_new():
    # before, the verifier's rounded distances were 'numbers in no earlier message' and blamed it (F1 at step 4)
    t = _log(_turns("Oak Tavern is closest: 791.65 m, then Brew House at 950.91 m and Garage at 1264 m."))
    lab = Labeller().label(t)
    assert "F1.unsupported_fact" not in {s.id for s in lab.signals}
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F4.first_commitment", 2, "Geo_Expert")


def test_numbers_no_output_rounds_to_are_still_new():
    t = _log(_turns("Oak Tavern is closest: 612.40 m, then Brew House at 804.10 m."))
    lab = Labeller().label(t)
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F1.unsupported_fact", 4,
                                                                        "Verification_Expert")


def test_rounded_or_cut_to_the_numbers_own_decimals():
    seen = {"791.6543403552349", "9.996", "12", "1,250.5".replace(",", "")}
    assert _rounded_from("791.65", seen) and _rounded_from("791.7", seen) and _rounded_from("792", seen)
    assert _rounded_from("10.00", seen)  # rounding carries into the whole part
    assert _rounded_from("1,250", seen) and _rounded_from("1,251", seen)
    assert not _rounded_from("791.66", seen) and not _rounded_from("12", seen)
    assert not _rounded_from("791.6543", {"791.65"})  # more precise than what was seen: not a rounding of it


def test_a_number_longer_than_decimals_default_precision_is_read_not_raised():
    # decimal's default context holds 28 digits: quantizing a longer number raised InvalidOperation (a crash of the
    # labeller on a log that prints one)
    long = "123456789012345678901234567890123"
    assert _rounded_from(long + ".1", {long + ".12345"}) and not _rounded_from(long + ".2", {long + ".12345"})
    turns = _turns(f"The totals are {long}.1 and 612.40 units.")
    turns[2] = ("Computer_terminal", f"exitcode: 0 (execution succeeded)\nCode output: {long}.12345")
    lab = Labeller().label(_log(turns))  # raised before
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_commitment", 2)  # one new number: no F1


def test_a_whole_part_past_pythons_int_digit_limit_is_read_not_raised():
    # int() refuses a string of 4,300+ digits (ValueError): the "integer part less one" head raised, a traceback from
    # `diagnose` on a log that prints such a number
    huge = "1" * 5000
    seen = {huge + ".55", "2" * 4400 + ".6"}
    assert _rounded_from(huge + ".5", seen) or _rounded_from(huge + ".6", seen)  # one of the two roundings of .55
    assert _rounded_from("2" * 4399 + "3", seen)  # 222...2.6 rounds up, the whole part carrying
    assert not _rounded_from(huge + ".7", seen)
    turns = _turns(f"The totals are {huge}.6 and 612.40 units.")
    turns[2] = ("Computer_terminal", f"exitcode: 0 (execution succeeded)\nCode output: {huge}.55")
    lab = Labeller().label(_log(turns))  # raised before
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_commitment", 2)  # one new number: no F1


def _table_relayed(n: int) -> float:
    """CPU seconds to label a log whose terminal prints ``n`` numbers and whose verifier relays them rounded: the least
    of three tries, with the collector off while one runs (a full collection of a test worker's heap is not this
    code's cost)."""
    import gc
    import time

    precise = " ".join(f"{1000 + i}.123456" for i in range(n))
    rounded = " ".join(f"{1000 + i}.12" for i in range(n))
    t = _log([("Geo_Expert", "```python\nprint(table)\n```"),
              ("Computer_terminal", f"exitcode: 0\nCode output: {precise}"),
              ("Verification_Expert", f"The values are {rounded}")])
    tries = []
    for _ in range(3):
        gc.disable()
        try:
            start = time.process_time()
            Labeller().label(t)
            tries.append(time.process_time() - start)
        finally:
            gc.enable()
    return min(tries)


def test_a_relayed_table_costs_time_linear_in_its_size():
    """Each new number was compared with every earlier number: a verifier relaying a printed table of 8,000 values
    rounded took ~60x the time of 1,000 (quadratic; 4,000 took 0.8 s, 64,000 would take minutes). Linear is ~8x;
    the bound leaves room for a loaded machine. One try each failed a clean-clone CI at 74x (0.012 s, 0.918 s) where
    the cost alone is 8.2x: the least of three tries, collector off, is the code's cost."""
    small, big = _table_relayed(1000), _table_relayed(8000)
    assert big < 25 * small + 0.1, (small, big)
