"""`evoharness diagnose` and `evoharness label`."""

from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from operator import itemgetter
from pathlib import Path
from typing import Annotated, TextIO

import typer

from evoharness.cli_support import Ticker, no_stdin, output_file, settings_of
from evoharness.errors import InputError, not_a_file_reason
from evoharness.traces.importers import FORMAT_NAMES, ImportWarnings, RepeatedIds, load_paths, output_apart
from evoharness.traces.models import Trajectory
from evoharness.traces.store import replacing

PathsArg = Annotated[list[str], typer.Argument(help="trace files or directories (- reads standard input), or "
                                                  "a run id under <home>/runs", show_default=False)]
FormatOpt = Annotated[str | None, typer.Option("--format", "-f",
                                                help=f"input format ({' | '.join(FORMAT_NAMES)}); auto by default")]
SkipOpt = Annotated[bool, typer.Option("--skip-invalid", help="report bad records on stderr and label the rest")]
LabellerOpt = Annotated[str, typer.Option("--labeller", help="rules | llm (an LLM judge over the rules' evidence; "
                                          "falls back to the rules on any error)")]
ModelOpt = Annotated[str | None, typer.Option("--model", help="the judge's model: openai:URL[#model] (required with "
                                              "--labeller llm)")]
ContextOpt = Annotated[int, typer.Option("--context", help="the judge model's context (tokens); longer trajectories "
                                         "are judged in chunks")]
WindowOpt = Annotated[int, typer.Option("--judge-window", help="the judge reads the messages within N of the rules' "
                                        "signals, one call per run; 0: the whole run in chunks, one call per chunk")]
TimeoutOpt = Annotated[float, typer.Option("--judge-timeout", metavar="SECONDS", help="the judge waits at most this "
                                           "long for one reply; a run whose call is not answered in time keeps the "
                                           "rule label")]
RetryOpt = Annotated[float, typer.Option("--judge-retry-after", metavar="SECONDS", help="after 3 calls in a row "
                                         "timed out the judge pauses (the runs keep the rule label) and tries one "
                                         "call again this long after the last timeout; 0: no pause")]


def _stream(paths: list[Path], fmt: str | None, skip_invalid: bool,
            exclude: Path | None = None, counted: bool = True) -> Iterator[Trajectory]:
    """The trajectories one at a time (``exclude``: a command's own output); an ``InputError`` at the end
    if there were none, a warning when an id came twice (``counted``: diagnose's words, else label's)."""
    skipped = 0

    def report(e: InputError) -> None:
        nonlocal skipped
        skipped += 1
        typer.echo(f"skipped: {e}", err=True)

    n = 0
    warnings = ImportWarnings()  # files found but not usable (a broken ground truth or results file)
    twice = RepeatedIds()
    ticker = Ticker()
    for t in load_paths(paths, fmt, skip_invalid=skip_invalid, on_invalid=report, exclude=exclude,
                        warnings=warnings):  # a canonical file's carried warnings are not said again
        n += 1
        ticker.tick()
        yield twice.add(t)
    for line in warnings.lines():
        typer.echo(line, err=True)
    if line := twice.line(n, "each is counted" if counted else "each is labelled"):
        typer.echo(line, err=True)
    if skipped:
        typer.echo(f"skipped {skipped} invalid file(s)/record(s)", err=True)
    if not n:
        raise InputError(", ".join(map(str, paths)), "no trajectories found")


def _labelled(labeller, items, traj_of=None):
    """``(item, label)`` for each item: the rule labeller's ``labelled`` (runs in batches, detector by detector:
    the same labels, less CPU), or the LLM judge's ``label`` one run at a time."""
    from evoharness.diagnosis.labeller import Labeller

    if isinstance(labeller, Labeller):
        return labeller.labelled(items, traj_of)
    return ((item, labeller.label(item if traj_of is None else traj_of(item))) for item in items)


def diagnose(
    ctx: typer.Context,
    paths: Annotated[list[str], typer.Argument(help="trace files or directories (- reads standard input), or "
                                                    "a run id under <home>/runs", show_default=False)],
    fmt: FormatOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of tables")] = False,
    skip_invalid: SkipOpt = False,
    show: Annotated[int, typer.Option("--show", min=0, help="failures listed with their failing step, agent, "
                                      "class and a one-line quote (text output)")] = 20,
    labeller_kind: LabellerOpt = "rules",
    model: ModelOpt = None,
    context: ContextOpt = 8192,
    window: WindowOpt = 3,
    timeout: TimeoutOpt = 120.0,
    retry_after: RetryOpt = 60.0,
) -> None:
    """Label every trajectory by its first failure signal; print the composition and the lever.

    One trajectory at a time: memory does not grow with their number (``--json``'s per-trajectory
    rows go to a temporary file and are copied out after the summary).
    """
    from evoharness.diagnosis.composition import Tally
    from evoharness.diagnosis.labeller import Labeller
    from evoharness.diagnosis.report import (
        composition_text,
        failing_step_line,
        failing_steps_text,
        summary_dict,
        trajectory_row,
    )

    cfg = settings_of(ctx).diagnosis
    labeller = _chosen_labeller(ctx, labeller_kind, model, context, window, timeout, retry_after)
    from evoharness.run_dirs import run_or_path

    read = [run_or_path(settings_of(ctx).home, p) for p in paths]  # a run id, as `report` takes one
    judged = JudgeCount()
    tally = Tally()
    shown: list[str] = []
    failures = 0
    with tempfile.TemporaryFile("w+", encoding="utf-8") as rows:
        runs = _stream(read, fmt, skip_invalid)
        # the text lists no signal and no violation: the rule labeller's headline of each run (``Labeller.headline``,
        # the export's first-signal search: no detector on a Healthy run) prints what ``label`` would
        labels = map(labeller.headline, runs) if isinstance(labeller, Labeller) and not as_json else (
            lab for _, lab in _labelled(labeller, runs))
        for lab in labels:
            tally.add(lab)
            judged.add(lab.labeller)
            if lab.failure_class not in ("healthy", "unknown"):
                failures += 1
                if len(shown) < show:
                    shown.append(failing_step_line(lab))
            if as_json:  # written as json.dumps(whole, indent=2) would place it in the list
                rows.write(("\n    " if tally.n == 1 else ",\n    ")
                           + json.dumps(trajectory_row(lab), indent=2).replace("\n", "\n    "))
        comp = tally.composition()
        judged.say()
        if not as_json:
            typer.echo(failing_steps_text(shown, failures) + composition_text(comp, cfg))
            return
        rows.seek(0)
        _echo_json(summary_dict(comp, cfg), "trajectories", rows)


def _chosen_labeller(ctx: typer.Context, kind: str, model: str | None, context: int, window: int,
                     timeout: float, retry_after: float = 60.0):
    """The rule labeller, or with ``--labeller llm --model ...`` the LLM judge over it (`diagnose` and `label`
    alike); the judge's options given to the rules are refused, not silently ignored."""
    from evoharness.diagnosis.labeller import Labeller

    cfg = settings_of(ctx).diagnosis
    judge_only = [opt for opt, name in (("--judge-window", "window"), ("--context", "context"),
                                        ("--judge-timeout", "timeout"), ("--judge-retry-after", "retry_after"))
                  if _given(ctx, name)]
    if kind == "rules" and judge_only and not model:
        raise InputError(judge_only[0], f"{judge_only[0]} is for --labeller llm")
    if context < 512:  # after the check above: out of range and not for the rules is "for --labeller llm"
        raise InputError("--context", f"must be >= 512 tokens, not {context:,}")
    if window < 0:
        raise InputError("--judge-window", f"must be >= 0, not {window:,}")
    if not (math.isfinite(timeout) and timeout > 0):
        raise InputError("--judge-timeout", f"must be a finite positive number of seconds, not {timeout:g}")
    if not (math.isfinite(retry_after) and retry_after >= 0):
        raise InputError("--judge-retry-after", f"must be a finite number of seconds >= 0, not {retry_after:g}")
    judged = kind != "rules" or model
    return _labeller(kind, model, context, cfg, window, timeout, retry_after) if judged else Labeller(cfg)


class JudgeCount:
    """The runs the LLM judge was asked about: how many kept its verdict and how many fell back to the rule label,
    and why (``add`` each label; ``say`` prints one stderr line, none where the judge was never asked)."""

    FALLBACK = "rules (llm fallback: "

    def __init__(self) -> None:
        self.judged = 0
        self.reasons: Counter[str] = Counter()

    def add(self, labeller: str) -> None:
        if labeller == "llm":
            self.judged += 1
        elif labeller.startswith(self.FALLBACK):
            self.reasons[labeller.removeprefix(self.FALLBACK).removesuffix(")")] += 1

    def say(self) -> None:
        fell = sum(self.reasons.values())
        if not (self.judged or fell):
            return
        why = "; ".join(f"{n} {reason}" for reason, n in self.reasons.most_common(3))
        more = len(self.reasons) - 3
        typer.echo(f"llm judge: {_runs(self.judged)} judged by the model, {fell:,} fell back to the rule labeller"
                   + (f" ({why}{f'; {more} other reasons' if more > 0 else ''})" if fell else ""), err=True)


def _runs(n: int) -> str:
    return f"{n:,} run{'s' * (n != 1)}"


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was given on the command line (or its environment variable), not left at
    its default (typer carries its own click: the source is compared by name)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def _labeller(kind: str, model: str | None, context: int, cfg, window: int = 3, timeout_s: float = 120.0,
              retry_after_s: float = 60.0):
    """The LLM judge over the rule labeller (``--labeller llm --model openai:URL[#model]``), saying on stderr
    what it calls and, as it goes, how far it got (`JudgeProgress`)."""
    if kind == "rules":
        raise InputError("--model", "--model is for --labeller llm")
    if kind != "llm":
        raise InputError("--labeller", f"unknown labeller {kind!r} (labellers: rules, llm)")
    if not model:
        raise InputError("--labeller", "--labeller llm needs --model openai:URL[#model]")
    from evoharness.diagnosis.judge import LLMJudge, openai_judge_model

    judge_model = openai_judge_model(model, timeout_s=timeout_s)
    typer.echo(f"llm judge: judging the failed runs, at most {timeout_s:g}s a call", err=True)
    progress = JudgeProgress()
    return LLMJudge(judge_model, cfg, context_tokens=context, window=window, on_call=progress, on_run=progress.ran,
                    retry_after_s=retry_after_s)


class JudgeProgress:
    """A line on stderr after the first run the judge was asked about, then at most one every ``EVERY`` seconds
    (after a run, or a call of a run read in parts), on a terminal or not (``[  12.0s] llm judge: 3 runs judged,
    1 fell back to the rules (5 calls, the last 3.1s: ID part 2/3)``): one call can take minutes, and off a
    terminal `diagnose --labeller llm` said nothing until the end. A run counts once its label is known: judged
    where the model's verdict was kept, else fell back (a timeout, an unusable reply, no part claimed)."""

    EVERY = 10.0

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        self.t0 = time.monotonic()
        self.last: float | None = None
        self.judged = self.fell_back = self.calls = 0
        self.last_call = ""

    def __call__(self, traj_id: str, part: int, parts: int, seconds: float) -> None:
        """After each call: a line in a run read in parts, where one is due."""
        self.calls += 1
        where = f"{traj_id} part {part}/{parts}" if parts > 1 else traj_id
        self.last_call = f", the last {seconds:.1f}s: {where}"
        if parts > 1 and self.last is not None:
            self._line()

    def ran(self, traj_id: str, judged: bool) -> None:
        """After each run the judge was asked about: counted, and a line where one is due."""
        self.judged += judged
        self.fell_back += not judged
        self._line()

    def _line(self) -> None:
        now = time.monotonic()
        if self.last is not None and now - self.last < self.EVERY:
            return
        self.last = now
        print(f"[{now - self.t0:6.1f}s] llm judge: {_runs(self.judged)} judged, {self.fell_back:,} fell back to the "
              f"rules ({self.calls:,} call{'s' * (self.calls != 1)}{self.last_call})",
              file=self.stream or sys.stderr, flush=True)


def _echo_json(head: dict, key: str, rows) -> None:
    """Print ``{**head, key: [...]}`` exactly as ``json.dumps(..., indent=2)`` would, the list's
    items (already indented) copied from the file ``rows`` instead of memory."""
    text = json.dumps(head, indent=2)
    out = sys.stdout  # held in a local: a refused write names standard output (``cli.standard_stream``)
    out.write(text[:-2] + f",\n  {json.dumps(key)}: [")
    shutil.copyfileobj(rows, out)
    out.write("\n  ]\n}\n")
    out.flush()


def _labels_line(line: bytes) -> bool:
    """Whether ``line`` is empty or a line `evoharness label` writes (a JSON object with its layout version)."""
    if not line:
        return True
    try:
        obj = json.loads(line)
    except ValueError:
        return False
    return isinstance(obj, dict) and "schema_version" in obj and "failure_class" in obj


def label(
    ctx: typer.Context,
    paths: PathsArg,
    out: Annotated[Path, typer.Option("--out", "-o", parser=output_file("labels.jsonl"), metavar="<path>",
                                      help="labels JSONL to write (a directory: DIR/labels.jsonl)")],
    fmt: FormatOpt = None,
    skip_invalid: SkipOpt = False,
    labeller_kind: LabellerOpt = "rules",
    model: ModelOpt = None,
    context: ContextOpt = 8192,
    window: WindowOpt = 3,
    timeout: TimeoutOpt = 120.0,
    retry_after: RetryOpt = 60.0,
) -> None:
    """Write one label per trajectory as JSONL: class, first signal (step, evidence), agent, a one-line
    quote, all signals, lever, and the violation log (broken schema / policy invariants, with steps). Each line
    also carries the SHA-256 of the canonical line its trajectory was read from and the rule labeller's
    fingerprint, by which `dataset export --labels` reuses it only for that trajectory and that labeller."""
    from evoharness.diagnosis.labeller import Labeller
    from evoharness.diagnosis.models import LabelLine
    from evoharness.run_dirs import run_or_path
    from evoharness.traces.store import keeping_lines, line_digest

    labeller = _chosen_labeller(ctx, labeller_kind, model, context, window, timeout, retry_after)
    # the rules' fingerprint, on every label the rule labeller made: all of them, or of the LLM judge's those it left
    # to its rule labeller (a healthy or unknown run, a fallback); the model's own verdicts carry none (``rules_made``)
    rules = labeller if isinstance(labeller, Labeller) else labeller.rules
    fingerprint = rules.fingerprint
    read = [run_or_path(settings_of(ctx).home, p) for p in paths]  # a run id, as `diagnose` takes one
    own = output_apart(out, read, ours=_labels_line)  # an earlier label run's output may be replaced
    n = 0
    judged = JudgeCount()
    # on bad input no half-written file, and an earlier one is kept
    with replacing(out, "w") as fh, keeping_lines() as kept:
        # each trajectory with its line, taken as it is read (``kept`` holds the latest only): None when not read
        # from a canonical JSONL line (another format)
        read_lines = ((t, kept.line_of(t)) for t in _stream(read, fmt, skip_invalid, exclude=own, counted=False))
        for (_, raw), lab in _labelled(labeller, read_lines, itemgetter(0)):
            judged.add(lab.labeller)
            line = LabelLine.of(lab, trajectory_sha256=line_digest(raw) if raw is not None else None,
                                labeller_fingerprint=fingerprint if rules_made(lab) else None)
            fh.write(line.model_dump_json() + "\n")
            n += 1
    judged.say()
    typer.echo(f"wrote {n} labels to {out}")


def rules_made(lab) -> bool:
    """Whether the class and first signal of ``lab`` are the rule labeller's: every label but the LLM judge's own
    verdicts (``labeller == "llm"``). The judge labels with the rules first and keeps their label, unchanged but for
    its ``labeller`` field, for a healthy or unknown run and whenever it falls back (``judge.LLMJudge``), so such a
    line may carry the rules' fingerprint and be reused by an export as any rule label is.

    The model's verdicts are never reused by `dataset export --labels`, whose labeller is the rules: a fingerprint
    over the endpoint and the model name would not make them reproducible (a served model name does not pin its
    weights, its sampling or the server's template; the same request need not give the same verdict), and an export
    that took them would write a class its own labeller does not give, in a card that counts classes as the
    rules'."""
    return lab.labeller != "llm"


def calibrate(
    labels: Annotated[Path, typer.Argument(help="labels JSONL written by `evoharness label`", show_default=False)],
    human: Annotated[Path, typer.Option("--human", help="human labels: JSONL of {trajectory_id, failure_class, "
                                        "step?}")],
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
) -> None:
    """Agreement with a human-labelled sample: confusion matrix, Cohen's kappa, failing-step agreement."""
    from evoharness.diagnosis.calibrate import agreement, read

    for p in (labels, human):
        no_stdin(p, "calibrate")
        if not p.is_file():  # a directory, a FIFO or a device was "no such file" too
            raise InputError(str(p), not_a_file_reason(p, "labels file"))
    result = agreement(read(labels, human=False), read(human, human=True))
    typer.echo(result.model_dump_json(indent=2) if as_json else result.text())


def register(app: typer.Typer) -> None:
    app.command("diagnose")(diagnose)
    app.command("label")(label)
    app.command("calibrate")(calibrate)
