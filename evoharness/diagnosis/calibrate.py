"""Agreement of the labeller with a human-labelled sample: confusion matrix and Cohen's kappa.

``LABELS`` is what ``evoharness label`` writes (JSONL of labels, each with this evoharness's
``schema_version``). ``--human FILE`` is JSONL (or a JSON list) of ``{"trajectory_id": ..., "failure_class":
..., "step": ...}`` -- ``id`` and ``class`` are accepted for the first two; ``step`` (the failing message
index) is optional. Trajectories are matched by id; classes are healthy, F1-F4, E and unknown (``label``'s
class for an unscored run no signal fired on), read in any case. Each file is checked for its kind, record by
record: a human file given as ``LABELS`` (the arguments swapped), a line of ``label`` in the human file, a
record of another kind or missing a field is an ``InputError`` naming the file and the record.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from evoharness.diagnosis.models import LABEL_SCHEMA_VERSION, FailureClass, LabelHead
from evoharness.errors import InputError
from evoharness.untrusted import some_keys

ORDER = [c.value for c in FailureClass]
_BY_LOWER = {c.lower(): c for c in ORDER}  # 'f1', 'Healthy', 'UNKNOWN' are read as the classes they name


class Agreement(BaseModel):
    n: int
    classes: list[str]
    matrix: list[list[int]]  # rows: human, columns: labeller
    accuracy: float
    kappa: float | None
    step_n: int = 0
    step_exact: int = 0
    step_within_3: int = 0
    unmatched_human: int = 0

    def text(self) -> str:
        w = max(8, *(len(c) + 2 for c in self.classes))
        first = len("human \\ labeller") + 2
        lines = [f"{self.n} trajectories labelled by both (rows: human, columns: labeller)", "",
                 "human \\ labeller".ljust(first) + "".join(c.rjust(w) for c in self.classes)]
        for c, row in zip(self.classes, self.matrix, strict=True):
            lines.append(c.ljust(first) + "".join(str(v).rjust(w) for v in row))
        kappa = "-" if self.kappa is None else f"{self.kappa:.3f}"
        lines += ["", f"agreement {100 * self.accuracy:.1f}%   Cohen's kappa {kappa}"]
        if self.step_n:
            lines.append(f"failing step: exact {self.step_exact}/{self.step_n}, within 3 {self.step_within_3}/"
                         f"{self.step_n}")
        if self.unmatched_human:
            lines.append(f"{self.unmatched_human} human label(s) name a trajectory the labels file does not have")
        return "\n".join(lines)


def _records(path: Path) -> list[tuple[str, Any]]:
    try:
        raw = path.read_text(encoding="utf-8-sig")  # a byte-order mark (a hand-written file from Windows) skipped
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(str(path), f"unreadable: {e}") from None
    if raw.lstrip().startswith("["):
        return [(f"record {i}", r) for i, r in enumerate(_loads(raw, path, None))]
    try:
        return [(f"line {n}", _loads(line, path, n)) for n, line in enumerate(raw.splitlines(), start=1)
                if line.strip()]
    except InputError:
        try:  # an indented object wrapping the labels was 'invalid JSON' at line 1, though the file is JSON
            whole = json.loads(raw)
        except (ValueError, RecursionError):
            whole = None
        if isinstance(whole, dict):
            raise InputError(str(path), f"one JSON object (keys: {', '.join(list(whole)[:5])}), not labels: give "
                             "JSONL (one label per line) or a JSON list of labels") from None
        raise


def _loads(text: str, path: Path, line: int | None) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(str(path), f"invalid JSON ({e.msg})", where=f"line {line or e.lineno}") from None
    except RecursionError:
        raise InputError(str(path), "JSON nested too deeply", where=f"line {line or 1}") from None
    except ValueError as e:  # an integer of over 4,300 digits
        raise InputError(str(path), f"unreadable JSON ({str(e).split(':')[0][:120]})",
                         where=f"line {line or 1}") from None


def _field(rec: Any, keys: tuple[str, ...]) -> Any:
    return next((rec[k] for k in keys if isinstance(rec, dict) and rec.get(k) is not None), None)


def _label_line(rec: Any, path: Path, where: str) -> tuple[str, str, int | None]:
    """(id, class, step) of a LABELS record, or an InputError saying what the record is instead."""
    if isinstance(rec, dict) and "schema_version" not in rec:
        if "signals" in rec or "first_signal" in rec:
            said = "has no schema_version (written by an older `evoharness label`): run it again"
        elif _field(rec, ("trajectory_id", "id")) is not None and _field(rec, ("failure_class", "class")):
            said = ("a human label, not a line `evoharness label` wrote (no schema_version): the labels file "
                    "is calibrate's first argument, the human labels go to --human")
        else:
            said = f"not a label (written by `evoharness label`): no schema_version (keys: {some_keys(rec)})"
        raise InputError(str(path), said, where=where)
    if not isinstance(rec, dict):
        raise InputError(str(path), f"not a label (written by `evoharness label`): a JSON {type(rec).__name__}, "
                         "not an object", where=where)
    try:
        line = LabelHead.read(rec)
        step = line.signal("step")
    except ValueError as e:
        raise InputError(str(path), f"not a label (written by `evoharness label`): {e}", where=where) from None
    if line.schema_version is None:  # written as null (a missing one is said above)
        raise InputError(str(path), "not a label (written by `evoharness label`): schema_version: Input should be "
                         "a valid integer", where=where)
    if line.schema_version != LABEL_SCHEMA_VERSION:
        raise InputError(str(path), f"has schema_version {line.schema_version}, this evoharness reads "
                         f"{LABEL_SCHEMA_VERSION}: run `evoharness label` again", where=where)
    return line.trajectory_id, line.failure_class, step


def read(path: Path, human: bool) -> dict[str, tuple[str, int | None]]:
    """id -> (class, step) from a labels file (``human=False``) or a human sample."""
    out: dict[str, tuple[str, int | None]] = {}
    first_at: dict[str, str] = {}
    for where, rec in _records(path):
        if not human:
            tid, cls, step = _label_line(rec, path, where)
        elif isinstance(rec, dict) and "schema_version" in rec:
            raise InputError(str(path), "a line `evoharness label` wrote, not a human label: the labels file is "
                             "calibrate's first argument, the human labels go to --human", where=where)
        else:
            tid = _field(rec, ("trajectory_id", "id"))
            cls = _field(rec, ("failure_class", "class", "label"))
            step = _field(rec, ("step",))
            if not isinstance(tid, str) or not isinstance(cls, str):
                keys = f" (keys: {some_keys(rec)})" if isinstance(rec, dict) else f", not a JSON {type(rec).__name__}"
                raise InputError(str(path), f"needs a trajectory_id (or id) and a failure_class (or class){keys}",
                                 where=where)
        cls = _BY_LOWER.get(cls.lower(), cls)  # was upper-cased: 'unknown', which `label` writes, was refused
        if cls not in ORDER:
            raise InputError(str(path), f"unknown class {cls!r} (classes: {', '.join(ORDER)})", where=where)
        whole = isinstance(step, int) and not isinstance(step, bool)
        if human and step is not None and not (whole and step >= 0):  # was left out of the step agreement, unsaid
            raise InputError(str(path), f"step must be a message index (a whole number from 0), not {step!r}",
                             where=where)
        label = (cls, step if whole else None)
        if tid in out and out[tid] != label:  # the last one was kept, the other dropped unsaid
            raise InputError(str(path), f"trajectory {tid!r} is labelled twice, differently ({first_at[tid]}: "
                                        f"{_said(out[tid])}; here: {_said(label)})", where=where)
        out[tid] = label
        first_at.setdefault(tid, where)
    if not out:
        raise InputError(str(path), "no labels in it" if human else "no labels in it (write them with "
                         "`evoharness label PATH... --out LABELS`)")
    return out


def _said(label: tuple[str, int | None]) -> str:
    return label[0] if label[1] is None else f"{label[0]} at step {label[1]}"


def agreement(labels: dict[str, tuple[str, int | None]], human: dict[str, tuple[str, int | None]]) -> Agreement:
    both = [k for k in human if k in labels]
    if not both:
        raise InputError("--human", "no trajectory id is in both files")
    classes = [c for c in ORDER if any(human[k][0] == c or labels[k][0] == c for k in both)]
    idx = {c: i for i, c in enumerate(classes)}
    matrix = [[0] * len(classes) for _ in classes]
    for k in both:
        matrix[idx[human[k][0]]][idx[labels[k][0]]] += 1
    n = len(both)
    observed = sum(matrix[i][i] for i in range(len(classes))) / n
    rows = [sum(r) for r in matrix]
    cols = [sum(matrix[i][j] for i in range(len(classes))) for j in range(len(classes))]
    expected = sum(r * c for r, c in zip(rows, cols, strict=True)) / (n * n)
    kappa = None if expected == 1 else (observed - expected) / (1 - expected)
    steps = Counter()
    for k in both:
        hs, ls = human[k][1], labels[k][1]
        if hs is not None and ls is not None:
            steps["n"] += 1
            steps["exact"] += hs == ls
            steps["within3"] += abs(hs - ls) <= 3
    return Agreement(n=n, classes=classes, matrix=matrix, accuracy=observed, kappa=kappa, step_n=steps["n"],
                     step_exact=steps["exact"], step_within_3=steps["within3"],
                     unmatched_human=len(human) - n)
