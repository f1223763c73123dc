"""`dataset export` and token lengths: the card and manifest give each split's lengths in tokens (approximate, or
counted with a local tokenizer's chat template: `--tokenizer DIR`), and `--max-tokens N` skips a longer record whole,
counted, never cut. The exact counts are checked against what ops/train/sft_lora.py hands TRL for the same records."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from evoharness.cli import main
from evoharness.datasets.export import export_dataset, read_manifest
from evoharness.datasets.models import ExportFilters, SourceKind
from evoharness.datasets.tokens import ChatTemplateTokens, Lengths, TemplateFailed
from evoharness.errors import InputError
from evoharness.traces.store import write_trajectories
from tests.modules import load_file

from .helpers import make_traj, read_jsonl

ROOT = Path(__file__).resolve().parents[2]
needs_transformers = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None or importlib.util.find_spec("tokenizers") is None,
    reason="transformers / tokenizers not installed (pip install transformers): the exact counts are not checked")


def _runs() -> list:
    """Runs of 8 tasks whose lengths differ: 1 to 8 tool calls each, two runs of each task (the first the longer)."""
    return [make_traj(f"r{i}-{k}", f"task-{i}", calls=1 + (i + 3 * k) % 8 if k else 8 - i % 3) for i in range(8)
            for k in range(2)]


def _lines(path: Path) -> list[bytes]:
    return [line.rstrip(b"\n") for line in path.read_bytes().splitlines() if line.strip()]


def test_the_card_and_manifest_give_each_splits_approximate_token_lengths(tmp_path):
    s = export_dataset(tmp_path, source=SourceKind.all, trajectories=_runs(), val_fraction=0.25)
    t = s.token_lengths
    assert t is not None and not t.exact and "bytes" in t.method
    for part in ("train", "validation"):
        sizes = sorted(math.ceil(len(line) / 3) for line in _lines(tmp_path / f"{part}.jsonl"))
        got = t.splits[part]
        assert got["records"] == len(sizes) == s.validation.records[part]
        assert (got["min"], got["max"], got["total"]) == (sizes[0], sizes[-1], sum(sizes))
        assert got["median"] == sizes[(len(sizes) - 1) // 2]
    card = (tmp_path / "README.md").read_text()
    line = next(x for x in card.splitlines() if x.startswith("- **Token lengths**"))
    assert f"train {t.splits['train']['records']} records: min {t.splits['train']['min']:,}" in line
    assert "max_seq_length" in line and "`--max-tokens N` skips such records whole" in line
    assert read_manifest(tmp_path).token_lengths == t


def test_max_tokens_skips_a_longer_record_whole_and_it_takes_no_tasks_place(tmp_path):
    runs = _runs()
    export_dataset(tmp_path / "all", source=SourceKind.all, trajectories=runs)
    lines = _lines(tmp_path / "all" / "data.jsonl")
    limit = sorted(math.ceil(len(x) / 3) for x in lines)[len(lines) // 2]
    short = [x for x in lines if math.ceil(len(x) / 3) <= limit]
    assert 0 < len(short) < len(lines)
    s = export_dataset(tmp_path / "cut", source=SourceKind.all, trajectories=runs,
                       filters=ExportFilters(max_tokens=limit))
    assert _lines(tmp_path / "cut" / "data.jsonl") == short  # the others whole, byte for byte: none was cut
    assert s.skipped == {"over_max_tokens": len(lines) - len(short)}
    assert s.token_lengths.splits["train"]["max"] <= limit and s.token_lengths.splits["train"]["over_max_tokens"] == 0
    # with one record per task, a task whose first run is too long gets its second run, not nothing
    one = export_dataset(tmp_path / "one", source=SourceKind.all, trajectories=runs,
                         filters=ExportFilters(max_tokens=limit, max_per_task=1))
    fits = {m["task_id"] for m, x in zip(read_jsonl(tmp_path / "all" / "metadata.jsonl"), lines, strict=True)
            if math.ceil(len(x) / 3) <= limit}
    assert set(one.tasks) == fits and all(n == 1 for n in one.tasks.values())
    card = (tmp_path / "cut" / "README.md").read_text()
    assert f"records over {limit} tokens skipped (`--max-tokens`)" in card
    assert f"Records longer than {limit} tokens were skipped whole, never cut (`--max-tokens`): " \
           f"{len(lines) - len(short)}." in card


class _RefusesEvery:
    """A counter whose chat template refuses every record, each time with a new long error text."""

    method, exact = "a template that refuses every record", True

    def __init__(self) -> None:
        self.calls = 0

    def count(self, record: dict, line: bytes | None = None) -> int:
        self.calls += 1
        raise TemplateFailed(f"refused record {self.calls}: " + "x" * 500_000)


def test_records_the_chat_template_refuses_hold_no_memory_each(tmp_path):
    """Every refused record's error text was kept to the export's end, though the card names only the first: an
    export's memory grew by each refused record's text (here 0.5 MB a record)."""
    import tracemalloc

    def peak(runs: list, out: Path) -> int:  # the traced peak of one export, over what was held before it
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            s = export_dataset(out, source=SourceKind.all, trajectories=runs, tokens=(counter := _RefusesEvery()))
            grown = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
        assert s.records == 0 and s.skipped == {"chat_template_error": len(runs)} == {
            "chat_template_error": counter.calls}
        assert s.token_lengths.template_error.startswith("refused record 1: xxx")
        return grown

    runs = _runs()
    peak(runs, tmp_path / "warm")  # first-call set-up (imports, caches) is not the export's
    # 14 refused records more hold nothing more (before: 14 x 0.5 MB more)
    assert peak(runs, tmp_path / "all") - peak(runs[:2], tmp_path / "two") < 500_000


def test_a_split_keeps_a_token_length_in_4_bytes():
    lengths = Lengths()
    for n in range(100_000):
        lengths.add(n)
    assert lengths.values.itemsize * len(lengths.values) == 400_000  # the docstring's 400 KB per 100,000; was 800 KB
    assert lengths.stats(None) == {"records": 100_000, "min": 0, "median": 49_999, "p95": 94_999, "max": 99_999,
                                   "mean": 49_999.5, "total": 4_999_950_000}


def test_cli_prints_the_lengths_and_refuses_a_bad_limit_or_tokenizer(tmp_path, capsys):
    src = tmp_path / "t.jsonl"
    write_trajectories(src, _runs())
    assert main(["dataset", "export", "--source", "all", "-t", str(src), "--out", str(tmp_path / "o"),
                 "--max-tokens", "400"]) == 0
    out = capsys.readouterr().out
    skipped = read_manifest(tmp_path / "o").skipped["over_max_tokens"]
    assert f"{skipped} skipped ({skipped} over max tokens)" in out
    assert "token lengths (approximate: bytes / 3; --tokenizer DIR counts exactly): train " in out
    for args, said in ((["--max-tokens", "0"], "error: --max-tokens: Input should be greater than or equal to 1"),
                       (["--tokenizer", str(tmp_path / "nope")], f"error: --tokenizer: {tmp_path / 'nope'}: no such "
                                                                  "directory"),
                       (["--tokenizer", str(src)], "not a directory: give the directory that holds tokenizer.json"),
                       # a directory without a tokenizer: the line ended on transformers' 'from one of: '
                       (["--tokenizer", str(tmp_path)], f"error: --tokenizer: {tmp_path}: holds no tokenizer.json or "
                                                        "tokenizer_config.json: give the directory of the base")):
        assert main(["dataset", "export", "--source", "all", "-t", str(src), "--out", str(tmp_path / "x"),
                     *args]) == 2
        err = capsys.readouterr().err
        assert said in err and err.count("\n") == 1
        assert not (tmp_path / "x").exists()


# ChatML with tools, as Qwen2.5 writes it (ops/train/smoke.py's template), and one that, as Llama 3.1's does, refuses
# two calls in one turn
TEMPLATE = load_file(ROOT / "ops" / "train" / "smoke.py", "smoke").CHAT_TEMPLATE
ONE_CALL = ("{%- for message in messages %}{%- if (message.tool_calls or []) | length > 1 %}"
            "{{ raise_exception('This model only supports single tool-calls at once!') }}{%- endif %}"
            "{%- endfor %}" + TEMPLATE)


def _tokenizer(path: Path, template: str, texts: list[str]) -> Path:
    """A byte-level BPE trained on ``texts``, saved as a Hugging Face tokenizer directory with ``template``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=400, special_tokens=["<|im_start|>", "<|im_end|>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>",
                            chat_template=template).save_pretrained(path)
    return path


@needs_transformers
def test_tokenizer_counts_what_the_training_recipe_hands_trl(tmp_path):
    runs = _runs()
    export_dataset(tmp_path / "plain", source=SourceKind.all, trajectories=runs)
    tok_dir = _tokenizer(tmp_path / "tok", TEMPLATE, (tmp_path / "plain" / "data.jsonl").read_text().splitlines())
    counter = ChatTemplateTokens(tok_dir)
    s = export_dataset(tmp_path / "exact", source=SourceKind.all, trajectories=runs, tokens=counter,
                       val_fraction=0.25)
    assert s.token_lengths.exact and "through its chat template" in s.token_lengths.method
    recipe = load_file(ROOT / "ops" / "train" / "sft_lora.py", "sft_lora")
    for part in ("train", "validation"):
        counts = Counter()
        trained = sorted(len(x["input_ids"]) for x in recipe.encode_export(
            counter.tok, tmp_path / "exact", "all", counts, f"{part}.jsonl"))
        got = s.token_lengths.splits[part]
        assert (got["records"], got["min"], got["max"], got["total"]) == (
            len(trained), trained[0], trained[-1], sum(trained))
    # the limit with the tokenizer's counts: every record the recipe would see whole, none longer
    limit = sorted(counter.count(json.loads(x)) for x in _lines(tmp_path / "plain" / "data.jsonl"))[8]
    cut = export_dataset(tmp_path / "cut", source=SourceKind.all, trajectories=runs, tokens=counter,
                         filters=ExportFilters(max_tokens=limit))
    trained = [len(x["input_ids"]) for x in recipe.encode_export(counter.tok, tmp_path / "cut", "all", Counter())]
    assert max(trained) <= limit and len(trained) == cut.records == 16 - cut.skipped["over_max_tokens"] >= 9


@needs_transformers
def test_a_record_the_chat_template_cannot_render_is_skipped_and_named(tmp_path, capsys):
    runs = _runs()[:4]
    twice = runs[1]
    call = twice.messages[2]["tool_calls"][0]
    twice.messages[2]["tool_calls"] = [call, {**call, "id": "orig_x"}]
    twice.messages.insert(4, {"role": "tool", "tool_call_id": "orig_x", "name": "lookup", "content": "again"})
    src = tmp_path / "t.jsonl"
    write_trajectories(src, runs)
    tok_dir = _tokenizer(tmp_path / "tok", ONE_CALL, [m.get("content") or "" for t in runs for m in t.messages])
    assert main(["dataset", "export", "--source", "all", "-t", str(src), "--out", str(tmp_path / "o"),
                 "--tokenizer", str(tok_dir)]) == 0
    out, err = capsys.readouterr()
    assert read_manifest(tmp_path / "o").skipped == {"chat_template_error": 1}
    assert [m["id"] for m in read_jsonl(tmp_path / "o" / "metadata.jsonl")] == [runs[0].id, runs[2].id, runs[3].id]
    assert "warning: 1 records skipped: the chat template of --tokenizer cannot render them (the first: This model " \
           "only supports single tool-calls at once!)" in err
    assert "token lengths: train 3 records" in out
    with pytest.raises(InputError, match="has no chat template"):
        ChatTemplateTokens(_tokenizer(tmp_path / "bare", "", ["a b c"]))


def test_a_rendered_system_prompt_counts_in_the_length(tmp_path):
    """With ``--harness`` the system message is rendered after the record is made: the length and the limit are the
    record's as written, and a run so skipped still leaves its task's place to the next run."""
    import git

    from evoharness.datasets.prompts import resolve_prompt
    from evoharness.harness_repo.init import init_harness

    init_harness(tmp_path / "harness")
    repo = git.Repo(tmp_path / "harness")
    (tmp_path / "harness" / "lessons.md").write_text("- A LONG LESSON. " * 200 + "\n")
    repo.index.add(["lessons.md"])
    repo.index.commit("evolved: a long lesson")
    runs, prompt = _runs(), resolve_prompt(str(tmp_path / "harness"), "evolved")
    export_dataset(tmp_path / "all", source=SourceKind.all, trajectories=runs, prompt=prompt)
    lines = _lines(tmp_path / "all" / "data.jsonl")
    sizes = [math.ceil(len(x) / 3) for x in lines]
    assert min(sizes) > 1000  # the lesson is in every record: measured with it
    limit = sorted(sizes)[len(sizes) // 2]
    s = export_dataset(tmp_path / "cut", source=SourceKind.all, trajectories=runs, prompt=prompt,
                       filters=ExportFilters(max_tokens=limit, max_per_task=1))
    kept = _lines(tmp_path / "cut" / "data.jsonl")
    assert kept and all(math.ceil(len(x) / 3) <= limit for x in kept) and set(kept) <= set(lines)
    fits = {m["task_id"] for m, n in zip(read_jsonl(tmp_path / "all" / "metadata.jsonl"), sizes, strict=True)
            if n <= limit}
    assert set(s.tasks) == fits and s.token_lengths.splits["train"]["max"] <= limit


@pytest.mark.parametrize("seed", range(8))
def test_max_tokens_never_leaves_the_validation_split_empty(tmp_path, seed):
    # 4 tasks whose runs fit and 4 whose every run is over --max-tokens: the split's tasks were chosen before the
    # lengths were known, so validation tasks with only long runs left validation short, or empty (seeds 1 and 4: a
    # warning only); now they are chosen among the tasks with a record to write
    runs = [make_traj(f"s{i}-{k}", f"short-{i}", calls=1) for i in range(4) for k in range(2)]
    runs += [make_traj(f"l{i}-{k}", f"long-{i}", calls=30) for i in range(4) for k in range(2)]
    export_dataset(tmp_path / "all", source=SourceKind.all, trajectories=runs)
    sizes = {m["task_id"]: math.ceil(len(x) / 3) for m, x in zip(read_jsonl(tmp_path / "all" / "metadata.jsonl"),
                                                                  _lines(tmp_path / "all" / "data.jsonl"), strict=True)}
    limit = max(n for task, n in sizes.items() if task.startswith("short"))
    assert all(n > limit for task, n in sizes.items() if task.startswith("long"))
    s = export_dataset(tmp_path / "cut", source=SourceKind.all, trajectories=runs, val_fraction=0.25,
                       split_seed=seed, filters=ExportFilters(max_tokens=limit))
    assert s.validation.records == {"train": 6, "validation": 2}  # round(0.25 x 4 tasks) = 1 task of 2 runs
    assert s.validation.tasks_considered == 4 and s.validation.tasks[0].startswith("short")
    assert s.skipped == {"over_max_tokens": 8}


def test_placebo_records_over_max_tokens_are_kept_and_warned_of(tmp_path, capsys):
    # the placebo permutes the assistant turns of the records --max-tokens kept, so a record can come out longer than
    # the limit (a long final reply moved to a record with a long question); it is kept (the control matches the
    # export record for record) and said on stderr: before, only the card and the lengths line counted it
    runs = [make_traj(f"r{i}", f"task-{i}", calls=1, final=("a long final reply " * 40 if i % 2 else "ok"),
                      system="You are the agent. " * (40 if i % 2 == 0 else 1)) for i in range(10)]
    src = tmp_path / "t.jsonl"
    write_trajectories(src, runs)
    args = ["dataset", "export", "-t", str(src), "--source", "all", "--placebo"]
    for limit in range(200, 1200, 20):
        out = tmp_path / f"p{limit}"
        assert main([*args, "--out", str(out), "--max-tokens", str(limit)]) == 0
        err = capsys.readouterr().err
        manifest = read_manifest(out)
        lengths = manifest.token_lengths.splits["train"]
        if lengths.get("over_max_tokens"):
            assert (f"warning: {lengths['over_max_tokens']} placebo records are over --max-tokens {limit} (the longest "
                    f"{lengths['max']:,} tokens)") in err
            assert manifest.records == 10 - manifest.skipped.get("over_max_tokens", 0)
            break
        assert "placebo records are over" not in err
    else:
        pytest.fail("no limit made a placebo record longer than it")


@needs_transformers
def test_a_tokenizer_that_cannot_load_is_one_whole_error_line_with_nothing_before_it(tmp_path):
    """`--tokenizer DIR` on a directory whose tokenizer_config.json transformers cannot build a tokenizer from printed
    transformers' "PyTorch was not found. Models won't be available ..." and then an error line cut at the first line
    of transformers' message, `...: Couldn't instantiate the backend tokenizer from one of: `, which named none of
    them. In a fresh process, as a user runs it: one line, the message whole."""
    src = tmp_path / "t.jsonl"
    write_trajectories(src, _runs()[:2])
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer_config.json").write_text("{}")
    done = subprocess.run([sys.executable, "-m", "evoharness", "dataset", "export", "--source", "all", "-t", str(src),
                           "--out", str(tmp_path / "o"), "--tokenizer", str(tmp_path / "tok")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip()
    assert done.stderr.splitlines() == [line] and line.startswith(f"error: --tokenizer: {tmp_path / 'tok'}: "), line
    assert not line.rstrip().endswith(":") and len(line) > len(f"error: --tokenizer: {tmp_path / 'tok'}: ") + 60, line
    assert not (tmp_path / "o").exists()
