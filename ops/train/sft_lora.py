"""Train a LoRA adapter on an evoharness export with TRL's SFTTrainer and PEFT.

UNTESTED RECIPE: written against TRL >= 0.19, PEFT >= 0.11, transformers >= 4.45 and not run in the
evoharness test suite (torch is not installed there). Only the data preparation below
(``load_examples``, ``check_export``) is covered by tests.

Input: a directory written by ``evoharness dataset export --format openai`` (``data.jsonl`` +
``manifest.json``). Each record is rendered with the model's own chat template
(``tokenizer.apply_chat_template(messages, tools=tools)``) and trained as text. Run the same command
on the placebo export (``--placebo``) for the control arm; compare both adapters and the base model
on held-out tasks (which no export contains).

    python ops/train/sft_lora.py --data exports/evolved --model Qwen/Qwen2.5-0.5B-Instruct \
        --out adapters/evolved [--epochs 2] [--lr 2e-4] [--rank 16] [--cpu]
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Iterator
from pathlib import Path


def check_export(data: Path) -> dict:
    """The export's manifest; refuses directories that are not an evoharness OpenAI export."""
    manifest = data / "manifest.json"
    if not (data / "data.jsonl").is_file() or not manifest.is_file():
        raise SystemExit(f"{data}: not an evoharness export (need data.jsonl and manifest.json)")
    m = json.loads(manifest.read_text())
    if m.get("format") != "openai":
        raise SystemExit(f"{data}: export format is {m.get('format')!r}; this recipe reads --format openai")
    if "heldout" in m.get("splits", {}):
        raise SystemExit(f"{data}: the manifest lists held-out records; refusing to train on them")
    return m


def load_examples(data: Path) -> Iterator[dict]:
    """``{"messages", "tools"}`` per record, exactly as exported (no Arrow schema merging)."""
    with (data / "data.jsonl").open() as fh:
        for line in fh:
            if line.strip():
                rec = json.loads(line)
                yield {"messages": rec["messages"], "tools": rec.get("tools") or None}


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
    ap.add_argument("--max-length", type=int, default=4096)
    ap.add_argument("--max-steps", type=int, default=-1, help="stop early (smoke runs)")
    ap.add_argument("--cpu", action="store_true", help="no GPU: fp32 on CPU (tiny models only)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    manifest = check_export(args.data)
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tok = AutoTokenizer.from_pretrained(args.model)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token

    def texts() -> Iterator[dict]:
        for ex in load_examples(args.data):
            yield {"text": tok.apply_chat_template(ex["messages"], tools=ex["tools"], tokenize=False)}

    train = Dataset.from_generator(texts)
    cfg = SFTConfig(
        output_dir=str(args.out), num_train_epochs=args.epochs, learning_rate=args.lr,
        per_device_train_batch_size=args.batch, gradient_accumulation_steps=args.grad_accum,
        max_length=args.max_length, max_steps=args.max_steps, dataset_text_field="text",
        lr_scheduler_type="cosine", warmup_ratio=0.03, logging_steps=10, save_strategy="epoch",
        bf16=not args.cpu, use_cpu=args.cpu, seed=args.seed, report_to="none",
    )
    lora = LoraConfig(r=args.rank, lora_alpha=args.alpha, lora_dropout=0.05, task_type="CAUSAL_LM",
                      target_modules="all-linear")
    trainer = SFTTrainer(model=args.model, args=cfg, train_dataset=train, processing_class=tok,
                         peft_config=lora)
    trainer.train()
    trainer.save_model(str(args.out))
    # the adapter carries the export's provenance (harness commits, placebo or not, counts)
    shutil.copy(args.data / "manifest.json", args.out / "evoharness-export-manifest.json")
    print(f"adapter written to {args.out} ({manifest['records']} records, placebo={manifest['placebo']})")


if __name__ == "__main__":
    main()
