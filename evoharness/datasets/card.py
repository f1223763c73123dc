"""The dataset card (README.md, with Hugging Face front matter) and manifest.json of an export."""

from __future__ import annotations

from pathlib import Path

from evoharness.cli_support import counted

from .env_tools import MAX_ENVS
from .export_formats import EXPORT_FORMATS
from .models import ExportSummary

_PLACEBO_NOTE = (
    "**This is a placebo control set.** Every record keeps its system prompt and user turns, but its "
    "assistant turns (each with the tool results that answer it) were permuted across records, within "
    "their kind (tool-calling turns among tool-calling turns, replies among replies). Train on it only "
    "as the control arm of an experiment: an adapter trained on it should not beat the base model."
)


def _table(title: str, counts: dict[str, int], limit: int = 25) -> list[str]:
    if not counts:
        return [f"**{title}:** none", ""]
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    lines = [f"**{title}** ({len(counts)}):", "", "| value | records |", "|---|---:|"]
    lines += [f"| `{k}` | {v} |" for k, v in rows[:limit]]
    if len(rows) > limit:
        lines.append(f"| ... {len(rows) - limit} more | {sum(v for _, v in rows[limit:])} |")
    return [*lines, ""]


def _duplicates(s: ExportSummary) -> str:
    if not s.duplicate_records:
        return "none (no record is identical to an earlier one)"
    what = (f"{s.duplicate_records} records are identical to an earlier one (messages and tools, system message "
            "included)")
    if s.duplicates_kept:
        return f"{what}; kept (`--keep-duplicates`)"
    return f"{what}; dropped (`--keep-duplicates` keeps them)"


def _split_line(s: ExportSummary) -> str:
    v = s.validation
    return (f"- **Validation split:** by task, no task in both: {len(v.tasks)} of the {v.tasks_considered} tasks with "
            f"a record to write (fraction {v.fraction}, seed {v.seed}) are validation tasks; "
            f"{v.records.get('validation', 0)} records of {v.tasks_written.get('validation', 0)} tasks in "
            f"`{v.files['validation']}`, {v.records.get('train', 0)} records of {v.tasks_written.get('train', 0)} "
            f"tasks in `{v.files['train']}`. Held-out tasks are in neither."
            + (f" {sum(map(len, v.linked_tasks))} tasks in {len(v.linked_tasks)} groups went to one side together: a "
               "run of each is the same conversation (system message and user turns) or simulated-user instruction "
               "as a run of another task id of its group "
               f"({', '.join('/'.join(g) for g in v.linked_tasks[:3])}{' ...' if len(v.linked_tasks) > 3 else ''})."
               if v.linked_tasks else ""))


def _linked_held(tasks: list[str]) -> str:
    if not tasks:
        return ""
    return (f" {len(tasks)} of those tasks are held out because a run of each is a held-out task's under another id "
            f"(the same conversation or simulated-user instruction): {', '.join(tasks[:5])}"
            f"{' ...' if len(tasks) > 5 else ''}.")


def token_line(s: ExportSummary) -> str | None:
    """``train 180 records: min 2,392, median 4,985, p95 9,023, max 10,985 tokens; validation ...``: what a
    fine-tuning run's max_seq_length is compared with (None: no lengths, an export from before them)."""
    t = s.token_lengths
    if t is None:
        return None
    parts = []
    for split, v in t.splits.items():
        if not v.get("records"):
            parts.append(f"{split} no records")
            continue
        parts.append(f"{split} {v['records']:,} records: min {v['min']:,}, median {v['median']:,}, p95 {v['p95']:,}, "
                     f"max {v['max']:,} tokens" + (f" ({v['over_max_tokens']} over --max-tokens {t.max_tokens}: "
                                                   "permuted placebo turns)" if v.get("over_max_tokens") else ""))
    return "; ".join(parts)


def _tokens(s: ExportSummary) -> str:
    t = s.token_lengths
    over = s.skipped.get("over_max_tokens", 0)
    broken = s.skipped.get("chat_template_error", 0)
    return (f"- **Token lengths** ({t.method}): {token_line(s)}."
            + (f" Records longer than {t.max_tokens} tokens were skipped whole, never cut (`--max-tokens`): {over}."
               if t.max_tokens is not None else " Compare the max with your trainer's max_seq_length: a longer record "
               "is cut there (`--max-tokens N` skips such records whole instead).")
            + (f" {broken} records were skipped: the tokenizer's chat template cannot render them "
               f"(`chat_template_error`; the first: {t.template_error})" if broken else "")
            + (" The lengths are an estimate meant to lie above the count of most tokenizers (docs/datasets.md); "
               "`--tokenizer DIR` counts with the base model's own." if not t.exact else ""))


def render_card(s: ExportSummary) -> str:
    data_files = [f for f in s.files if f.endswith((".jsonl", ".parquet")) and "metadata" not in f]
    tags = ["evoharness", "sft", "tool-use", "agent-trajectories"] + (["placebo"] if s.placebo else [])
    front = ["---", "configs:", "- config_name: default", "  data_files:"]
    if s.validation is not None:  # `load_dataset(DIR)` gives both splits
        front += [f"  - split: {part}\n    path: {f}" for part, f in s.validation.files.items()]
    else:
        front += [f"  - split: train\n    path: {f}" for f in data_files]
    front += ["tags:"] + [f"- {t}" for t in tags] + ["---", ""]
    how = EXPORT_FORMATS.get(s.format.value).card
    p = s.prompt
    if p.under == "trajectory":
        prompt = "each trajectory's own system message (no harness given)"
    else:
        prompt = f"`{p.under}` harness prompt: `{p.repo}` at `{p.commit}` ({p.rev})"
    f = s.filters
    lines = [
        *front,
        f"# evoharness training set{' (placebo)' if s.placebo else ''}",
        "",
        *([_PLACEBO_NOTE, ""] if s.placebo else []),
        f"- **Records:** {s.records}",
        f"- **Format:** `{s.format.value}`: {how}",
        f"- **Files:** {', '.join(f'`{x}`' for x in s.files)}",
        f"- **Source:** `{s.source.value}`",
        f"- **System prompt rendered under:** {prompt}"
        + (f"; {counted(s.prompt_fallbacks, 'record')} fell back to the raw template plus lessons"
           if s.prompt_fallbacks else "")
        + (f" ({counted(s.prompt_limit_hits, 'render')} hit the render process's memory, CPU or wall limit)"
           if s.prompt_limit_hits else "")
        + (f"; the render process ran without its bubblewrap jail ({s.prompt_render_unjailed}), its memory, CPU "
           "and wall limits only" if s.prompt_render_unjailed else ""),
        f"- **Placebo:** {'yes, seed ' + str(s.placebo_seed) if s.placebo else 'no'}"
        + (f" ({s.placebo_units_kept_in_place} assistant units could not leave their record)"
           if s.placebo and s.placebo_units_kept_in_place else ""),
        f"- **Filters:** min score {f.min_score if f.min_score is not None else '-'}, "
        f"max per task {f.max_per_task or '-'}, splits {[x.value for x in f.splits] if f.splits else 'any'}, "
        f"tasks {f.tasks or 'any'}, classes {[x.value for x in f.classes] if f.classes else 'any'}"
        + (", records with a reply of text and tool calls skipped (`--skip-text-with-calls`)"
           if f.skip_text_with_calls else "")
        + (f", records over {f.max_tokens} tokens skipped (`--max-tokens`)" if f.max_tokens is not None else ""),
        f"- **Held-out tasks:** never exported; {s.heldout_tasks_excluded} trajectories of held-out tasks "
        f"were excluded.{_linked_held(s.heldout_linked_tasks)}",
        f"- **Duplicates:** {_duplicates(s)}",
        *([_split_line(s)] if s.validation is not None else []),
        *([_tokens(s)] if s.token_lengths is not None else []),
        *([f"- **Text beside tool calls:** {s.sharegpt_text_with_calls} records hold an assistant turn with text "
            "and tool calls, written as a `function_call` turn `TEXT<tool_call>CALLS</tool_call>`: LLaMA-Factory "
            "(0.9.5) trains on the text followed by the calls in its template's tool format, with a template that "
            "passes its tool-call words (not `gemma*`, `llama2*`, `lfm2*`: `--skip-text-with-calls` leaves these "
            "records out; docs/datasets.md)"]
          if s.sharegpt_text_with_calls else []),
        *([f"- **Unreadable tool calls:** {s.sharegpt_calls_unreadable} records hold a `function_call` turn whose "
            "text holds `<tool_call>` or whose calls hold `</tool_call>`, which LLaMA-Factory cannot read back as "
            "written: drop those rows for LLaMA-Factory (`evoharness dataset validate` names them)"]
          if s.sharegpt_calls_unreadable else []),
        *([f"- **Tool declarations:** {s.env_tools_past_limit} records name an environment past the "
            f"{MAX_ENVS} distinct ones an export builds; their undeclared tools are inferred from the calls "
            "(empty description)"] if s.env_tools_past_limit else []),
        f"- **Created:** {s.created_at.isoformat()}",
        "",
        "## Provenance",
        "",
        *_table("Composition (failure class)", s.classes),
        *_table("Harness commits the trajectories were collected under", s.harness_commits),
        *_table("Models", s.models),
        *_table("Environments", s.envs),
        *_table("Splits", s.splits),
        *_table("Tasks", s.tasks),
        *(_table("Validation tasks", {t: s.tasks.get(t, 0) for t in s.validation.tasks})
          if s.validation is not None else []),
        *_table("Skipped (reason)", s.skipped),
        "Machine-readable: `manifest.json`.",
        "",
    ]
    return "\n".join(lines)


def write_card(out: Path, s: ExportSummary) -> None:
    if "README.md" not in s.files:
        s.files = [*s.files, "README.md", "manifest.json"]
    (out / "README.md").write_text(render_card(s))
    (out / "manifest.json").write_text(s.model_dump_json(indent=2) + "\n")
