"""Train a LoRA adapter on an evoharness export with TRL's SFTTrainer and PEFT.

Run on CPU with a tiny local model by ``ops/train/smoke.py`` (transformers 5.25, TRL 1.16, PEFT 0.21,
torch 2.13 CPU; see ops/train/README.md for what that run shows and does not). The data preparation
below (``check_export``, ``load_examples``, ``assistant_spans``, ``token_mask``, ``encode_export``) is
covered by tests/datasets/test_datasets_train_recipe.py, which needs no torch.

Input: a directory written by ``evoharness dataset export --format openai`` (``data.jsonl`` +
``manifest.json``). Each record is rendered with the model's own chat template
(``tokenizer.apply_chat_template(messages, tools=tools)``), tokenized here, and the loss is taken on
the assistant turns only (``--loss all`` for the whole conversation). Run the same command on the
placebo export (``--placebo``) for the control arm; compare both adapters and the base model on
held-out tasks (which no export contains).

    python ops/train/sft_lora.py --data exports/evolved --model Qwen/Qwen2.5-0.5B-Instruct \
        --out adapters/evolved [--epochs 2] [--lr 2e-4] [--rank 16] [--cpu]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path


def check_export(data: Path) -> dict:
    """The export's manifest; refuses directories that are not an evoharness OpenAI export.

    The other formats `dataset export` writes are refused, naming the command that writes the OpenAI export of
    the same trajectories: ShareGPT merges consecutive user turns and a turn's tool results and drops the call
    ids, and hf's Arrow rows add null fields to tool schemas (see `load_examples`), so neither reads back as the
    conversations that were exported."""
    manifest = data / "manifest.json"
    if not manifest.is_file():
        raise SystemExit(f"{data}: not an evoharness export (need data.jsonl and manifest.json)")
    try:
        m = json.loads(manifest.read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(f"{manifest}: not a readable export manifest ({e})") from None
    if not isinstance(m, dict):
        raise SystemExit(f"{manifest}: not a readable export manifest (a JSON object)")
    if m.get("format") != "openai":  # an hf export has a manifest but no data.jsonl: say which format it is
        what = f"a --format {m['format']} export" if m.get("format") else "its manifest names no export format"
        raise SystemExit(f"{data}: {what}; this recipe reads --format openai only: export the same trajectories "
                         "again with `evoharness dataset export ... --format openai` (the default)")
    if not (data / train_file(m)).is_file():
        raise SystemExit(f"{data}: not an evoharness export (need {train_file(m)} and manifest.json)")
    splits = m.get("splits") or {}
    if not isinstance(splits, (dict, list)):
        raise SystemExit(f"{manifest}: not a readable export manifest (splits: {splits!r}, not a list or object)")
    if "heldout" in splits:
        raise SystemExit(f"{data}: the manifest lists held-out records; refusing to train on them")
    return m


def train_file(manifest: dict) -> str:
    """The export's file to train on: ``data.jsonl``, or the ``train`` split's file (``train.jsonl``) of an export
    with a validation split (``--val-fraction``: its manifest's ``validation.files``); until 2026-12-06 a
    split export was refused as "not an evoharness export (need data.jsonl ...)"."""
    return _split_file(manifest, "train") or "data.jsonl"


def validation_file(manifest: dict) -> str | None:
    """The ``validation`` split's file of an export with a validation split (``validation.jsonl``), which the run
    evaluates on after each epoch (its tasks are in no training record); None without a split."""
    return _split_file(manifest, "validation")


def _split_file(manifest: dict, part: str) -> str | None:
    files = (manifest.get("validation") or {}).get("files") if isinstance(manifest.get("validation"), dict) else None
    name = files.get(part) if isinstance(files, dict) else None
    return name if isinstance(name, str) and "/" not in name and name.endswith(".jsonl") else None


def load_examples(data: Path, file: str = "data.jsonl") -> Iterator[dict]:
    """``{"messages", "tools"}`` per record, as exported except each tool call's ``arguments``.

    Read line by line, not through an Arrow schema (which would add ``null`` fields to tool schemas and
    to the arguments of calls that lack another call's keys). The export writes ``arguments`` as the
    OpenAI format wants, a JSON text; chat templates take it as an object (transformers' tool-use
    format) and write it with ``tojson``, so a text would reach the model JSON-encoded twice
    (``"{\\"user_id\\": ...}"``). Here it is parsed back into the object.
    """
    with (data / file).open() as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                rec = json.loads(line)
                messages = [_with_parsed_arguments(m, data / file, n) for m in rec["messages"]]
                yield {"messages": messages, "tools": rec.get("tools") or None}


def _with_parsed_arguments(message: dict, data: Path, line: int) -> dict:
    if not message.get("tool_calls"):
        return message
    calls = []
    for call in message["tool_calls"]:
        fn = call["function"]
        args = fn.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError as e:
                raise SystemExit(f"{data} line {line}: tool call {call.get('id')!r}: "
                                 f"arguments are not JSON ({e.msg})") from None
        calls.append({**call, "function": {**fn, "arguments": args}})
    return {**message, "tool_calls": calls}


class TemplateError(SystemExit):
    """The chat template does not render a conversation as the sum of its turns."""


Render = Callable[[list[dict], bool], str]


def assistant_spans(render: Render, messages: list[dict]) -> tuple[str, list[tuple[int, int]]]:
    """The rendered conversation and the ``[start, end)`` character spans of its assistant turns.

    ``render(messages, add_generation_prompt)`` is the model's chat template with the record's tools.
    An assistant turn's span is what the template writes for it after the prompt that asks for it
    (the generation prompt), up to and with its end-of-turn marker: the tokens the model must learn to
    produce. This needs a template that renders a prefix of a conversation as a prefix of its text;
    one that does not (one that rewrites earlier turns, as templates dropping past reasoning do) is a
    ``TemplateError`` naming the turn, never a silent mask on the wrong tokens.
    """
    text = render(messages, False)
    spans = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prompt, turn = render(messages[:i], True), render(messages[: i + 1], False)
        if not turn.startswith(prompt) or not text.startswith(turn):
            raise TemplateError(f"message {i}: the chat template does not render this conversation as its turns "
                                "one after another; assistant turns cannot be told apart (use --loss all)")
        spans.append((len(prompt), len(turn)))
    return text, spans


def token_mask(offsets: list[tuple[int, int]], spans: list[tuple[int, int]]) -> list[int]:
    """1 for each token whose characters (``offsets``, from a fast tokenizer) fall in a span, else 0."""
    mask, k = [], 0
    for start, end in offsets:
        while k < len(spans) and spans[k][1] <= start:
            k += 1
        inside = k < len(spans) and spans[k][0] < max(end, start + 1) and start < spans[k][1]
        mask.append(int(inside))
    return mask


def encode_export(tok, data: Path, loss: str, counts: dict, file: str = "data.jsonl") -> Iterator[dict]:
    """``{"input_ids", "assistant_masks"}`` per record of the export, rendered with ``tok``'s chat template.

    ``tok`` is a fast tokenizer (``apply_chat_template``, offsets); ``loss`` is ``assistant`` (mask the
    assistant turns) or ``all`` (every token). ``counts`` gets the records and tokens, and the tokens in the
    loss before truncation. A template that cannot tell the turns apart is a ``TemplateError`` naming the record.
    """
    for n, ex in enumerate(load_examples(data, file), 1):
        def render(messages: list[dict], generation_prompt: bool, tools=ex["tools"]) -> str:
            return tok.apply_chat_template(messages, tools=tools, tokenize=False,
                                           add_generation_prompt=generation_prompt)

        if loss == "assistant":
            try:
                text, spans = assistant_spans(render, ex["messages"])
            except TemplateError as e:
                raise TemplateError(f"{data}/{file} record {n}, {e.code}") from None
        else:
            text, spans = render(ex["messages"], False), None
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        mask = [1] * len(enc["input_ids"]) if spans is None else token_mask(enc["offset_mapping"], spans)
        counts["records"] += 1
        counts["tokens"] += len(mask)
        counts["assistant_tokens"] += sum(mask)
        yield {"input_ids": enc["input_ids"], "assistant_masks": mask}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True, help="export directory (--format openai)")
    ap.add_argument("--model", required=True, help="base model id or local path")
    ap.add_argument("--out", type=Path, required=True, help="where the adapter goes")
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--alpha", type=int, default=32)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--grad-accum", type=int, default=4)
    ap.add_argument("--max-length", type=int, default=4096,
                    help="tokens kept of each record (its start); a record with no assistant token left is dropped")
    ap.add_argument("--max-steps", type=int, default=-1, help="stop early (smoke runs)")
    ap.add_argument("--loss", choices=("assistant", "all"), default="assistant",
                    help="tokens the loss is taken on: the assistant turns (default) or the whole conversation")
    ap.add_argument("--logging-steps", type=int, default=10)
    ap.add_argument("--cpu", action="store_true", help="no GPU: fp32 on CPU (tiny models only)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    manifest = check_export(args.data)
    import dataclasses

    try:
        import peft
        import torch
        import transformers
        import trl
        from datasets import Dataset
        from peft import LoraConfig
        from transformers import AutoTokenizer
        from trl import SFTConfig, SFTTrainer
    except ImportError as e:  # run with evoharness's own venv, which holds none of them
        raise SystemExit(f"{e.name or e}: not installed; this recipe needs ops/train/requirements.txt "
                         "(torch, transformers, trl, peft, datasets, accelerate), in a venv of its own: "
                         "pip install -r ops/train/requirements.txt") from None

    try:
        tok = AutoTokenizer.from_pretrained(args.model)
    except (OSError, ValueError) as e:  # a mistyped path, a hub id with no network: transformers' message
        first = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
        raise SystemExit(f"{args.model}: cannot load its tokenizer: {first}") from None
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if not tok.is_fast:
        raise SystemExit(f"{args.model}: a fast tokenizer is needed (token offsets tell the assistant turns apart)")
    counts = {"records": 0, "tokens": 0, "assistant_tokens": 0}
    val_counts = {"records": 0, "tokens": 0, "assistant_tokens": 0}
    val_file = validation_file(manifest)
    if val_file is not None and not (args.data / val_file).is_file():
        raise SystemExit(f"{args.data}: the manifest names a validation split {val_file}, which is not there")
    if val_file is not None:
        print(f"a split export: training on {train_file(manifest)}, evaluating on {val_file} after each epoch "
              "(eval_loss: the loss on the validation tasks' assistant turns)")

    def rows() -> Iterator[dict]:
        yield from encode_export(tok, args.data, args.loss, counts, train_file(manifest))

    def val_rows() -> Iterator[dict]:
        yield from encode_export(tok, args.data, args.loss, val_counts, val_file)

    # warmup_ratio went in transformers 5: a warmup_steps below 1 is the ratio there
    fields = {f.name for f in dataclasses.fields(SFTConfig)}
    warmup = {"warmup_ratio": 0.03} if "warmup_ratio" in fields else {"warmup_steps": 0.03}
    with tempfile.TemporaryDirectory(prefix="sft-dataset-") as cache:
        # a cache of its own: datasets keys its cache on the arguments, not on data.jsonl's content
        train = Dataset.from_generator(rows, cache_dir=cache)
        # the validation split (its tasks in no training record), or none: an empty split gives no evaluation
        evaluate = Dataset.from_generator(val_rows, cache_dir=cache) if val_file is not None else None
        if evaluate is not None and len(evaluate) == 0:
            print(f"{val_file} holds no record: no evaluation")
            evaluate = None
        cfg = SFTConfig(
            output_dir=str(args.out), num_train_epochs=args.epochs, learning_rate=args.lr,
            per_device_train_batch_size=args.batch, gradient_accumulation_steps=args.grad_accum,
            max_length=args.max_length, max_steps=args.max_steps, lr_scheduler_type="cosine",
            logging_steps=args.logging_steps, save_strategy="epoch", bf16=not args.cpu, use_cpu=args.cpu,
            seed=args.seed, report_to="none", **warmup,
            **({"eval_strategy": "epoch", "per_device_eval_batch_size": args.batch} if evaluate is not None else {}),
        )
        lora = LoraConfig(r=args.rank, lora_alpha=args.alpha, lora_dropout=0.05, task_type="CAUSAL_LM",
                          target_modules="all-linear")
        trainer = SFTTrainer(model=args.model, args=cfg, train_dataset=train, eval_dataset=evaluate,
                             processing_class=tok, peft_config=lora)
        kept = trainer.train_dataset
        trained = {"records": len(kept), "tokens": sum(len(x) for x in kept["labels"]),
                   "loss_tokens": sum(t != -100 for x in kept["labels"] for t in x)}
        share = trained["loss_tokens"] / max(trained["tokens"], 1)
        print(f"records: {counts['records']} rendered, {trained['records']} trained "
              f"({counts['records'] - trained['records']} dropped: no assistant token within --max-length "
              f"{args.max_length}); loss on {trained['loss_tokens']:,} of {trained['tokens']:,} tokens "
              f"({share:.1%}, --loss {args.loss}); before truncation {counts['assistant_tokens']:,} of "
              f"{counts['tokens']:,}")
        if not trained["records"]:  # TRL's sampler stopped with 'num_samples should be a positive integer value'
            raise SystemExit(f"no record has an assistant token within --max-length {args.max_length} (each is cut "
                             "there, and a long system prompt and tool list fill the window): raise --max-length; "
                             "the export's manifest.json gives its records' token lengths (token_lengths)")
        if evaluate is not None and not len(trainer.eval_dataset):
            raise SystemExit(f"no record of {val_file} has an assistant token within --max-length {args.max_length}: "
                             "no eval_loss could be measured; raise --max-length")
        trainer.train()
        trainer.save_model(str(args.out))
        final = trainer.evaluate() if evaluate is not None else None  # also when --max-steps ends before an epoch
        if final is not None:
            print(f"eval_loss {final.get('eval_loss')} on {len(evaluate)} records of {val_file}")
    # the adapter carries the export's provenance (harness commits, placebo or not, counts) and its run
    shutil.copy(args.data / "manifest.json", args.out / "evoharness-export-manifest.json")
    log = {
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__,
                     "peft": peft.__version__},
        "loss": args.loss, "max_length": args.max_length, "rendered": counts, "trained": trained,
        "validation": {"file": val_file, "rendered": val_counts, "eval": final} if val_file is not None else None,
        "log_history": trainer.state.log_history,
    }
    (args.out / "evoharness-train-log.json").write_text(json.dumps(log, indent=1))
    print(f"adapter written to {args.out} ({manifest.get('records')} records, placebo={manifest.get('placebo')})")


if __name__ == "__main__":
    try:
        main()
    except SystemExit as e:  # the refusals above: one error line, exit 2 (argparse's own exit 2 passes through)
        if not isinstance(e.code, str):
            raise
        print(f"error: {e.code}", file=sys.stderr)
        raise SystemExit(2) from None
