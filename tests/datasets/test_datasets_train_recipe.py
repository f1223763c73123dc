"""ops/train/sft_lora.py: the data preparation that feeds TRL (the training itself needs torch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evoharness.datasets.export import export_dataset
from evoharness.datasets.models import ExportFormat, SourceKind
from tests.modules import load_file

from .helpers import make_traj, read_jsonl

RECIPE = Path(__file__).resolve().parents[2] / "ops" / "train" / "sft_lora.py"


def _recipe():
    return load_file(RECIPE, "sft_lora")  # imports nothing heavy at module level


def test_recipe_reads_an_openai_export_as_exported(tmp_path):
    recipe = _recipe()
    export_dataset(tmp_path, source=SourceKind.all, trajectories=[make_traj("a"), make_traj("b", "t2")])
    manifest = recipe.check_export(tmp_path)
    assert manifest["records"] == 2 and manifest["placebo"] is False
    examples = list(recipe.load_examples(tmp_path))
    assert len(examples) == 2
    assert examples[0]["tools"][0]["function"]["parameters"]["required"] == ["key"]  # no schema merging
    assert examples[0]["messages"][2]["tool_calls"][0]["id"] == "call00000"


def test_recipe_refuses_what_it_cannot_train_on(tmp_path):
    recipe = _recipe()
    with pytest.raises(SystemExit, match="not an evoharness export"):
        recipe.check_export(tmp_path)
    export_dataset(tmp_path / "sg", fmt=ExportFormat.sharegpt, source=SourceKind.all,
                   trajectories=[make_traj("a")])
    with pytest.raises(SystemExit, match="reads --format openai"):
        recipe.check_export(tmp_path / "sg")
    export_dataset(tmp_path / "ok", source=SourceKind.all, trajectories=[make_traj("a")])
    m = json.loads((tmp_path / "ok" / "manifest.json").read_text())
    m["splits"] = {"heldout": 1}
    (tmp_path / "ok" / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(SystemExit, match="held-out"):
        recipe.check_export(tmp_path / "ok")


def _smoke():
    return load_file(RECIPE.parent / "smoke.py", "train_smoke")  # imports nothing heavy at module level


def _renderer(template: str, tools):
    """The chat template rendered as transformers renders it (its Jinja settings and its ``tojson``)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x: json.dumps(x, ensure_ascii=False)
    compiled = env.from_string(template)
    return lambda messages, generation_prompt: compiled.render(messages=messages, tools=tools,
                                                               add_generation_prompt=generation_prompt)


def test_tool_call_arguments_reach_the_chat_template_as_objects(tmp_path):
    # chat templates write arguments with tojson (Qwen2.5: `tool_call.arguments | tojson`): the export's JSON
    # text went to the model encoded twice, "{\"key\": ...}", a form no tool parser reads back
    recipe = _recipe()
    export_dataset(tmp_path, source=SourceKind.all, trajectories=[make_traj("a")])
    ex = next(recipe.load_examples(tmp_path))
    assert ex["messages"][2]["tool_calls"][0]["function"]["arguments"] == {"key": "a-0", "n": 0}
    text = _renderer(_smoke().CHAT_TEMPLATE, ex["tools"])(ex["messages"], False)
    assert '{"name": "lookup", "arguments": {"key": "a-0", "n": 0}}' in text
    exported = read_jsonl(tmp_path / "data.jsonl")[0]
    assert exported["messages"][2]["tool_calls"][0]["function"]["arguments"] == '{"key": "a-0", "n": 0}'  # a text


def test_arguments_that_are_not_json_are_one_error_line(tmp_path):
    recipe = _recipe()
    export_dataset(tmp_path, source=SourceKind.all, trajectories=[make_traj("a")])
    rec = read_jsonl(tmp_path / "data.jsonl")[0]
    rec["messages"][2]["tool_calls"][0]["function"]["arguments"] = "{key: 1"
    (tmp_path / "data.jsonl").write_text(json.dumps(rec) + "\n")
    with pytest.raises(SystemExit, match=r"data.jsonl line 1: tool call 'call00000': arguments are not JSON"):
        list(recipe.load_examples(tmp_path))


def test_the_loss_mask_covers_the_assistant_turns_and_nothing_else(tmp_path):
    recipe = _recipe()
    export_dataset(tmp_path, source=SourceKind.all, trajectories=[make_traj("a", calls=2)])
    ex = next(recipe.load_examples(tmp_path))
    render = _renderer(_smoke().CHAT_TEMPLATE, ex["tools"])
    text, spans = recipe.assistant_spans(render, ex["messages"])
    assert text == render(ex["messages"], False)
    turns = [text[s:e] for s, e in spans]
    assert turns == ['<tool_call>\n{"name": "lookup", "arguments": {"key": "a-0", "n": 0}}\n</tool_call><|im_end|>\n',
                     '<tool_call>\n{"name": "lookup", "arguments": {"key": "a-1", "n": 1}}\n</tool_call><|im_end|>\n',
                     "final answer of a<|im_end|>\n"]
    # tokens as a fast tokenizer gives their offsets: 3-character pieces here, one straddling each span's edges
    offsets = [(i, min(i + 3, len(text))) for i in range(0, len(text), 3)]
    mask = recipe.token_mask(offsets, spans)
    in_loss = "".join(text[s:e] for (s, e), m in zip(offsets, mask, strict=True) if m)
    for turn in turns:
        assert turn in in_loss
    for outside in ("You are the agent.", "user turn 0", "result a-0", "<tool_response>", "Look things up"):
        assert outside not in in_loss
    assert len(in_loss) < sum(map(len, turns)) + 2 * 2 * len(turns)  # at most the straddling pieces beyond


def test_a_template_that_rewrites_earlier_turns_is_refused_not_masked_wrongly():
    recipe = _recipe()
    # the last assistant turn rendered unlike the earlier ones (as templates that drop past reasoning do)
    template = ("{% for m in messages %}<{{ m.role }}>{% if m.role == 'assistant' and not loop.last %}[old]"
                "{% endif %}{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}")
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a"},
                {"role": "user", "content": "again"}, {"role": "assistant", "content": "b"}]
    with pytest.raises(recipe.TemplateError, match=r"message 1: .*\(use --loss all\)"):
        recipe.assistant_spans(_renderer(template, None), messages)


def test_the_recipe_refuses_bad_input_with_one_error_line(tmp_path):
    export_dataset(tmp_path / "sg", fmt=ExportFormat.sharegpt, source=SourceKind.all, trajectories=[make_traj("a")])
    for data, said in ((tmp_path / "none", "not an evoharness export"), (tmp_path / "sg", "reads --format openai")):
        run = subprocess.run([sys.executable, str(RECIPE), "--data", str(data), "--model", "m", "--out",
                              str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
        assert run.returncode == 2 and run.stdout == ""
        assert run.stderr.startswith("error: ") and said in run.stderr and run.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()


def _stub_packages(root: Path, *, missing: str | None = None) -> Path:
    """Stand-ins for the training packages, shadowing any installed ones: ``missing`` fails to import, and
    the tokenizer cannot be loaded (as for a mistyped model path), so nothing is trained or fetched."""
    bodies = {"peft": "LoraConfig = None", "torch": "", "trl": "SFTConfig = SFTTrainer = None",
              "datasets": "Dataset = None",
              "transformers": "class AutoTokenizer:\n    @staticmethod\n    def from_pretrained(name):\n"
                              "        raise OSError(f'{name} is not a local folder and is not a valid model id\\n"
                              "If this is a private repository, pass a token')"}
    for name, body in bodies.items():
        (root / name).mkdir(parents=True)
        (root / name / "__init__.py").write_text(
            f'raise ModuleNotFoundError("No module named {name!r}", name={name!r})' if name == missing else body)
    return root


def _recipe_run(tmp_path: Path, data: Path, stubs: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(RECIPE), "--data", str(data), "--model", "./no-such-model", "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(stubs)})


@pytest.mark.parametrize("missing", ["peft", "torch"])
def test_the_recipe_without_its_packages_is_one_error_line_naming_the_requirements(tmp_path, missing):
    export_dataset(tmp_path / "ok", source=SourceKind.all, trajectories=[make_traj("a")])
    run = _recipe_run(tmp_path, tmp_path / "ok", _stub_packages(tmp_path / "site", missing=missing))
    assert run.returncode == 2 and run.stdout == "" and run.stderr.count("\n") == 1
    assert run.stderr.startswith(f"error: {missing}: not installed") and "pip install -r ops/train/requirements.txt" \
        in run.stderr


def test_a_model_whose_tokenizer_cannot_load_is_one_error_line(tmp_path):
    export_dataset(tmp_path / "ok", source=SourceKind.all, trajectories=[make_traj("a")])
    run = _recipe_run(tmp_path, tmp_path / "ok", _stub_packages(tmp_path / "site"))
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr == ("error: ./no-such-model: cannot load its tokenizer: ./no-such-model is not a local folder "
                          "and is not a valid model id\n")
    assert not (tmp_path / "out").exists()


def test_an_hf_export_is_refused_for_its_format(tmp_path):
    export_dataset(tmp_path / "hf", fmt=ExportFormat.hf, source=SourceKind.all, trajectories=[make_traj("a")])
    with pytest.raises(SystemExit, match="a --format hf export; this recipe reads --format openai"):
        _recipe().check_export(tmp_path / "hf")


class _CharTokenizer:
    """A fast tokenizer's interface with one token per character (its offsets are the characters')."""

    def __init__(self, template: str):
        self.template = template

    def apply_chat_template(self, messages, tools=None, tokenize=False, add_generation_prompt=False):
        assert not tokenize
        return _renderer(self.template, tools)(messages, add_generation_prompt)

    def __call__(self, text, add_special_tokens=True, return_offsets_mapping=False):
        assert not add_special_tokens and return_offsets_mapping
        return {"input_ids": [ord(c) for c in text], "offset_mapping": [(i, i + 1) for i in range(len(text))]}


def test_each_record_is_encoded_with_its_assistant_turns_marked(tmp_path):
    recipe = _recipe()
    export_dataset(tmp_path, source=SourceKind.all, trajectories=[make_traj("a"), make_traj("b", "t2", calls=1)])
    tok, counts = _CharTokenizer(_smoke().CHAT_TEMPLATE), {"records": 0, "tokens": 0, "assistant_tokens": 0}
    rows = list(recipe.encode_export(tok, tmp_path, "assistant", counts))
    marked = ["".join(chr(t) for t, m in zip(r["input_ids"], r["assistant_masks"], strict=True) if m) for r in rows]
    call = '<tool_call>\n{"name": "lookup", "arguments": {"key": "b-0", "n": 0}}\n</tool_call><|im_end|>\n'
    assert marked[1] == call + "final answer of b<|im_end|>\n"
    assert counts["records"] == 2 and counts["assistant_tokens"] == sum(map(len, marked))
    assert counts["tokens"] == sum(len(r["input_ids"]) for r in rows) > counts["assistant_tokens"]
    every = list(recipe.encode_export(tok, tmp_path, "all", {"records": 0, "tokens": 0, "assistant_tokens": 0}))
    assert all(all(r["assistant_masks"]) for r in every)
    # a template that rewrites earlier turns: the error names the record and the message
    rewrites = ("{% for m in messages %}{{ m.role }}:{% if m.role == 'assistant' and not loop.last %}[old]{% endif %}"
                "{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}")
    with pytest.raises(recipe.TemplateError, match=r"data.jsonl record 1, message 2: "):
        list(recipe.encode_export(_CharTokenizer(rewrites), tmp_path, "assistant", dict(counts)))


def test_an_export_the_recipe_cannot_read_is_one_error_line_saying_what_it_reads(tmp_path):
    """A manifest.json that is not JSON (cut short) or not an object stopped the recipe with a traceback
    (JSONDecodeError, AttributeError); a ShareGPT or hf export was refused without saying how to get one it reads.
    Each is now one error line, exit 2: the ShareGPT / hf export named as such, with the command that writes the
    OpenAI export of the same trajectories (ShareGPT merges turns and drops the call ids; hf's Arrow rows add null
    fields to tool schemas: neither is read back as trained)."""
    export_dataset(tmp_path / "sg", fmt=ExportFormat.sharegpt, source=SourceKind.all, trajectories=[make_traj("a")])
    export_dataset(tmp_path / "hf", fmt=ExportFormat.hf, source=SourceKind.all, trajectories=[make_traj("a")])
    for name, manifest in (("cut", '{"format": "openai",'), ("list", "[1]"), ("nofmt", '{"records": 1}'),
                           ("splits", '{"format": "openai", "splits": 5}')):
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text(manifest)
        (tmp_path / name / "data.jsonl").write_text("")
    said = {"cut": f"{tmp_path / 'cut' / 'manifest.json'}: not a readable export manifest (",
            "list": f"{tmp_path / 'list' / 'manifest.json'}: not a readable export manifest (a JSON object)",
            "nofmt": f"{tmp_path / 'nofmt'}: its manifest names no export format",
            "splits": f"{tmp_path / 'splits' / 'manifest.json'}: not a readable export manifest (splits: 5",
            "sg": f"{tmp_path / 'sg'}: a --format sharegpt export; this recipe reads --format openai",
            "hf": f"{tmp_path / 'hf'}: a --format hf export; this recipe reads --format openai"}
    for name, start in said.items():
        run = subprocess.run([sys.executable, str(RECIPE), "--data", str(tmp_path / name), "--model", "m", "--out",
                              str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
        assert run.returncode == 2 and run.stdout == "" and run.stderr.count("\n") == 1, (name, run.stderr)
        assert run.stderr.startswith(f"error: {start}"), (name, run.stderr)
        assert name in ("cut", "list", "splits") or "evoharness dataset export ... --format openai" in run.stderr
    assert not (tmp_path / "out").exists()


def test_an_export_with_a_validation_split_trains_on_its_train_file(tmp_path):
    """`dataset export --val-fraction` writes train.jsonl / validation.jsonl and no data.jsonl: the recipe refused it
    as "not an evoharness export (need data.jsonl and manifest.json)"; it now reads the train split's file."""
    recipe = _recipe()
    trajs = [make_traj(f"r{i}", f"task-{i}") for i in range(4)]
    export_dataset(tmp_path, source=SourceKind.all, trajectories=trajs, val_fraction=0.25)
    assert not (tmp_path / "data.jsonl").exists()
    manifest = recipe.check_export(tmp_path)
    assert recipe.train_file(manifest) == "train.jsonl"
    examples = list(recipe.load_examples(tmp_path, recipe.train_file(manifest)))
    train = read_jsonl(tmp_path / "train.jsonl")
    assert len(examples) == len(train) == 3
    assert [e["messages"][1]["content"] for e in examples] == [r["messages"][1]["content"] for r in train]
    # one without a split is read as before
    export_dataset(tmp_path / "one", source=SourceKind.all, trajectories=trajs)
    assert recipe.train_file(recipe.check_export(tmp_path / "one")) == "data.jsonl"
    (tmp_path / "train.jsonl").unlink()
    with pytest.raises(SystemExit, match=r"need train.jsonl and manifest.json"):
        recipe.check_export(tmp_path)


def test_the_validation_split_is_what_the_recipe_evaluates_on(tmp_path):
    """The recipe read the train split only ("its validation split is not read by this recipe"): now it evaluates on
    the validation split's file, each record as exported, its tasks in no training record; no split, no file."""
    recipe = _recipe()
    trajs = [make_traj(f"r{i}-{k}", f"task-{i}") for i in range(6) for k in range(2)]
    export_dataset(tmp_path, source=SourceKind.all, trajectories=trajs, val_fraction=0.34)
    manifest = recipe.check_export(tmp_path)
    assert recipe.validation_file(manifest) == "validation.jsonl"
    evaluated = list(recipe.load_examples(tmp_path, recipe.validation_file(manifest)))
    written = read_jsonl(tmp_path / "validation.jsonl")
    assert len(evaluated) == len(written) == 4
    assert [e["messages"][1]["content"] for e in evaluated] == [r["messages"][1]["content"] for r in written]
    val_tasks = {m["task_id"] for m in read_jsonl(tmp_path / "validation.metadata.jsonl")}
    assert val_tasks and not val_tasks & {m["task_id"] for m in read_jsonl(tmp_path / "train.metadata.jsonl")}
    export_dataset(tmp_path / "one", source=SourceKind.all, trajectories=trajs)
    assert recipe.validation_file(recipe.check_export(tmp_path / "one")) is None


def _train_python() -> str | None:
    """A Python with the recipe's packages: $EVOHARNESS_TRAIN_PYTHON (a venv of ops/train/requirements.txt), or this
    one when it has them (evoharness's own venv has no torch: the test skips there)."""
    import importlib.util

    if os.environ.get("EVOHARNESS_TRAIN_PYTHON"):
        return os.environ["EVOHARNESS_TRAIN_PYTHON"]
    needed = ("torch", "transformers", "trl", "peft", "datasets", "accelerate")
    return sys.executable if all(importlib.util.find_spec(m) for m in needed) else None


TRAIN_PYTHON = _train_python()


@pytest.mark.skipif(TRAIN_PYTHON is None, reason="needs torch, transformers, trl, peft, datasets, accelerate "
                    "(pip install -r ops/train/requirements.txt in a venv; EVOHARNESS_TRAIN_PYTHON=that venv's python)")
def test_the_recipe_evaluates_on_the_validation_split_on_cpu_with_a_tiny_model(tmp_path):
    """b565126's evaluation loop, run: a split export, a tiny random Qwen2 and a BPE tokenizer made here (nothing
    downloaded), two CPU steps; eval_loss is measured on the validation records and written to the run's log. A
    --max-length that leaves no assistant token stopped TRL's sampler with a traceback ('num_samples should be a
    positive integer value, but got num_samples=0'): now one error line, exit 2."""
    runs = [make_traj(f"r{i}-{k}", f"task-{i}", calls=1 + k) for i in range(4) for k in range(2)]
    export = tmp_path / "export"
    export_dataset(export, source=SourceKind.all, trajectories=runs, val_fraction=0.25)
    texts = tmp_path / "texts"
    texts.mkdir()
    (texts / "data.jsonl").write_bytes((export / "train.jsonl").read_bytes())
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "HF_HOME": str(tmp_path / "hf-home")}
    build = ("import sys; sys.path.insert(0, sys.argv[1]); import smoke; "
             "from pathlib import Path; smoke.build_model(Path(sys.argv[2]), Path(sys.argv[3]))")
    subprocess.run([TRAIN_PYTHON, "-c", build, str(RECIPE.parent), str(tmp_path), str(texts)], check=True, env=env,
                   capture_output=True)

    def train(max_length: int) -> subprocess.CompletedProcess:
        return subprocess.run([TRAIN_PYTHON, str(RECIPE), "--data", str(export), "--model", str(tmp_path / "model"),
                               "--out", str(tmp_path / f"adapter-{max_length}"), "--cpu", "--max-steps", "2",
                               "--batch", "1", "--grad-accum", "1", "--max-length", str(max_length),
                               "--logging-steps", "1"], env=env, capture_output=True, text=True)

    done = train(2048)
    assert done.returncode == 0, done.stderr[-2000:]
    log = json.loads((tmp_path / "adapter-2048" / "evoharness-train-log.json").read_text())
    assert log["validation"]["file"] == "validation.jsonl" and log["validation"]["rendered"]["records"] == 2
    assert 0 < log["validation"]["eval"]["eval_loss"] < 100, log["validation"]
    assert "eval_loss " in done.stdout
    cut = train(8)
    assert cut.returncode == 2 and cut.stderr.splitlines()[-1].startswith(
        "error: no record has an assistant token within --max-length 8"), cut.stderr[-2000:]


def test_the_smoke_run_exports_a_validation_split_and_checks_its_loss(tmp_path):
    """ops/train/smoke.py trained without a validation split: its exports had none, so a user's smoke run showed no
    validation loss and checked none. Now both exports (real, placebo) are split by task (--val-fraction 0.2), the
    placebo is checked within each split, and a run whose log holds no eval_loss fails; --val-fraction 0 says why
    there is none. (The training itself needs torch: the CPU test above.)"""
    smoke = _smoke()
    runs = [make_traj(f"r{i}-{k}", f"task-{i}", calls=1 + (i + k) % 3) for i in range(10) for k in range(2)]
    src = tmp_path / "runs.jsonl"
    src.write_text("".join(r.model_dump_json() + "\n" for r in runs))
    real, placebo = smoke.export(tmp_path, src)
    assert smoke.parts(real) == smoke.parts(placebo) == ["train", "validation"]
    val = read_jsonl(real / "validation.jsonl")
    assert len(val) == 4 and len(read_jsonl(real / "train.jsonl")) == 16  # 2 of the 10 tasks, 2 runs each
    assert smoke.check_placebo(real, placebo) == []

    history = [{"loss": 5.0 - i / 10} for i in range(10)]
    log = {"trained": {"records": 16, "tokens": 900, "loss_tokens": 300}, "log_history": history,
           "validation": {"file": "validation.jsonl", "rendered": {"records": 4}, "eval": None}}
    assert smoke.check_log("real", log) == ["real: no validation loss measured on validation.jsonl (eval: None)"]
    log["validation"]["eval"] = {"eval_loss": 4.2}
    assert smoke.check_log("real", log) == []
    assert smoke.check_log("real", {**log, "validation": None}) == []  # --val-fraction 0: said, not failed
