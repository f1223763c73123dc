"""A Who&When log's closing word is no answer, however the agent wrote it: AG2 agents end a chat with ``TERMINATE``
alone, and some emphasise it (``**TERMINATE**``: Who&When Algorithm-Generated 47). The final answer, where no
``FINAL ANSWER:`` line says it, is the last message that says something else."""

from __future__ import annotations

import json

import pytest

from evoharness.traces.importers import load_paths
from evoharness.traces.patterns import is_terminate


def _final(tmp_path, last: str) -> str | None:
    p = tmp_path / "log.json"
    p.write_text(json.dumps({"question": "Convert 𒐜 𒐐𒐚 to decimal.", "mistake_agent": "Expert", "mistake_step": "1",
                             "history": [{"role": "assistant", "name": "Expert", "content": "It is 661."},
                                         {"role": "assistant", "name": "Expert", "content": "I agree: 661."},
                                         {"role": "assistant", "name": "Expert", "content": last}]}))
    [t] = list(load_paths([p]))
    return t.final_answer


@pytest.mark.parametrize("last", ["TERMINATE", "**TERMINATE**", " `TERMINATE` ", "TERMINATE.", "_terminate_"])
def test_the_closing_word_alone_is_skipped(tmp_path, last):
    assert _final(tmp_path, last) == "I agree: 661."


@pytest.mark.parametrize("text", ["Agreed. TERMINATE", "TERMINATE the process first", "**TERMINATED**", ""])
def test_a_message_that_says_more_is_not_the_closing_word(text):
    assert not is_terminate(text)
