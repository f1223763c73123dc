"""`evoharness dataset ...`: the training queue and dataset exports."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from evoharness.cli_support import counted, fail, output_dir, settings_of
from evoharness.errors import NOT_A_REGULAR_FILE, InputError, not_a_file_reason

dataset_app = typer.Typer(help="The training-dataset queue and exports for weight training.",
                          no_args_is_help=True)


def _require_records(path: Path, what: str) -> None:
    """An input with no record (empty, or blank lines only) is an error, as for `diagnose` and `import`:
    "0 records, all valid" or "0 newly queued" read as success and hid a wrong or truncated file."""
    from evoharness.traces.store import jsonl_lines

    if path.is_file() and next(iter(jsonl_lines(path)), None) is None:
        raise InputError(str(path), f"empty file, no {what}")


def _trajectory_file(home: Path, text: str) -> Path:
    """The trajectory file ``--trajectories`` names. A run id under ``<home>/runs``, a run directory or a demo
    directory is its run's ``trajectories.jsonl`` (``run_dirs.run_or_path``, then ``run_dirs.trajectory_file``, as
    ``JsonlSource`` reads a directory and `diagnose` and `export-otel` read one; a bare name that is both a run and a
    file here is one error asking for a path); anything else is the path as given, for ``JsonlSource`` to read or
    refuse. Until the twenty-third session a run id was 'trajectory file not found' and a run directory 'is a
    directory, not a trajectory file'."""
    from evoharness.run_dirs import run_or_path, trajectory_file

    read = run_or_path(home, text)
    return trajectory_file(read, text)


def _queue(ctx: typer.Context, url: str | None, *, create: bool = True):
    """The queue at --url, else the configured one (``datasets.url``, or the SQLite file under ``home``).
    ``create=False``: an existing queue only (see ``TrainingQueue``)."""
    from .queue import TrainingQueue, queue_from_settings

    return TrainingQueue(url, create=create) if url else queue_from_settings(settings_of(ctx), create=create)


def _no_default_queue_yet(ctx: typer.Context, url: str | None) -> Path | None:
    """The default SQLite queue file when none was configured and it does not exist yet (nothing enqueued)."""
    from .urls import default_url  # not from .queue: that imports SQLAlchemy, which no queue yet needs

    settings = settings_of(ctx)
    if url or settings.datasets.url:
        return None
    path = Path(default_url(settings.home).removeprefix("sqlite:///"))
    return None if path.exists() else path


@dataset_app.command("status")
def status(
    ctx: typer.Context,
    url: Annotated[str | None, typer.Option(help="queue URL (default: datasets.url)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Show the training queue by failure class, task and run."""
    missing = _no_default_queue_yet(ctx, url)
    if missing is not None:  # a fresh home: nothing enqueued yet (status creates nothing)
        if as_json:
            typer.echo(json.dumps({"total": 0, "by_class": {}, "by_task": {}, "by_run": {}, "by_split": {}}, indent=2))
        else:
            typer.echo(f"training queue: 0 items (none yet: the first enqueue creates {missing})")
        return
    s = _queue(ctx, url, create=False).status()
    if as_json:
        typer.echo(json.dumps(s, indent=2))
        return
    typer.echo(f"training queue: {s['total']} items")
    for key, title in (("by_class", "class"), ("by_run", "run"), ("by_split", "split"), ("by_task", "task")):
        if not s[key]:
            continue
        typer.echo(f"\nby {title}:")
        rows = sorted(s[key].items(), key=lambda kv: (-kv[1], kv[0]))
        for name, n in rows[:30]:
            typer.echo(f"  {name:<40} {n:>7}")
        if len(rows) > 30:
            typer.echo(f"  ... {len(rows) - 30} more")


@dataset_app.command("enqueue")
def enqueue(
    ctx: typer.Context,
    trajectories_arg: Annotated[str, typer.Argument(
        metavar="<path>|<run-id>", help="canonical trajectory JSONL, or a run id under <home>/runs, a run directory or "
                                        "a demo directory (its run's trajectories.jsonl)")],
    run_id: Annotated[str | None, typer.Option("--run-id", help="run the trajectories came from (default: the run's "
                                                                "id when a run is named, else none)")]
    = None,
    round_: Annotated[int | None, typer.Option("--round", help="round of that run, 0 to 10,000 (default: none)")]
    = None,
    url: Annotated[str | None, typer.Option(help="queue URL (default: datasets.url)")] = None,
) -> None:
    """Label trajectories and queue the content failures (lever weights); others are left out."""
    from evoharness.cli_support import MAX_ROUNDS, check_range, no_stdin
    from evoharness.diagnosis.labeller import Labeller
    from evoharness.diagnosis.models import Lever

    from .export import JsonlSource

    check_range(round_, "--round", 0, MAX_ROUNDS)
    no_stdin(Path(trajectories_arg), "dataset enqueue")
    from .queue import check_reachable, check_url, default_url

    settings = settings_of(ctx)
    check_url(url or settings.datasets.url or default_url(settings.home))  # before any input is read
    check_reachable(url or settings.datasets.url or default_url(settings.home))  # a Postgres server: connect
    # a run id or directory is its run's trajectories.jsonl, as for `dataset export -t` (until the twenty-fourth
    # session a run id was "trajectory file not found"); its items are that run's unless --run-id says otherwise (a
    # directory `import --out` wrote is read the same way, but it is no run: no settings.json)
    trajectories = _trajectory_file(settings.home, trajectories_arg)
    if run_id is None and trajectories != Path(trajectories_arg) and (trajectories.parent / "settings.json").is_file():
        run_id = trajectories.parent.name
    source = JsonlSource(trajectories)
    _require_records(trajectories, "trajectories to enqueue")
    labeller = Labeller(settings_of(ctx).diagnosis)
    q = None  # opened at the first content failure (or at the end): a file that fails before creates no queue
    added = seen = content = 0
    for t in source:
        seen += 1
        label = labeller.label(t)
        if label.lever != Lever.weights:
            continue
        content += 1
        if q is None:
            q = _queue(ctx, url)
        added += q.enqueue(t, label, run_id=run_id, round=round_, labeller_fingerprint=labeller.fingerprint)
    if q is None:
        q = _queue(ctx, url)
    typer.echo(f"{counted(seen, 'trajectory', 'trajectories')}, {counted(content, 'content failure')}, {added} newly "
               f"queued ({len(q)} in queue)")
    if q.conflicts:  # not queued, and not the same run sent again: said, never counted as already queued
        shown = ", ".join(repr(i) for i in q.conflicts[:5]) + (", ..." if len(q.conflicts) > 5 else "")
        typer.echo(f"warning: {counted(len(q.conflicts), 'trajectory', 'trajectories')} not queued: the queue holds "
                   f"the same id with other content ({shown}); give them new ids to queue them", err=True)


def _filters(min_score, max_per_task, split, task, failure_class, skip_text_with_calls=False, max_tokens=None):
    from evoharness.diagnosis.models import FailureClass
    from evoharness.traces.models import Split

    from .models import ExportFilters

    for option, values, kind in (("--split", split, Split), ("--class", failure_class, FailureClass)):
        for x in values or ():
            if x not in kind._value2member_map_:  # the option and every value it takes, not "'F9' is not a valid ..."
                raise InputError(option, f"{x!r} is not one of {' | '.join(kind._value2member_map_)}")
    try:
        return ExportFilters(
            min_score=min_score, max_per_task=max_per_task,
            splits=[Split(x) for x in split] if split else None, tasks=list(task) if task else None,
            classes=[FailureClass(x) for x in failure_class] if failure_class else None,
            skip_text_with_calls=skip_text_with_calls, max_tokens=max_tokens)
    except ValidationError as e:  # the option and what is wrong with its value, not "1 validation error for ..."
        first = e.errors()[0]
        option = {"min_score": "--min-score", "max_per_task": "--max-per-task", "tasks": "--task",
                  "max_tokens": "--max-tokens"}.get(
            str(first["loc"][0]), str(first["loc"][0]))
        if first["type"] == "task_id_not_utf8":  # the message names the value
            raise InputError(option, first["msg"]) from None
        raise InputError(option, f"{first['msg']} (got {first.get('input')!r})") from None
    except ValueError as e:
        raise InputError("dataset export", str(e).splitlines()[0]) from None


@dataset_app.command("export")
def export(
    ctx: typer.Context,
    out: Annotated[Path, typer.Option("--out", "-o", parser=output_dir, metavar="<path>", help="output directory")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="openai | hf | sharegpt")] = "openai",
    source: Annotated[str, typer.Option(help="healthy | queue | all")] = "healthy",
    trajectories_arg: Annotated[str | None, typer.Option(
        "--trajectories", "-t", metavar="<path>|<run-id>",
        help="canonical trajectory JSONL, or a run id under <home>/runs, a run directory or a demo directory (its "
             "run's trajectories.jsonl; required for --source healthy / all)")] = None,
    harness: Annotated[str | None, typer.Option(
        help="harness repo DIR or DIR@REV whose system prompt the records get (default: none, each "
             "record keeps its trajectory's own system message)")] = None,
    render_under: Annotated[str, typer.Option(help="seed (root commit) | evolved (main's head)")] = "evolved",
    placebo: Annotated[bool, typer.Option("--placebo", help="write the placebo control set")] = False,
    min_score: Annotated[float | None, typer.Option(
        help="drop unscored and lower-scored (default: none, every score kept)")] = None,
    max_per_task: Annotated[int | None, typer.Option(help="at most N records per task (default: no limit)")] = None,
    split: Annotated[list[str] | None, typer.Option(
        help="admit only this split, dev | unknown; repeatable (default: both)")] = None,
    task: Annotated[list[str] | None, typer.Option(
        help="admit only this task id; repeatable (default: every task)")] = None,
    failure_class: Annotated[list[str] | None, typer.Option(
        "--class", help="admit only this failure class, healthy | F1..F4 | E | unknown; repeatable (default: every "
                    "class the source holds)")] = None,
    url: Annotated[str | None, typer.Option(help="queue URL (default: datasets.url)")] = None,
    labels: Annotated[Path | None, typer.Option(
        "--labels", help="labels JSONL that `evoharness label` wrote for --trajectories: a label is used instead "
                         "of labelling again when its digest and labeller fingerprint say it is this trajectory "
                         "line's and this labeller's (default: none, the trajectories are labelled)")] = None,
    val_fraction: Annotated[float | None, typer.Option(
        "--val-fraction", help="write a train and a validation split by task, this fraction of the tasks (0 < F < 1) "
                               "in validation, no task in both (default: no split, one data file)")] = None,
    split_seed: Annotated[int | None, typer.Option(
        "--split-seed", help="which tasks --val-fraction takes (default: 0; the same tasks and seed give the same "
                             "split)")] = None,
    keep_duplicates: Annotated[bool, typer.Option(
        "--keep-duplicates", help="write a record identical to an earlier one (default: skipped, counted in the "
                                  "card as duplicate_record)")] = False,
    skip_text_with_calls: Annotated[bool, typer.Option(
        "--skip-text-with-calls", help="skip a record with an assistant reply that holds text and tool calls, which "
                                       "some chat templates cannot read (LLaMA-Factory's gemma*, llama2*, lfm2*) or "
                                       "write without the text (Llama 3.1, Mistral v3); counted as text_with_calls "
                                       "(default: written)")] = False,
    max_tokens: Annotated[int | None, typer.Option(
        "--max-tokens", help="skip a record longer than N tokens (your trainer's max_seq_length), whole, never cut; "
                             "counted as over_max_tokens (default: none skipped; the card gives the lengths)")] = None,
    tokenizer: Annotated[Path | None, typer.Option(
        "--tokenizer", help="a local Hugging Face tokenizer directory (the base model's: tokenizer.json and its "
                            "chat template) to count tokens with, as the trainer renders a record; needs transformers "
                            "(default: datasets.tokenizer, else approximate, UTF-8 bytes / 3)")] = None,
) -> None:
    """Export a training set (data, README.md dataset card, manifest.json) into --out."""
    from .card import token_line
    from .env_tools import MAX_ENVS
    from .export import JsonlSource, export_dataset
    from .export_formats import EXPORT_FORMATS
    from .models import ExportFormat, SourceKind
    from .prompts import resolve_prompt

    settings = settings_of(ctx)
    trajectories = None if trajectories_arg is None else Path(trajectories_arg)  # as typed: a run id is resolved below
    if fmt not in EXPORT_FORMATS:
        fail(f"unknown export format {fmt!r} (valid: {', '.join(EXPORT_FORMATS.names())})")
    try:
        fmt_, source_ = ExportFormat(fmt), SourceKind(source)
    except ValueError as e:
        fail(f"{e} (sources: healthy | queue | all)")
    if render_under not in ("seed", "evolved"):
        fail(f"--render-under must be seed or evolved, got {render_under!r}")
    filters = _filters(min_score, max_per_task, split, task, failure_class, skip_text_with_calls, max_tokens)
    counter = None
    if tokenizer is not None or settings.datasets.tokenizer is not None:
        from .tokens import ChatTemplateTokens

        # loaded before anything is read: a bad directory is one line
        counter = (ChatTemplateTokens(tokenizer) if tokenizer is not None
                   else ChatTemplateTokens(settings.datasets.tokenizer, option="datasets.tokenizer"))
    if source_ != SourceKind.queue and trajectories is None:
        fail(f"--source {source_.value} needs --trajectories FILE.jsonl")
    # an option the source would ignore: the export came out of another source than the one named, said nowhere
    if trajectories is not None and source_ == SourceKind.queue:
        fail(f"--trajectories {trajectories}: --source queue exports the training queue only; --source all exports "
             "the file and the queue")
    if url is not None and source_ == SourceKind.healthy:
        fail("--url (a queue URL, not echoed: it may hold a password): --source healthy reads no queue, only "
             "--trajectories; --source all exports the file and the queue")
    if labels is not None and (source_ == SourceKind.queue or not labels.is_file()):
        fail(f"--labels {labels}: " + (
            "labels go with --trajectories (--source healthy / all)" if source_ == SourceKind.queue
            else f"{NOT_A_REGULAR_FILE}; the labels are read in step with the trajectories, so write them to a "
                 "file with `evoharness label FILE --out LABELS`" if labels.exists() and not labels.is_dir()
            else not_a_file_reason(labels, "labels file")))
    if split_seed is not None and val_fraction is None:
        fail(f"--split-seed {split_seed}: it chooses the tasks of --val-fraction, which was not given")
    if val_fraction is not None and not 0 < val_fraction < 1:
        fail(f"--val-fraction {val_fraction}: must lie between 0 and 1 (exclusive), the fraction of the tasks "
             "that goes to validation")
    if trajectories_arg is not None and source_ != SourceKind.queue:
        trajectories = _trajectory_file(settings.home, trajectories_arg)
        _require_records(trajectories, "trajectories to export")
    cfg = settings.datasets
    queue = None
    if source_ != SourceKind.healthy:
        if (missing := _no_default_queue_yet(ctx, url)) is None:
            queue = _queue(ctx, url, create=url is None)
        elif source_ == SourceKind.queue:  # it wrote an empty set and left an empty queue.db behind
            raise InputError("--source queue", f"no training queue yet: nothing was enqueued (the first `dataset "
                                               f"enqueue` creates {missing})")
        # --source all on a fresh home: the file alone, and no empty queue.db made for it (nor for a bad file)
    file_src = JsonlSource(trajectories) if trajectories and source_ != SourceKind.queue else None
    # the labels.jsonl beside a run's trajectories.jsonl (the run's own), read unless --labels names a file
    beside = file_src.labels_beside if file_src is not None and labels is None else None
    summary = export_dataset(
        out, fmt=fmt_, source=source_,
        trajectories=file_src,
        queue=queue,
        filters=filters, prompt=resolve_prompt(harness, render_under), placebo=placebo,
        placebo_seed=cfg.placebo_seed, placebo_window=cfg.placebo_window,
        declared_heldout=cfg.heldout_tasks, diagnosis_cfg=settings.diagnosis, labels=labels,
        keep_duplicates=keep_duplicates, val_fraction=val_fraction, split_seed=split_seed or 0, tokens=counter)
    skipped = f"{sum(summary.skipped.values())} skipped{_skip_reasons(summary.skipped)}"
    reused = (f", {counted(summary.labels_reused, 'label')} reused" if labels is not None
              else f", {counted(summary.labels_reused, 'label')} reused from {beside}" if beside is not None else "")
    if keep_duplicates and summary.duplicate_records:
        reused += f", {counted(summary.duplicate_records, 'duplicate record')} kept"
    if (labels is not None or beside is not None) and (again := summary.labels_relabelled):
        reused += (f", {sum(again.values())} labelled again (their label was not provably this trajectory's and "
                   f"this labeller's: {', '.join(f'{why} {n}' for why, n in again.items())})")
    fell_back = (f", {counted(summary.prompt_fallbacks, 'system prompt')} fell back to the raw template"
                 + (f" ({counted(summary.prompt_limit_hits, 'render')} hit a limit)" if summary.prompt_limit_hits
                    else "")
                 if summary.prompt_fallbacks else "")
    if summary.prompt_render_unjailed:
        fell_back += (f"; the template render process ran without its bubblewrap jail "
                      f"({summary.prompt_render_unjailed}; limits only)")
    typer.echo(f"wrote {counted(summary.records, 'record')} ({fmt_.value}{', placebo' if placebo else ''}) to {out}; "
               f"{summary.heldout_tasks_excluded} held-out excluded, {skipped}{reused}{fell_back}")
    if not summary.records:  # 'wrote 0 records ..., 0 skipped' said nothing of why
        given = (("--min-score", min_score), ("--max-per-task", max_per_task), ("--split", split), ("--task", task),
                 ("--class", failure_class))
        asked = [f"{flag} {','.join(v) if isinstance(v, list) else v}" for flag, v in given if v not in (None, [])]
        asked += ["--skip-text-with-calls"] if skip_text_with_calls else []
        asked += [f"--max-tokens {max_tokens}"] if max_tokens is not None else []
        found = {SourceKind.healthy: "the runs labelled healthy in --trajectories",
                 SourceKind.queue: "the training queue's items",
                 SourceKind.all: "the runs in --trajectories and the training queue's items" if queue is not None
                 else "the runs in --trajectories (no training queue yet)"}[source_]
        why = ("every candidate was skipped (the reasons above; all of them in manifest.json)" if summary.skipped
               else f"none of {found} passed {' '.join(asked)}" if asked
               else f"--source {source_.value} found none of {found}")
        if summary.heldout_tasks_excluded:
            why += f"; {summary.heldout_tasks_excluded} of held-out tasks are never exported"
        typer.echo(f"warning: no record was written: {why}", err=True)
    if (v := summary.validation) is not None:
        typer.echo(f"split by task: train {counted(v.records['train'], 'record')} of "
                   f"{counted(v.tasks_written['train'], 'task')} ({v.files['train']}), validation "
                   f"{counted(v.records['validation'], 'record')} of {counted(v.tasks_written['validation'], 'task')} "
                   f"({v.files['validation']})")
        if not v.records["validation"] or not v.records["train"]:
            empty = "validation" if not v.records["validation"] else "train"
            typer.echo(f"warning: the {empty} split is empty: no record of its tasks could be written (skipped)",
                       err=True)
    if (lengths := token_line(summary)) is not None and summary.records:
        how = "" if summary.token_lengths.exact else " (approximate: bytes / 3; --tokenizer DIR counts exactly)"
        typer.echo(f"token lengths{how}: {lengths}")
    over = {split: v for split, v in summary.token_lengths.splits.items() if v.get("over_max_tokens")}
    if over:  # only a placebo's permuted turns make one; kept so the control matches the export record for record
        longest = max(v["max"] for v in over.values())
        typer.echo(f"warning: {sum(v['over_max_tokens'] for v in over.values())} placebo records are over --max-tokens "
                   f"{max_tokens} (the longest {longest:,} tokens): their assistant turns came from longer records. "
                   "They are kept, so the placebo holds the export's records, tasks and user turns one for one; set "
                   f"the trainer's max length to {longest:,} for both runs, or a trainer cuts them there", err=True)
    if broken := summary.skipped.get("chat_template_error"):
        typer.echo(f"warning: {broken} records skipped: the chat template of --tokenizer cannot render them (the "
                   f"first: {summary.token_lengths.template_error})", err=True)
    if mixed := summary.sharegpt_text_with_calls:  # read by most LLaMA-Factory templates, not all: said, not warned
        typer.echo(f"note: {mixed} records hold an assistant turn with text and tool calls, written as "
                   "TEXT<tool_call>CALLS</tool_call>: LLaMA-Factory 0.9.5 reads it with a template that passes its "
                   "tool-call words, not gemma*, llama2* or lfm2* (--skip-text-with-calls leaves them out; "
                   "docs/datasets.md)", err=True)
    if unreadable := summary.sharegpt_calls_unreadable:
        typer.echo(f"warning: {unreadable} records hold a function_call turn whose text holds <tool_call> or whose "
                   "calls hold </tool_call>, which LLaMA-Factory cannot read back as written: drop them for "
                   "LLaMA-Factory (`evoharness dataset validate DIR` names them)", err=True)
    if past := summary.env_tools_past_limit:
        typer.echo(f"warning: {past} records name an environment (meta.env) past the {MAX_ENVS} distinct ones an "
                   "export builds for tool declarations; their undeclared tools are inferred from the calls", err=True)
    if twice := summary.skipped.get("duplicate_id"):  # `import` wrote two runs of one id: which one is in the set
        typer.echo(f"warning: {twice} trajectories of {trajectories} have the id of an earlier one; only the first "
                   "of each id was exported (skipped as duplicate_id)", err=True)
    # a typo wrote 0 silently; with no record at all the warning above names --task already
    if summary.records and (missing := [t for t in dict.fromkeys(task or ()) if not summary.tasks.get(t)]):
        typer.echo(f"warning: --task {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}: no record of "
                   f"{'this task' if len(missing) == 1 else 'these tasks'} was written (no trajectory of it, or "
                   "none passed the other filters)", err=True)


def _skip_reasons(skipped: dict[str, int], shown: int = 3) -> str:
    """`` (2 duplicate id, 1 below min score)``: the reasons counted, most first, at most ``shown`` of them (the rest
    are in manifest.json); '' when none. A reason that holds the trace's own text (``unknown_role_<role>``) is
    escaped where it is not printable."""
    if not skipped:
        return ""
    top = sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0]))
    words = [f"{n} " + (why if why.isprintable() else ascii(why)[1:-1]).replace("_", " ") for why, n in top[:shown]]
    if (rest := len(top) - shown) > 0:
        words.append(f"{rest} more reason{'s' * (rest != 1)} in manifest.json")
    return f" ({', '.join(words)})"


@dataset_app.command("validate")
def validate(
    path: Annotated[Path, typer.Argument(help="an exported data file (data.jsonl, or the parquet of hf), "
                                              "or the export directory")],
    fmt: Annotated[str | None, typer.Option("--format", "-f", help="openai | sharegpt | hf (default: the format "
                                            "the export's manifest.json names, else openai)")] = None,
) -> None:
    """Check every record of an export against its format (OpenAI chat, ShareGPT, or HF parquet rows)."""
    from evoharness.cli_support import no_stdin

    from .export_formats import EXPORT_FORMATS

    no_stdin(path, "dataset validate")
    named = None if fmt else _manifest_format(path)
    fmt = fmt or named or "openai"  # a sharegpt export was checked as openai: every record failed
    if fmt not in EXPORT_FORMATS:
        where = f" (named by {(path if path.is_dir() else path.parent) / 'manifest.json'}; --format overrides it)" \
            if named else ""
        fail(f"unknown export format {fmt!r}{where} (valid: {', '.join(EXPORT_FORMATS.names())})")
    entry = EXPORT_FORMATS.get(fmt)
    if path.is_dir() and (splits := _split_files(path)):  # an export with a validation split: both files
        _validate_splits(path, splits, entry, fmt)
        return
    if path.is_dir():
        if not os.path.lexists(path / entry.data_file):  # it said 'DIR/data.jsonl: no such file', a path never given
            fail(f"{path}: a directory with no {entry.data_file} in it (the {fmt} data file looked for): give what "
                 f"`dataset export --out DIR` wrote (DIR, or DIR/{entry.data_file}), or the data file itself")
        path = path / entry.data_file
    if not path.is_file():  # a FIFO or device exists, but is no file (reading it could hang or never end)
        fail(f"{path}: {not_a_file_reason(path, 'dataset file')}")
    other = None if named or fmt == "hf" else _ours_but_no_export(path)
    if other:  # a user checking the file they export from (or its labels) got a problem list per record
        fail(f"{path}: {other}, not an export: validate what `dataset export --out DIR` wrote (DIR, or "
             f"DIR/{entry.data_file})")
    n, problems = entry.validate(path)
    if n == 0:
        fail(f"{path}: empty file, no records to validate")
    _fail_on(problems, n)
    typer.echo(f"{n} records, all valid ({fmt})")


def _fail_on(problems: list[str], n: int) -> None:
    """Print the first 50 problems and fail with their count, when there are any."""
    for p in problems[:50]:
        typer.echo(p)
    if problems:
        fail(f"{len(problems)} problem{'s' * (len(problems) != 1)} in {n} record{'s' * (n != 1)}")


def _split_files(export: Path) -> dict[str, str] | None:
    """The data file of each split that the manifest.json of the export directory names (None: no split)."""
    try:
        split = json.loads((export / "manifest.json").read_text()).get("validation")
        files = split.get("files") if isinstance(split, dict) else None
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    return files if isinstance(files, dict) and files and all(isinstance(f, str) for f in files.values()) else None


def _validate_splits(export: Path, splits: dict[str, str], entry, fmt: str) -> None:
    """Check each split's data file; a split may be empty (its tasks' records all filtered), not every one."""
    total, problems, each = 0, [], []
    for part, name in splits.items():
        path = export / name
        if not path.is_file():
            fail(f"{path}: no such file (the {part} split that {export / 'manifest.json'} names)")
        n, found = entry.validate(path)
        total += n
        problems += [f"{name}: {p}" for p in found]
        each.append(f"{name} {n}")
    if total == 0:
        fail(f"{export}: empty splits, no records to validate")
    _fail_on(problems, total)
    typer.echo(f"{total} records, all valid ({fmt}: {', '.join(each)})")


def _ours_but_no_export(path: Path) -> str | None:
    """What the JSON lines file ``path`` is when its first record is canonical trajectories or labels of ours."""
    try:
        with path.open("rb") as fh:
            first = next((line for line in fh if line.strip()), b"")
        record = json.loads(first)
    except (OSError, ValueError, RecursionError):
        return None  # the per-record check says what is wrong
    if not isinstance(record, dict):
        return None
    if {"id", "task_id", "messages", "termination"} <= record.keys():
        return "canonical trajectories (what `dataset export --trajectories` reads)"
    if {"trajectory_id", "failure_class", "first_signal"} <= record.keys():
        return "labels (what `evoharness label` writes)"
    return None


def _manifest_format(path: Path) -> str | None:
    """The format the manifest.json of the export ``path`` is (or lies in) names; None when there is none."""
    manifest = (path if path.is_dir() else path.parent) / "manifest.json"
    try:
        if manifest.is_file() and manifest.stat().st_size < 1 << 20:
            fmt = json.loads(manifest.read_text()).get("format")
            return fmt if isinstance(fmt, str) else None
    except (OSError, ValueError, AttributeError, RecursionError):  # RecursionError: nested too deeply
        pass  # not an export's manifest: the default applies
    return None


def register(app: typer.Typer) -> None:
    app.add_typer(dataset_app, name="dataset")
