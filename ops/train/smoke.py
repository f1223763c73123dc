"""Run ops/train/sft_lora.py end to end on CPU: a real export, a tiny random model, a few dozen steps.

    python ops/train/smoke.py [--work /var/tmp/evoharness-train-smoke] [--venv /var/tmp/trainvenv] [--steps 30]
        [--val-fraction 0.2]

Run it with the project's Python (evoharness importable, e.g. ``.venv/bin/python``). It

1. imports the tau-bench airline runs (``../shared/data/tau_bench_airline_gpt4o``, or ``--trajectories``) and
   exports their healthy runs twice with the CLI, ``--format openai`` and ``--placebo``, each with a validation
   split by task (``--val-fraction``, 0.2 by default; 0 for none), and checks that the placebo differs from the
   export only as docs/datasets.md says (same records, system prompts and user turns in each split; the assistant
   turns, with the tool results that answer them, moved between records of a split);
2. builds the training venv if ``--venv`` has none (``pip install -r ops/train/requirements.txt``);
3. in that venv, builds a tokenizer (byte-level BPE trained on the export's own text, a ChatML chat template
   that writes tool calls and tool results) and a tiny random Qwen2 model, both saved to ``--work``;
4. trains an adapter on each export with sft_lora.py (``--cpu --max-steps``) and checks what a trainer user
   would: the loss is on assistant turns only, tool calls reach the model as JSON objects and tool results
   stay out of the loss, the loss falls, each run measured a validation loss (``eval_loss`` on the validation
   tasks, which no training record holds), and the adapter loads back with PEFT and lowers the loss on its
   records against the base model (its loss on the validation records is printed beside it, not checked: a tiny
   random model need not generalise).

It prints the figures and exits 1 if a check fails. A tiny random model shows the pipeline works, not that
training helps a real model.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TAU = ROOT.parent / "shared" / "data" / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"

# ChatML as Qwen2.5 writes it: tools in the system turn, each call a <tool_call> JSON object, each result
# a <tool_response> in a turn of its own (Qwen2.5 folds it into a user turn; a turn of its own is simpler).
CHAT_TEMPLATE = """
{%- if tools %}<|im_start|>system
{% if messages and messages[0].role == 'system' %}{{ messages[0].content }}

{% endif %}# Tools

<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools><|im_end|>
{% elif messages and messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'tool' %}<|im_start|>tool
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% elif message.role == 'assistant' %}<|im_start|>assistant
{% if message.content %}{{ message.content }}{% endif %}
{%- for call in message.tool_calls or [] %}
<tool_call>
{{ {"name": call.function.name, "arguments": call.function.arguments} | tojson }}
</tool_call>
{%- endfor %}<|im_end|>
{% elif message.role != 'system' %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}""".strip()


def sh(cmd: list[str], **kw) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, **kw)


VAL_FRACTION = 0.2


def parts(export: Path) -> list[str]:
    """The export's data files: ``data.jsonl``, or ``train.jsonl`` and ``validation.jsonl`` of a split export."""
    return ["train", "validation"] if (export / "train.jsonl").is_file() else ["data"]


def records(export: Path, part: str = "data") -> list[dict]:
    return [json.loads(line) for line in (export / f"{part}.jsonl").open()]


def metadata(export: Path, part: str = "data") -> list[dict]:
    name = "metadata.jsonl" if part == "data" else f"{part}.metadata.jsonl"
    return [json.loads(line) for line in (export / name).open()]


def assistant_turns(record: dict) -> list[str]:
    """Each assistant turn as its text and calls (ids aside: an export re-keys them per record)."""
    return [json.dumps([m.get("content"), [(c["function"]["name"], c["function"]["arguments"])
                                           for c in m.get("tool_calls") or []]])
            for m in record["messages"] if m["role"] == "assistant"]


def check_placebo(real: Path, placebo: Path) -> list[str]:
    """Differences between the export and its placebo beyond what docs/datasets.md, "Placebo", says (with a
    validation split the placebo permutes within each split: a validation task's turns reach no training record)."""
    fails, moved, total, n = [], 0, 0, 0
    if parts(real) != parts(placebo):
        return [f"placebo: its files are {parts(placebo)}, the export's {parts(real)}"]
    for part in parts(real):
        a, b = records(real, part), records(placebo, part)
        ids = [m["id"] for m in metadata(real, part)]
        pids = [m["id"] for m in metadata(placebo, part)]
        if len(a) != len(b) or ids != pids:
            fails.append(f"placebo {part}: {len(b)} records against {len(a)}, or not the same trajectories")
        kept = lambda r: [m for m in r["messages"] if m["role"] in ("system", "user")]  # noqa: E731
        if any(kept(x) != kept(y) for x, y in zip(a, b, strict=False)):
            fails.append(f"placebo {part}: a system prompt or user turn differs")
        if Counter(t for r in a for t in assistant_turns(r)) != Counter(t for r in b for t in assistant_turns(r)):
            fails.append(f"placebo {part}: the assistant turns are not the export's {part} turns, permuted")
        moved += sum(x != y for r, p in zip(a, b, strict=False)
                     for x, y in zip(assistant_turns(r), assistant_turns(p), strict=False))
        total += sum(len(assistant_turns(r)) for r in a)
        n += len(b)
    print(f"placebo: {n} records ({', '.join(parts(real))}), same trajectories, system prompts and user turns; "
          f"{moved} of {total} assistant turns differ from the export's at their place")
    if moved == 0:
        fails.append("placebo: no assistant turn moved")
    return fails


def export(work: Path, trajectories: Path, val_fraction: float = VAL_FRACTION) -> tuple[Path, Path]:
    """The healthy runs exported twice (real, placebo), split by task when ``val_fraction`` > 0 (the same split: the
    same tasks and seed)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    eh = [sys.executable, "-m", "evoharness"]
    canonical = work / "tau.jsonl"
    sh([*eh, "import", trajectories, "--out", canonical], cwd=work, env=env)
    split = ["--val-fraction", val_fraction] if val_fraction > 0 else []
    out = {}
    for name, extra in (("real", []), ("placebo", ["--placebo"])):
        out[name] = work / "exports" / name
        sh([*eh, "dataset", "export", "--source", "healthy", "-t", canonical, "--format", "openai",
            "--out", out[name], *split, *extra], cwd=work, env=env)
    return out["real"], out["placebo"]


def ensure_venv(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        sh([sys.executable, "-m", "venv", venv])
        sh([python, "-m", "pip", "install", "-q", "-r", HERE / "requirements.txt"])
    return python


def build_model(work: Path, export: Path) -> None:
    """A byte-level BPE tokenizer trained on the export's text and a tiny random Qwen2, in work/model."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    lines = (export / f"{parts(export)[0]}.jsonl").read_text().splitlines()  # the training records' text only
    bpe.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=2048, special_tokens=specials,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  chat_template=CHAT_TEMPLATE)
    # initializer_range 0.2, not 0.02: LoRA leaves the embeddings and the final norm frozen, and with
    # embeddings of norm ~0.16 no logit could move past ~1.3 (the loss could not fall below ~6.5).
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
                      tie_word_embeddings=True, initializer_range=0.2,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    import torch

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg)
    model.save_pretrained(work / "model")
    tok.save_pretrained(work / "model")
    n = sum(p.numel() for p in model.parameters())
    print(f"tiny model: Qwen2, {n:,} parameters, vocabulary {len(tok):,} (BPE on the export's text)")


def check_rendering(model_dir: Path, export: Path) -> list[str]:
    """Tool calls reach the template as JSON objects, inside the loss; tool results render outside it."""
    sys.path.insert(0, str(HERE))
    import sft_lora
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    ex = next(e for e in sft_lora.load_examples(export, f"{parts(export)[0]}.jsonl")
              if any(m["role"] == "tool" for m in e["messages"]))
    text, spans = sft_lora.assistant_spans(
        lambda ms, gp: tok.apply_chat_template(ms, tools=ex["tools"], tokenize=False, add_generation_prompt=gp),
        ex["messages"])
    inside = lambda i: any(s <= i < e for s, e in spans)  # noqa: E731
    call, result = text.index("<tool_call>"), text.index("<tool_response>")
    print("a tool call and its result as the model sees them (loss on the tool call, not on the result):")
    print("   ", text[call:text.index("<|im_end|>", result)].replace("\n", "\n    ")[:600])
    fails = []
    if '"arguments": {' not in text[call:] or '"arguments": "' in text:
        fails.append("render: a tool call's arguments are not a JSON object")
    if not inside(call) or inside(result):
        fails.append("render: the loss mask covers a tool result or misses a tool call")
    return fails


def check_log(name: str, log: dict) -> list[str]:
    """One adapter's run, from its evoharness-train-log.json: the loss falls, on part of the tokens only, and a
    split export's run measured a validation loss (one without a split says why there is none)."""
    fails = []
    losses = [h["loss"] for h in log["log_history"] if "loss" in h]
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    t = log["trained"]
    print(f"{name}: {t['records']} records trained, loss on {t['loss_tokens']:,} of {t['tokens']:,} tokens "
          f"({t['loss_tokens'] / t['tokens']:.1%}); loss {first:.3f} (mean of steps 1-5) -> {last:.3f} "
          f"(last 5 of {len(losses)})")
    if not last < 0.9 * first:
        fails.append(f"{name}: the loss did not fall by 10% ({first:.3f} -> {last:.3f})")
    if not 0 < t["loss_tokens"] < t["tokens"]:
        fails.append(f"{name}: the loss is not on part of the tokens only")
    val = log.get("validation")
    if val is None:
        print(f"{name}: no validation loss: the export has no validation split (--val-fraction 0)")
        return fails
    loss = (val.get("eval") or {}).get("eval_loss")
    if not isinstance(loss, int | float) or not 0 < loss < float("inf"):
        return [*fails, f"{name}: no validation loss measured on {val.get('file')} (eval: {val.get('eval')})"]
    print(f"{name}: validation loss {loss:.3f} on {val['rendered']['records']} records of {val['file']} "
          "(tasks no training record holds)")
    return fails


def check_training(model_dir: Path, adapters: dict[str, Path], export: Path, max_length: int) -> list[str]:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    sys.path.insert(0, str(HERE))
    import sft_lora

    fails = []
    for name, out in adapters.items():
        fails += check_log(name, json.loads((out / "evoharness-train-log.json").read_text()))

    # the real adapter, loaded back with PEFT, against the base model on its first records' assistant tokens
    tok = AutoTokenizer.from_pretrained(model_dir)

    def batches_of(part: str) -> list:
        batches = []
        for ex in list(sft_lora.load_examples(export, f"{part}.jsonl"))[:8]:
            text, spans = sft_lora.assistant_spans(
                lambda ms, gp, tools=ex["tools"]: tok.apply_chat_template(ms, tools=tools, tokenize=False,
                                                                            add_generation_prompt=gp),
                ex["messages"])
            enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
            ids = torch.tensor([enc["input_ids"][:max_length]])
            mask = torch.tensor([sft_lora.token_mask(enc["offset_mapping"], spans)[:max_length]])
            batches.append((ids, torch.where(mask.bool(), ids, -100)))
        return batches

    def mean_loss(model, batches) -> float:
        with torch.no_grad():
            return sum(model(input_ids=i, labels=lab).loss.item() for i, lab in batches) / len(batches)

    base = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    tuned = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model_dir), adapters["real"]).eval()
    lora = sum(p.numel() for n, p in tuned.named_parameters() if "lora_" in n)
    for part in parts(export):
        batches = batches_of(part)
        before, after = mean_loss(base, batches), mean_loss(tuned, batches)
        print(f"adapter loaded back with PEFT ({lora:,} LoRA parameters): assistant-token loss on {len(batches)} "
              f"of its {part} records {before:.3f} (base) -> {after:.3f} (base + adapter)")
        if part != "validation" and not after < before:
            fails.append(f"peft: the loaded adapter does not lower the loss on its {part} records")
    return fails


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/evoharness-train-smoke"))
    ap.add_argument("--venv", type=Path, default=Path("/var/tmp/trainvenv"))
    ap.add_argument("--trajectories", type=Path, default=TAU, help="tau-bench results JSON (or any importable file)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--max-length", type=int, default=2048)
    ap.add_argument("--val-fraction", type=float, default=VAL_FRACTION,
                    help="the share of the tasks exported as a validation split, whose loss each run measures "
                         "(0: no split, no validation loss)")
    ap.add_argument("--stage", choices=("all", "model", "check"), default="all", help=argparse.SUPPRESS)
    args = ap.parse_args()
    work = args.work.resolve()
    real, placebo = work / "exports" / "real", work / "exports" / "placebo"
    adapters = {"real": work / "adapters" / "real", "placebo": work / "adapters" / "placebo"}

    if args.stage == "model":
        build_model(work, real)
        return
    if args.stage == "check":
        fails = check_rendering(work / "model", real)
        fails += check_training(work / "model", adapters, real, args.max_length)
        for f in fails:
            print(f"FAILED {f}")
        print("smoke: all checks passed" if not fails else f"smoke: {len(fails)} checks failed")
        raise SystemExit(1 if fails else 0)

    if not args.trajectories.is_file():
        raise SystemExit(f"error: {args.trajectories}: no such file (pass --trajectories)")
    if not 0 <= args.val_fraction < 1:
        raise SystemExit(f"error: --val-fraction {args.val_fraction}: give a fraction from 0 (no split) to below 1")
    work.mkdir(parents=True, exist_ok=True)
    export(work, args.trajectories, args.val_fraction)
    fails = check_placebo(real, placebo)
    python = ensure_venv(args.venv)
    sh([python, "-c", "import torch, transformers, trl, peft, datasets; print('venv:', "
        "*(f'{m.__name__} {m.__version__}' for m in (torch, transformers, trl, peft, datasets)))"])
    sh([python, __file__, "--work", work, "--stage", "model"])
    # one torch thread unless told otherwise: the model is tiny, and on a busy 2-core machine torch's own threads
    # fought for the cores (a training step took 38 s at load ~15 with torch's default, 3.4 s with one)
    env = {"OMP_NUM_THREADS": "1", **os.environ, "TOKENIZERS_PARALLELISM": "false"}
    for name, data in (("real", real), ("placebo", placebo)):
        sh([python, HERE / "sft_lora.py", "--data", data, "--model", work / "model", "--out", adapters[name],
            "--cpu", "--max-steps", args.steps, "--batch", 1, "--grad-accum", 1, "--lr", "2e-2",
            "--max-length", args.max_length, "--logging-steps", 1], env=env)
    check = subprocess.run([str(c) for c in (python, __file__, "--work", work, "--max-length", args.max_length,
                                             "--stage", "check")], env=env)
    for f in fails:
        print(f"FAILED {f}")
    raise SystemExit(1 if fails or check.returncode else 0)


if __name__ == "__main__":
    main()
