"""Fuzz every CLI command with mutated arguments and files: exit 0 or 2, never a traceback, one `error:` line.

    .venv/bin/python scripts/fuzz_cli.py                       # 60 s, every command in turn
    .venv/bin/python scripts/fuzz_cli.py --budget 600 --seed 7 --command rollout --command "dataset export"

The commands and their parameters come from the CLI itself (``evoharness.cli.command()``: the registered areas'
typer commands, with the root's ``--config``/``--set``), never a hand list: a new command or option is fuzzed the
day it is added. Each case picks the next command (in a seeded order, so a short run still reaches every command),
gives each required parameter a working value (and those a command needs to do its work though --help calls them
optional: ``NEEDED``, such as evaluate's --harness and --out) and some optional ones too (from a fixture workspace:
a harness repo with a candidate, rollouts, labels, an EDIT.json, an export), then replaces 1 or 2 of them (none in a
fifth of the cases) by hostile values of the parameter's kind: empty, blank, NUL, line breaks and escapes, half a
surrogate pair, 100,000 characters, numbers out of range or not numbers at all (nan, inf, 1e999, a 5,000-digit
integer), paths that are missing, directories, FIFOs, /dev/zero, under a file, a symlink loop, or files that are
empty, binary, nested 100,000 deep, a mutated copy of the working input (``fuzz_importers.variant_bytes``, or
``damaged``: cut short, a number made NaN / Infinity / 1e999 / 5,000 digits, emptied, random bytes, nested 100,000
deep, a byte no UTF-8 has, a byte-order mark, CRLF); and sometimes a hostile ``--set`` of a real settings key or a
hostile ``--config`` file. A trace input (``TRACE_INPUTS``: typed as text, a path or a run id) is, half the time, a
copy of a public trace set (``REAL_FILES``: tau-bench airline records, a Who&When Algorithm-Generated log, a
mini-swe-agent trajectory, and their canonical import; from ../shared/data, else tests/fixtures/data; never a
held-out set) instead of the synthetic rollouts.

Half the cases are *deep* instead: every argument works, and exactly one thing is changed, so the case reaches the
command's real work rather than its argument checks: one field of a working input file, at any depth (a trajectory's
tool call's arguments, a label's signal, an EDIT.json change; deleted, of another type, extreme -- ``mutate``), or one
byte; one value of ``ops/evoharness.example.toml`` given as ``--config`` (every section: ``serve``'s too, with home,
harness and port made the case's own); or an output that cannot be written whole -- a link to ``/dev/full`` (every
write ENOSPC: one error line, and no file left at the output as if complete), a path through a file, a directory, a
symlink loop; or, for a harness repo (a --harness, or `run`'s run.harness: ``SETTINGS_NEEDED``), an odd git state
(``GIT_STATES``: a lock left by a git command, HEAD detached or damaged, a merge in progress, main at a missing commit,
a shallow marker, a config git cannot parse), where a locked index or a merge in progress told as "uncommitted
changes" is a failure too; or, for `report`, `ablate`, `approve` and `reject` (``RUN_ARGS``: given the workspace's
finished run and its run waiting for review, ``RUNS``) and for `evaluate --run`, `export-otel`, `dataset export -t` and
`run --resume` when the case gives them one of those runs (``RUN_INPUTS``: half their cases), one thing of the run:
a file of its directory, its checkpoint database cut short (half written), a page of it overwritten, emptied, a
garbage journal beside it, or its harness.

A tenth of the cases run with standard output on ``/dev/full``: a command that prints must say `error: standard output:
no space left on device` (its progress lines and the outputs it wrote before are then no failure).

Each case runs in a forked child (the imports are paid once) in a fresh copy of the workspace, with its own home,
stdin from /dev/null, 4 GiB of address space beyond what the fuzzing process holds and ``--timeout`` seconds. A
failure is: a traceback; an exit other than 0 or 2 (``verify`` may exit 1: rejected, as documented); exit 2 without
exactly one `error:` line on stderr, or with stderr lines other than `error:` / `warning:` ones; an error line for a
refused write that names nothing (`error: no space left on device`); exit 0 with an output (``OUT_OPTIONS``, `init
DIR`) inside a git directory; exit 2 that changed or removed a file the workspace held (a refused command must leave
its inputs and earlier outputs whole, and leave no new file at its output); any case that changed the workspace it
was copied from (a copied run writing the original's harness or home); a case over ``--timeout`` (``serve``,
``run`` and ``demo`` may run that long: they serve or evolve until stopped). Every failure is printed with its
arguments; the script exits 1 if there was one.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import click

from evoharness.cli import command, main

LONG_RUNNING = {"serve", "run", "demo"}  # a case that is still working at --timeout is no failure
EXIT_1_OK = {"verify"}  # rejected or undecided: documented exit 1
TIMEOUT_S = 30.0
DEEP_SHARE = 0.5  # cases whose arguments all work but for one changed thing (``Maker.deep``)
STDOUT_FULL_SHARE = 0.1  # cases whose standard output is /dev/full (a refused write must name it)
STDOUT_FULL_LINE = "error: standard output: no space left on device"
OUT_OPTIONS = ("--out", "-o", "--body-out")  # options whose value is written (and `init DIR`)

# Hostile values, by the parameter's kind. No absolute path a command could write (the fuzz runs as whoever
# starts it): inputs may be /dev/null and /dev/zero, outputs are under the case's directory.
STRINGS = ["", " ", "a\x00b", "main\nerror: forged", "\x1b[2J", "a\u2028b", "\udcff", "\ud800", "x" * 100_000,
           "-1", "--", "nan", "inf", "1e999", "9" * 30, "../escape", "a,b", "%", "{{ 7 * 7 }}", "\u202etxt",
           "sqlite:///:memory:", "http://127.0.0.1:9/x", "\ufeffmain", "-", "@", "main@{1}", "HEAD~999"]
INTS = ["-1", "0", "99999999999", "9" * 5000, "1.5", "abc", "", "nan", "-0", "0x10", " 2"]
FLOATS = ["nan", "inf", "-inf", "1e999", "-0", "abc", "", "1e-320", "-1", "2", "9" * 400]
IN_PATHS = ["", " ", "missing.jsonl", "dir/", "dir", "empty.jsonl", "blank.jsonl", "nul.bin", "garbage.bin",
            "deep.json", "bigint.json", "latin1.txt", "fifo", "/dev/zero", "/dev/null", "t.jsonl/x", "a\nb",
            "n" * 300, "loop", "-", "h"]
# Outputs stay in the case's directory: no device (a command may replace what is at its --out), and no FIFO
# (an --out that is one is written through, as documented: it waits for its reader).
OUT_PATHS = ["", "t.jsonl", "h", "dir/", "t.jsonl/x", "a\nb", "n" * 300, "missing/deep/x", "labels.jsonl", "export",
             "edit.json", "loop", "h/lessons.md", "h/.git", "full", "full/x"]
# Outputs of a deep case: a link to /dev/full (replacing it replaces the link, never the device), through a file,
# a directory, a loop.
DEEP_OUT_PATHS = ["full", "full/x", "t.jsonl/x", "dir", "loop", "loop/x", "h/.git/x"]
FULL_DEVICE = os.path.exists("/dev/full")
# A deep case's harness repo (an input directory holding .git) is, this share of the time, left in an odd state
# instead of a file of it changed: the files written into its .git (MAIN: main's commit). A git command running or
# killed (its locks), HEAD detached or damaged, a merge in progress, main at a missing or unreadable commit, a
# shallow clone's marker, a .git/config git cannot parse.
GIT_STATE_SHARE = 0.4
GIT_STATES = {"index.lock": [("index.lock", b"")], "HEAD.lock": [("HEAD.lock", b"")],
              "main.lock": [("refs/heads/main.lock", b"")], "detached": [("HEAD", b"MAIN\n")],
              "HEAD damaged": [("HEAD", b"garbage\n")], "merge in progress": [("MERGE_HEAD", b"MAIN\n")],
              "main missing commit": [("refs/heads/main", b"0" * 40 + b"\n")],
              "main damaged": [("refs/heads/main", b"garbage\n")], "shallow": [("shallow", b"MAIN\n")],
              "config damaged": [("config", b"[core\nbad")]}
# states whose refusal must not be told as the user's uncommitted changes (a clean work tree: commit what?)
NOT_UNCOMMITTED = {"index.lock", "merge in progress"}
EXAMPLE_CONFIG = Path(__file__).resolve().parents[1] / "ops" / "evoharness.example.toml"
# a value of the example config's, changed: of another TOML type, out of range, extreme, empty
TOML_VALUES = ['""', '"x"', "-1", "0", "1e999", "nan", "inf", "-inf", "9" * 5000, "[]", "{}", "true", "[1, 2]",
               '"\\u0000"', '"' + "x" * 10_000 + '"', "1.5", "2026-12-06", '"sqlite:///:memory:"', '"../escape"',
               '"http://127.0.0.1:9/v1"', "[[1]]", '"\\ud800"']
SET_VALUES = ["", "nan", "inf", "-1", "0", "1e999", "9" * 5000, "[1,2", "{", '"x"', "true", "[]", "\x00", "x" * 10_000,
              "sqlite:///:memory:", "\udcff", "{a = 1}", "[[1]]"]
CONFIGS = [b"", b"\x00\x01\x02", b"[run]\nmax_rounds = nan\n", b"a = " + b"[" * 10_000 + b"]" * 10_000 + b"\n",
           b"\xef\xbb\xbf[run]\nseed = 1\n", b"caf\xe9 = 1\n", b"[nosuch]\nx = 1\n", b"[run]\nseed = 1" + b"1" * 5000,
           b"[datasets]\nurl = 'sqlite:///:memory:'\n", b"home = 'x\\u0000y'\n", b"[run\n", b"[run]\nseed = '1'\n"]

# Working values by parameter name (the parameter's kind decides when the name is not here).
PATH_VALUES = {"harness": "h", "edit": "edit.json", "human": "human.jsonl", "labels": "labels.jsonl",
               "config": "cfg.toml", "path": "export", "dir": "newh", "run": "run-none", "source": "t.jsonl"}
OUT_NAMES = {"out", "body_out", "dir"}
STR_VALUES = {"env": "synthetic", "model": "standin:weak", "candidate": "main", "remote": "origin", "split": "dev",
              "sandbox": "inprocess", "executor": "local", "url": "sqlite:///q.db", "name": "trajectory",
              "harness": "h", "render_under": "seed", "source": "file", "reason": "why", "host": "127.0.0.1",
              "commit": "main", "baseline": "main", "run": "run-none", "run_id": "run-none", "resume": "run-none",
              "endpoint": "http://127.0.0.1:9/v1/traces", "service_name": "evo", "labeller_kind": "rules",
              "fmt": "canonical", "task": "contact_0", "failure_class": "F4", "strategy": "behaviour_aware",
              "tasks": "contact_0,contact_2"}
CANDIDATE = "candidate/r0-add-a-loop-lesson"  # the workspace's candidate branch, with a verdict (rejected)
# options a command needs to reach its work though its --help calls them optional (one of two, or with another)
NEEDED = {"evaluate": {"harness", "out", "tasks", "rollouts", "split"},
          "verify": {"tasks", "env", "model", "rollouts"}, "pr": {"body_out"},
          "dataset export": {"trajectories_arg"}}
# options a deep case leaves out: each needs another option or an input that goes with the working one (--split-seed
# without --val-fraction, labels of t.jsonl beside real.jsonl, a tokenizer that is a trace file), so a deep case that
# took one was a refusal of the combination, never the command's work
NOT_ALONE = {"dataset export": {"split_seed", "labels", "tokenizer", "max_tokens"}}
DIR_OUTPUTS = {"dataset export", "demo", "report"}  # commands whose --out is a directory (a .jsonl name is refused)
# commands whose harness repo is a setting, not a parameter (`run` evolves run.harness): the settings that give them
# the workspace's repo and a run small enough to end inside --timeout. A deep case may change that repo (one of its
# files, or a git state: ``GIT_STATES``) as it changes a --harness.
SETTINGS_NEEDED = {"run": ["run.harness=h", "run.env=synthetic", "run.model=standin:weak", "run.rollouts=1",
                           "run.max_rounds=1", "run.budget=40", "sandbox.backend=inprocess"]}
# trace inputs a command types as text (a run id or a path; a list of them), not as a path: fuzzed as the input files
# they are. Typed as str, they got "x" as their working value and no deep case changed them (since `dataset enqueue`
# and `dataset export -t` took run ids, and `diagnose`/`label`/`import`/`export-otel` always): their trace files were
# never mutated.
TRACE_INPUTS = {"diagnose": "paths", "label": "paths", "import": "names", "export-otel": "source",
                "dataset enqueue": "trajectories_arg", "dataset export": "trajectories_arg"}
# the public trace sets beside the checkout (../shared/data), else the samples vendored in tests/fixtures/data; never a
# file of a held-out test set (Who&When Hand-Crafted, AgentRx Magentic-One)
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
VENDORED_DATA = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "data"
# the workspace's copies of them (``real_traces``): any format, and canonical (their import) for the dataset commands
REAL_FILES = ["tau.json", "ww.json", "swe.traj.json", "real.jsonl"]
CANONICAL_ONLY = {"dataset enqueue", "dataset export", "export-otel"}
REAL_SHARE = 0.5  # working trace inputs that are a copy of a public trace set (else the synthetic rollouts, t.jsonl)
# runs in the workspace (``build_workspace``), each on its own harness repo: a finished one that merged an edit (for
# `report` and `ablate` to report and ablate) and one waiting for review with two candidates (for `approve` and
# `reject` to decide). Until the twenty-sixth session these commands got "run-none" and stopped at 'no such run'.
RUNS = {"run-done": "hd", "run-review": "hr"}
RUN_ARGS = {"report": ("run", "run-done"), "ablate": ("run", "run-done"), "approve": ("run_id", "run-review"),
            "reject": ("run_id", "run-review")}
# the runs' settings: small, and (with 8 rollouts a task) a candidate passes the gates in the first round
RUN_SETTINGS = ["run.env=synthetic", "run.model=scripted:weak", "run.rollouts=8", "run.max_rounds=1", "run.dev_limit=8",
                "run.heldout_limit=4", "sandbox.backend=inprocess", "roles.kind=playbook"]
# commands that also take one of RUNS' ids: for a trace file (export-otel's source, `dataset export -t`) or in place of
# other options (evaluate's --run for its --harness, --out and what the run fixes; `run --resume` for a new run's
# --run-id): the parameter, its run, and the options it replaces (given with it, the command refuses them). A case
# gives the run ``RUN_INPUT_SHARE`` of the time (``Maker.by_run``), and a deep one may change that run as it does
# RUN_ARGS'. Until the twenty-seventh session evaluate's --run got "run-none" beside NEEDED's --harness (a refusal of
# the pair, every case), and the other three got no run id at all.
EVALUATE_RUN_FIXES = {"harness", "out", "env", "model", "temperature", "baseline", "candidate", "tasks"}
RUN_INPUTS = {"evaluate": ("run", "run-done", EVALUATE_RUN_FIXES), "export-otel": ("source", "run-done", set()),
              "dataset export": ("trajectories_arg", "run-done", set()), "run": ("resume", "run-review", {"run_id"})}
RUN_INPUT_SHARE = 0.5
RUN_DAMAGE_SHARE = 0.5  # deep cases of RUN_ARGS' commands that change the run (a file of its directory, the checkpoint
# database, or its harness repo) rather than another input
CHECKPOINTS = "home/runs/checkpoints.sqlite"  # every run's LangGraph checkpoints (``run.checkpointer`` sqlite)
SMALL_INTS = {"tasks": 2, "rollouts": 1, "anchor_rollouts": 1, "workers": 1, "batch": 1, "rounds": 1, "show": 3,
              "budget": 20, "max_per_task": 2, "round_": 0, "round": 0, "seed": 0, "split_seed": 0}


@dataclass
class Param:
    name: str
    flag: str | None  # None for an argument
    kind: str  # path | str | int | float | bool | list
    required: bool
    is_flag: bool
    choices: list[str] = field(default_factory=list)
    default: object = None


@dataclass
class Case:
    command: str
    argv: list[str]
    rc: int | None = None
    out: str = ""
    err: str = ""
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    stdout_full: bool = False  # the child's standard output is /dev/full: every write to it is ENOSPC
    git_state: str | None = None  # the harness repo's odd state (``GIT_STATES``), if the case made one
    run_change: str | None = None  # what the case changed of a run (``Maker.change_run``), if it did


def commands() -> dict[str, list[Param]]:
    """Every leaf command of the CLI (``evoharness.cli.command()``) and its parameters, help left out."""
    found: dict[str, list[Param]] = {}

    def walk(cmd: click.Command, path: tuple[str, ...]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, (*path, name))
            return
        params = []
        for p in cmd.params:
            if p.name == "help" or getattr(p, "hidden", False):
                continue
            descriptor = getattr(p, "type_descriptor", None)
            annotation = getattr(descriptor, "annotation", None)
            kind = _kind(annotation, getattr(p, "type", None))
            # by its kind, not ``isinstance(p, click.Argument)``: typer's commands are made of its own copy of click
            # (``typer._click``), so every argument was taken for an option and passed as `NAME VALUE` (`label paths
            # t.jsonl`: 'paths: no such file'), most cases refused before their command's work
            if TRACE_INPUTS.get(" ".join(path)) == p.name:
                kind = "list-path" if kind == "list" else "path"
            flag = None if p.param_type_name == "argument" else max(p.opts, key=len)
            choices = list(getattr(getattr(p, "type", None), "choices", None) or [])
            params.append(Param(p.name, flag, kind, bool(p.required), bool(getattr(p, "is_flag", False)), choices,
                                p.default if not callable(p.default) else None))
        found[" ".join(path)] = params

    walk(command(), ())
    return found


def _kind(annotation, click_type) -> str:
    text = str(annotation)
    if annotation is bool or getattr(click_type, "name", "") == "boolean":
        return "bool"
    if text.startswith("list["):
        return "list-path" if "Path" in text else "list"
    if annotation is int or getattr(click_type, "name", "") == "integer":
        return "int"
    if annotation is float or getattr(click_type, "name", "") == "float":
        return "float"
    if "Path" in text or getattr(click_type, "name", "") == "path":
        return "path"
    return "str"


def settings_keys() -> list[str]:
    """Every dotted settings key (``Settings``' fields, sections expanded)."""
    from pydantic import BaseModel

    from evoharness.config import Settings

    keys: list[str] = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, f in model.model_fields.items():
            ann = f.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                walk(ann, f"{prefix}{name}.")
            else:
                keys.append(f"{prefix}{name}")

    walk(Settings, "")
    return keys


# ---------------------------------------------------------------- the workspace every case starts from


def build_workspace(root: Path, runs: bool = True) -> None:
    """A harness repo, rollouts (with content failures), their labels, a human sample, an EDIT.json, an export,
    a config file, a candidate branch with a (rejected) verdict, a bare remote as the harness's origin, the hostile
    files the paths point at, and (``runs``; about 20 s) two runs, one ended and one waiting for review
    (``build_runs``)."""
    root.mkdir(parents=True, exist_ok=True)
    env = {"EVOHARNESS_HOME": str(root / "home")}
    (root / "edit.json").write_text(json.dumps({
        "message": "Add a loop lesson", "targets": "F3.repeated_action",
        "changes": [{"path": "lessons.md", "content": "- Never repeat a failing call.\n"}]}))
    with _cwd(root), _environ(env), _quiet():
        for argv in (["init", "h"],
                     ["rollout", "--harness", "h", "--env", "synthetic", "--tasks", "8", "--rollouts", "2",
                      "--out", "t.jsonl", "--sandbox", "inprocess"],
                     ["label", "t.jsonl", "--out", "labels.jsonl"],
                     ["dataset", "export", "-t", "t.jsonl", "--out", "export"],
                     ["dataset", "enqueue", "t.jsonl"],
                     ["candidate", "new", "--harness", "h", "--edit", "edit.json"]):
            if main(argv) != 0:
                raise SystemExit(f"fuzz_cli: building the workspace failed at {argv}")
        # a verdict on the candidate (rejected: exit 1), for show, pr and verify to read
        verify = ["verify", CANDIDATE, "--harness", "h", "--env", "synthetic", "--model", "standin:weak",
                  "--rollouts", "1", "--tasks", STR_VALUES["tasks"], "--record"]
        if main(verify) not in (0, 1):
            raise SystemExit(f"fuzz_cli: building the workspace failed at {verify}")
    subprocess.run(["git", "init", "-q", "--bare", str(root / "remote.git")], check=True)  # pr's origin
    subprocess.run(["git", "-C", str(root / "h"), "remote", "add", "origin", "../remote.git"], check=True)
    labels = [json.loads(line) for line in (root / "labels.jsonl").read_text().splitlines()]
    (root / "human.jsonl").write_text("".join(
        json.dumps({"trajectory_id": x["trajectory_id"], "failure_class": x["failure_class"]}) + "\n"
        for x in labels[:6]))
    real_traces(root)
    if runs:
        build_runs(root)
    (root / "cfg.toml").write_text("[run]\nseed = 1\n")
    (root / "dir").mkdir()
    (root / "empty.jsonl").write_bytes(b"")
    (root / "blank.jsonl").write_bytes(b"\n  \n")
    (root / "nul.bin").write_bytes(b"\x00" * 100)
    (root / "garbage.bin").write_bytes(random.Random(0).randbytes(4096))
    (root / "deep.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    (root / "bigint.json").write_bytes(b'{"id": 1' + b"1" * 5000 + b"}\n")
    (root / "latin1.txt").write_bytes(b"caf\xe9\n")
    (root / "loop").symlink_to("loop")
    (root / "full").symlink_to("/dev/full")  # an output on a full disk (a command replacing it replaces the link)


def build_runs(root: Path) -> None:
    """The runs of ``RUNS``: ``run-done`` on harness ``hd`` (ended, one edit merged) and ``run-review`` on ``hr``
    (waiting for review; its candidates are the branches ``Maker.awaiting`` reads). About 10 s each."""
    with _cwd(root), _environ({"EVOHARNESS_HOME": str(root / "home")}), _quiet():
        for run_id, harness in RUNS.items():
            argv = ["init", harness]
            if main(argv) != 0:
                raise SystemExit(f"fuzz_cli: building the workspace failed at {argv}")
            argv = [x for k in [f"run.harness={harness}", *RUN_SETTINGS] for x in ("--set", k)] + [
                "run", "--run-id", run_id, *(["--review"] if run_id == "run-review" else [])]
            if main(argv) != 0:
                raise SystemExit(f"fuzz_cli: building the workspace failed at {argv}")


def real_traces(root: Path) -> None:
    """Copies of public trace files in the workspace (``REAL_FILES``): three tau-bench airline records, one Who&When
    Algorithm-Generated log, one mini-swe-agent trajectory, and their canonical import (``real.jsonl``)."""
    data = SHARED_DATA if (SHARED_DATA / "tau_bench_airline_gpt4o").is_dir() else VENDORED_DATA
    tau = json.loads((data / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json").read_text())
    (root / "tau.json").write_text(json.dumps(tau[:3]))
    logs = sorted((data / "who_and_when" / "Who&When" / "Algorithm-Generated").glob("*.json"))
    shutil.copy(logs[0], root / "ww.json")
    shutil.copy(sorted((data / "mini_swe_agent_sample" / "trajs").glob("*/*.traj.json"))[0], root / "swe.traj.json")
    with _cwd(root), _environ({"EVOHARNESS_HOME": str(root / "home")}), _quiet():
        if main(["import", "tau.json", "ww.json", "swe.traj.json", "--out", "real.jsonl"]) != 0:
            raise SystemExit("fuzz_cli: importing the public trace samples failed")


def _inputs_of(root: Path) -> dict[str, str]:
    """Digest of every regular file of the workspace outside git's own directory and the home (which a refused
    command may still touch: a lock, a log)."""
    out = {}
    for p in root.rglob("*"):
        rel = p.relative_to(root)
        if rel.parts[0] in ("home", "home-user") or ".git" in rel.parts or p.is_symlink() or not p.is_file():
            continue
        out[str(rel)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@contextlib.contextmanager
def _cwd(path: Path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


@contextlib.contextmanager
def _environ(values: dict[str, str]):
    old = dict(os.environ)
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(old)


@contextlib.contextmanager
def _quiet():
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
        yield


# ---------------------------------------------------------------- making a case


class Maker:
    def __init__(self, rng: random.Random, keys: list[str], workspace: Path) -> None:
        self.rng = rng
        self.keys = keys
        self.workspace = workspace
        self.was_deep = False  # whether the last case made was a deep one
        self.git_state: str | None = None  # the last case's harness repo state (``GIT_STATES``), if one was made
        self.run_change: str | None = None  # the last case's change to a run (``change_run``), if one was made
        self.by_run = False  # whether the last case gives its command a run of RUNS (``RUN_INPUTS``)
        # the candidates run-review waits on: its harness's candidate branches (none in a workspace without runs)
        review = workspace / RUNS["run-review"]
        self.awaiting = sorted(subprocess.run(
            ["git", "-C", str(review), "for-each-ref", "--format=%(refname:short)", "refs/heads/candidate/"],
            capture_output=True, text=True, check=True).stdout.split()) if (review / ".git").is_dir() else []

    def argv(self, name: str, params: list[Param]) -> tuple[list[str], list[tuple[str, bytes]]]:
        """Arguments for ``name`` and the files to write into the case's directory first: a deep case (``deep``)
        half the time, else one whose values are replaced by hostile ones."""
        rng = self.rng
        self.git_state = self.run_change = None
        self.was_deep = rng.random() < DEEP_SHARE
        self.by_run = name in RUN_INPUTS and rng.random() < RUN_INPUT_SHARE  # (no draw for the other commands)
        if self.was_deep:
            return self.deep(name, params)
        chosen = self.run_way(name, [p for p in params if p.required or p.name in NEEDED.get(name, ()) or (
            p.name not in ("config", "set_") and rng.random() < 0.35)], params)
        values = {p.name: self.valid(name, p) for p in chosen}
        files: list[tuple[str, bytes]] = []
        mutable = [p for p in chosen if not p.is_flag]
        hits = 0 if rng.random() < 0.2 else rng.randint(1, 2)  # a working case now and then: its outputs, too
        for p in rng.sample(mutable, min(len(mutable), hits)):
            values[p.name] = self.hostile(p, files)
        argv = self.assemble(name, params, values)
        if rng.random() < 0.25:
            argv += ["--set", f"{rng.choice(self.keys)}={rng.choice(SET_VALUES)}"]
        if rng.random() < 0.1:
            files.append(("hostile.toml", rng.choice(CONFIGS)))
            argv += ["--config", "hostile.toml"]
        if rng.random() < 0.03:
            argv.append(rng.choice(["--nosuch", "--set", "-", "extra-argument"]))
        return argv, files

    def deep(self, name: str, params: list[Param]) -> tuple[list[str], list[tuple[str, bytes]]]:
        """Working arguments with exactly one thing changed: a field (or a byte) of one input file, one value of the
        example config given as ``--config``, or the output (``DEEP_OUT_PATHS``)."""
        rng = self.rng
        # fewer options than a hostile case: two options that do not go together (`--judge-window` without
        # `--labeller llm`) are a refusal, not the deep case wanted
        chosen = self.run_way(name, [p for p in params if p.required or p.name in NEEDED.get(name, ()) or (
            p.name not in ("config", "set_", *NOT_ALONE.get(name, ())) and rng.random() < 0.12)], params)
        values = {p.name: self.valid(name, p) for p in chosen}
        files: list[tuple[str, bytes]] = []
        inputs = [p for p in chosen if p.kind in ("path", "list-path") and p.name not in OUT_NAMES]
        outputs = [p for p in params if p.kind == "path" and p.name in OUT_NAMES]
        pick = rng.random()
        config = False
        harness = name in SETTINGS_NEEDED  # the repo a setting names: an input, as a --harness is
        run = RUN_ARGS.get(name) or (RUN_INPUTS[name][:2] if self.by_run else None)
        if run:  # a run id is no file to change: change_run changes the run
            inputs = [p for p in inputs if p.name != run[0]]
        if run and pick < 0.6 and (not inputs or rng.random() < RUN_DAMAGE_SHARE):
            self.change_run(values[run[0]], files)
        elif (inputs or harness) and pick < 0.6:
            if harness and (not inputs or rng.random() < 0.5):
                self.one_change("h", files)
            else:
                p = rng.choice(inputs)
                value = values[p.name]
                changed = [self.one_change(v, files) for v in value] if isinstance(value, list) else self.one_change(
                    value, files)
                values[p.name] = changed
        elif outputs and pick < 0.85:
            values[rng.choice(outputs).name] = rng.choice(DEEP_OUT_PATHS)
        else:
            config = True
        argv = self.assemble(name, params, values)
        if config:
            files.append(("example.toml", self.example_config(values.get("port"))))
            argv += ["--config", "example.toml"]
        return argv, files

    def run_way(self, name: str, chosen: list[Param], params: list[Param]) -> list[Param]:
        """``chosen`` with ``RUN_INPUTS``' parameter of ``name`` in it and the options it replaces out (a case given
        a run: ``by_run``), or else without it where it replaces others (evaluate's --run beside its --harness)."""
        if name not in RUN_INPUTS:
            return chosen
        param, _, replaced = RUN_INPUTS[name]
        if not self.by_run:
            return [p for p in chosen if not (p.name == param and replaced)]
        return [p for p in chosen if p.name not in replaced and p.name != param] + [
            p for p in params if p.name == param]

    def change_run(self, run_id: str, files: list[tuple[str, bytes]]) -> None:
        """One thing of run ``run_id`` changed (``self.run_change`` says which): a file of its directory (one field
        or byte, or damaged: ``one_change``), the checkpoint database cut short or with a page of garbage, a stray
        journal beside it, its harness repo (a file, or a git state: ``GIT_STATES``), or a candidate the review run
        awaits moved to main's commit or its ref damaged."""
        rng = self.rng
        if run_id not in RUNS or not (self.workspace / CHECKPOINTS).is_file():
            return
        pick = rng.random()
        if pick < 0.4:
            self.one_change(f"home/runs/{run_id}", files)
            self.run_change = "run directory"
        elif pick < 0.7:
            raw = (self.workspace / CHECKPOINTS).read_bytes()
            kind = rng.choice(["cut", "page", "journal", "empty"])
            if kind == "cut":  # half written: a crash or a full disk in the middle of a write
                data = raw[:rng.randrange(len(raw))]
            elif kind == "page":
                at = rng.randrange(len(raw))
                data = raw[:at] + rng.randbytes(min(4096, len(raw) - at)) + raw[at + 4096:]
            elif kind == "journal":  # a rollback journal of garbage left beside it (hot journal: sqlite reads it)
                files.append((CHECKPOINTS + "-journal", rng.randbytes(rng.randint(1, 8192))))
                data = raw
            else:
                data = b""
            files.append((CHECKPOINTS, data))
            self.run_change = f"checkpoints {kind}"
        elif pick < 0.85 or not self.awaiting:
            self.one_change(RUNS[run_id], files)
            self.run_change = "harness repo"
        else:  # a candidate's branch moved (to main's commit) or damaged while the run waits (a deleted one wedged it)
            branch, kind = rng.choice(self.awaiting), rng.choice(["moved", "damaged"])
            repo = self.workspace / RUNS["run-review"]
            main = subprocess.run(["git", "-C", str(repo), "rev-parse", "main"], capture_output=True, text=True,
                                  check=True).stdout.strip()
            files.append((f"{RUNS['run-review']}/.git/refs/heads/{branch}",
                          (main if kind == "moved" else "garbage").encode() + b"\n"))
            self.run_change = f"candidate branch {kind}"

    def one_change(self, name: str, files: list[tuple[str, bytes]]) -> str:
        """``name`` (a working input: a file, or a directory -- a harness repo, an export) with one field or one byte
        of one of its files changed. A file is written as a copy (``mut-N``); a file inside a directory is changed
        in the case's own copy of the directory."""
        rng = self.rng
        src = self.workspace / name
        if (src / ".git").is_dir() and rng.random() < GIT_STATE_SHARE:
            self.git_state = rng.choice(sorted(GIT_STATES))
            main = subprocess.run(["git", "-C", str(src), "rev-parse", "main"], capture_output=True, text=True,
                                  check=True).stdout.strip()
            for rel, data in GIT_STATES[self.git_state]:
                files.append((f"{name}/.git/{rel}", data.replace(b"MAIN", main.encode())))
            return name
        if src.is_dir():
            inside = sorted(p for p in src.rglob("*") if p.is_file() and ".git" not in p.relative_to(src).parts)
            if not inside:
                return name
            target = rng.choice(inside)
            files.append((str(target.relative_to(self.workspace)), self.changed_bytes(target)))
            return name
        if not src.is_file():
            return name
        target = f"mut-{len(files)}{src.suffix}"
        files.append((target, self.changed_bytes(src)))
        return target

    def changed_bytes(self, path: Path) -> bytes:
        if path.suffix in (".json", ".jsonl") and self.rng.random() < DAMAGED_SHARE:
            return damaged(path.read_bytes(), path.suffix, self.rng)
        return self._changed_bytes(path)

    def _changed_bytes(self, path: Path) -> bytes:
        """``path``'s bytes with one field of its JSON (at any depth, ``fuzz_importers.mutate``), one value of its
        TOML, or else one byte, changed."""
        from fuzz_importers import BIGINT, DEEP, mutate

        rng = self.rng
        raw = path.read_bytes()
        if raw and rng.random() < 0.15:
            b = bytearray(raw)
            b[rng.randrange(len(b))] = rng.randrange(256)
            return bytes(b)
        if path.suffix in (".json", ".jsonl"):
            try:
                if path.suffix == ".jsonl":
                    lines = [json.loads(x) for x in raw.splitlines() if x.strip()]
                    i = rng.randrange(len(lines))
                    lines[i] = mutate(lines[i], rng)
                    text = "".join(json.dumps(x) + "\n" for x in lines)
                else:
                    text = json.dumps(mutate(json.loads(raw), rng))
                return text.replace(json.dumps(DEEP), "[" * 5000 + "]" * 5000).replace(
                    json.dumps(BIGINT), "1" * 5000).encode()
            except (ValueError, IndexError):
                pass
        if path.suffix == ".toml":
            return self.toml_changed(raw.decode("utf-8", "replace")).encode("utf-8", "surrogatepass")
        b = bytearray(raw or b"\n")
        b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)

    def toml_changed(self, text: str) -> str:
        """``text`` with one ``key = value`` line's value replaced (``TOML_VALUES``), or the line removed."""
        lines = text.splitlines()
        settable = [i for i, line in enumerate(lines) if re.match(r"\s*[A-Za-z_][\w.]*\s*=", line)]
        if settable:
            i = self.rng.choice(settable)
            key, value = lines[i].split("=", 1)
            lines[i] = "" if self.rng.random() < 0.1 else f"{key}= {self.toml_value(value.split('#')[0].strip())}"
        return "\n".join(lines) + "\n"

    def toml_value(self, value: str) -> str:
        """A value in place of ``value``: half the time one of its own kind (a number out of range, an unknown
        word), so the file still validates as far as that setting's own check; else any of ``TOML_VALUES``."""
        rng = self.rng
        if rng.random() < 0.5:
            if re.fullmatch(r"-?\d+", value):
                return rng.choice(["0", "-1", "1", str(int(value) * 1000), "9" * 19, "2147483648"])
            if re.fullmatch(r"-?\d+\.\d*", value):
                return rng.choice(["0.0", "-0.5", "1e-300", "1e300", "0.999999", str(float(value) * 1000)])
            if value.startswith('"'):
                return rng.choice(['""', '"nosuch"', '" "', '"' + "a" * 300 + '"', '"../x"', '"/"'])
            if value in ("true", "false"):
                return "false" if value == "true" else "true"
        return rng.choice(TOML_VALUES)

    def example_config(self, port: str | None) -> bytes:
        """``ops/evoharness.example.toml`` made the case's own (home, harness, a free loopback port), then one value
        changed (``toml_changed``)."""
        text = EXAMPLE_CONFIG.read_text()
        text = re.sub(r'(?m)^home = .*$', 'home = "home"', text)
        text = re.sub(r'(?m)^harness = .*$', 'harness = "h"', text)
        text = re.sub(r'(?m)^port = .*$', f"port = {port or self.rng.randint(20_000, 60_000)}", text)
        text = re.sub(r'(?m)^host = .*$', 'host = "127.0.0.1"', text)
        return self.toml_changed(text).encode("utf-8", "surrogatepass")

    def assemble(self, name: str, params: list[Param], values: dict) -> list[str]:
        """The command line of ``name`` with ``values`` (by parameter name)."""
        rng = self.rng
        argv = name.split()
        if name == "serve":  # never the default port of whoever runs this: a free one, on loopback only
            values.setdefault("host", "127.0.0.1")
            values.setdefault("port", str(rng.randint(20_000, 60_000)))
        by_name = {p.name: p for p in params}
        for key, value in values.items():
            p = by_name.get(key)
            if p is None:
                argv += [f"--{key}", value]
            elif p.is_flag:
                argv.append(p.flag)
            elif p.flag is None:
                argv += value if isinstance(value, list) else [value]
            else:
                for v in value if isinstance(value, list) else [value]:
                    argv += [p.flag, v]
        return argv + [x for setting in SETTINGS_NEEDED.get(name, ()) for x in ("--set", setting)]

    def valid(self, command_name: str, p: Param):
        rng = self.rng
        if p.is_flag:
            return True
        if p.choices:
            return rng.choice(p.choices)
        if self.by_run and RUN_INPUTS.get(command_name, ("",))[0] == p.name:
            run = RUN_INPUTS[command_name][1]
            value = run if rng.random() < 0.9 else rng.choice(sorted(RUNS))  # now and then the other run
            return [value] if p.kind == "list-path" else value
        if TRACE_INPUTS.get(command_name) == p.name:
            value = self.trace_file(command_name)
            return [value] if p.kind == "list-path" else value
        if p.kind == "path":
            if p.name in OUT_NAMES:
                dirs = p.name == "dir" or command_name in DIR_OUTPUTS
                return f"out-{p.name}" + rng.choice(["", "/"] if dirs else ["", ".jsonl", "/"])
            return PATH_VALUES.get(p.name, "t.jsonl")
        if p.kind in ("list", "list-path"):
            if p.name in ("names", "paths"):
                return ["t.jsonl"]
            if p.name == "evidence":
                return ["t.jsonl"]
            return [STR_VALUES.get(p.name, "dev")]
        if p.kind == "int":
            if p.name == "port":
                return str(rng.randint(20_000, 60_000))
            return str(SMALL_INTS.get(p.name, p.default if isinstance(p.default, int) else 1))
        if p.kind == "float":
            return str(p.default if isinstance(p.default, float) else 0.5)
        if command_name == "dataset export" and p.name == "source":
            return rng.choice(["healthy", "all"])  # ("file", its working value until the twenty-fifth session, is none)
        if (run := RUN_ARGS.get(command_name)) and p.name == run[0]:
            return run[1] if rng.random() < 0.9 else rng.choice(sorted(RUNS))  # now and then the other run
        if p.name == "candidate" and command_name in ("approve", "reject") and self.awaiting and rng.random() < 0.8:
            return rng.choice(self.awaiting)
        if p.name == "candidate" and command_name in ("show", "pr", "verify", "candidate new", "approve", "reject"):
            return CANDIDATE if rng.random() < 0.8 else "main"
        return STR_VALUES.get(p.name, p.default if isinstance(p.default, str) else "x")

    def trace_file(self, command_name: str) -> str:
        """A working trace input: the synthetic rollouts, or a copy of a public trace set (``REAL_FILES``)."""
        if self.rng.random() >= REAL_SHARE:
            return "t.jsonl"
        return "real.jsonl" if command_name in CANONICAL_ONLY else self.rng.choice(REAL_FILES)

    def hostile(self, p: Param, files: list[tuple[str, bytes]]):
        rng = self.rng
        if p.kind == "path" and p.name not in OUT_NAMES:
            if rng.random() < 0.4:
                return self.mutated(rng.choice(REAL_FILES + ["t.jsonl"]) if p.name in TRACE_INPUTS.values() else
                                    PATH_VALUES.get(p.name, "t.jsonl"), files)
            return rng.choice(IN_PATHS)
        if p.kind == "path":
            return rng.choice(OUT_PATHS)
        if p.kind == "list-path":
            return [rng.choice(IN_PATHS) if rng.random() < 0.6 else self.mutated(rng.choice(REAL_FILES + ["t.jsonl"]),
                                                                                  files)]
        if p.kind == "list":
            return [rng.choice(STRINGS)]
        if p.kind == "int":
            return rng.choice(INTS)
        if p.kind == "float":
            return rng.choice(FLOATS)
        return rng.choice(STRINGS)

    def mutated(self, name: str, files: list[tuple[str, bytes]]) -> str:
        """A mutated copy of a working input file (``fuzz_importers.variant_bytes``), written as the case starts."""
        src = self.workspace / name
        if not src.is_file():
            return name
        from fuzz_importers import variant_bytes

        raw = src.read_bytes()
        try:
            data = damaged(raw, src.suffix, self.rng) if self.rng.random() < DAMAGED_SHARE else \
                variant_bytes(raw, src.suffix == ".jsonl", self.rng)
        except (ValueError, IndexError):  # not JSON (a TOML config): flip bytes instead
            b = bytearray(raw)
            for _ in range(self.rng.randint(1, 5)):
                b[self.rng.randrange(len(b))] = self.rng.randrange(256)
            data = bytes(b)
        target = f"mut-{len(files)}{src.suffix}"
        files.append((target, data))
        return target


DAMAGED_SHARE = 0.3  # mutated JSON inputs damaged as one of ``DAMAGES`` (else a field or bytes: ``variant_bytes``)
DAMAGES = ("truncated", "nan", "huge number", "empty", "binary", "deep", "not utf-8", "bom", "crlf")
_NUMBER = re.compile(rb'(?<=[:\[,] )-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?=[,}\]\n])|(?<=[:\[,])-?\d+(?:\.\d+)?(?=[,}\]])')


def damaged(raw: bytes, suffix: str, rng: random.Random) -> bytes:
    """``raw`` (a JSON or JSON-lines file) damaged one way (``DAMAGES``): cut at a random byte, a number made NaN,
    Infinity or 1e999, a number made 5,000 digits or 1e308, emptied, replaced by random bytes, a value nested
    100,000 deep, a byte no UTF-8 has inside a string, a UTF-8 byte-order mark in front, CRLF line ends."""
    kind = rng.choice(DAMAGES)
    numbers = list(_NUMBER.finditer(raw))
    if kind == "truncated":
        return raw[:rng.randrange(len(raw) or 1)]
    if kind in ("nan", "huge number") and numbers:
        m = rng.choice(numbers)
        new = rng.choice([b"NaN", b"Infinity", b"-Infinity", b"1e999"]) if kind == "nan" else \
            rng.choice([b"1" * 5000, b"1e308", b"-" + b"9" * 400, b"123456789012345678901234567890"])
        return raw[:m.start()] + new + raw[m.end():]
    if kind == "empty":
        return rng.choice([b"", b"\n", b"[]", b"{}", b"null"])
    if kind == "binary":
        return rng.randbytes(rng.randint(1, 4096))
    if kind == "deep" and numbers:
        m = rng.choice(numbers)
        return raw[:m.start()] + b"[" * 100_000 + b"]" * 100_000 + raw[m.end():]
    if kind == "not utf-8":
        at = raw.find(b'"', rng.randrange(len(raw) or 1))
        at = at + 1 if at >= 0 else rng.randrange(len(raw) + 1)
        return raw[:at] + rng.choice([b"\xff\xfe", b"caf\xe9", b"\xed\xa0\x80", b"\xc0\xaf"]) + raw[at:]
    if kind == "bom":
        return b"\xef\xbb\xbf" + raw
    return raw.replace(b"\n", b"\r\n") if b"\n" in raw else raw + b"\r\n"


# ---------------------------------------------------------------- running a case


def run_case(case: Case, workspace: Path, scratch: Path, files: list[tuple[str, bytes]], timeout: float,
             headroom: int = 4 << 30) -> None:
    """Run ``case`` in a forked child on a fresh copy of ``workspace``; ``headroom``: the bytes of address space the
    child may map beyond what this process holds (negative: less than it holds, so that it runs out)."""
    where = scratch / "case"
    if where.exists():
        shutil.rmtree(where, ignore_errors=True)
    shutil.copytree(workspace, where, symlinks=True)
    os.mkfifo(where / "fifo")
    for name, data in files:
        (where / name).write_bytes(data)
    before = _inputs_of(where)
    out_file, err_file = scratch / "stdout", scratch / "stderr"
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        _child(case.argv, where, Path("/dev/full") if case.stdout_full else out_file, err_file, headroom)
    status, timed_out = _wait(pid, timeout)
    case.seconds = time.monotonic() - start
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # whatever the command started and left (a render process, git)
    case.out = "" if case.stdout_full else out_file.read_text(errors="replace")
    case.err = err_file.read_text(errors="replace")
    if timed_out:
        case.rc = None
        if case.command not in LONG_RUNNING:
            case.problems.append(f"still running after {timeout:g} s")
        return
    case.rc = os.waitstatus_to_exitcode(status)
    check(case, before, _inputs_of(where))


def _child(argv: list[str], where: Path, out_file: Path, err_file: Path, headroom: int) -> None:
    rc = 1
    try:
        os.setsid()
        os.chdir(where)
        for key in [k for k in os.environ if k.startswith("EVOHARNESS_")]:
            del os.environ[key]
        os.environ.update({"EVOHARNESS_HOME": str(where / "home"), "HOME": str(where / "home-user"),
                           "NO_COLOR": "1", "COLUMNS": "120"})
        # 4 GiB beyond what the process holds as it forks: a flat 4 GiB sat below a long-lived parent's size (a
        # pytest worker after two thousand tests), so every allocation of the case failed
        held = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
        limit = held + headroom
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, out_file), (2, err_file)):
            f = os.open(path, os.O_WRONLY | (0 if path.is_char_device() else os.O_CREAT | os.O_TRUNC), 0o600)
            os.dup2(f, fd)
        # the streams too: under pytest (or any embedding that captured them) sys.stderr is no longer fd 2
        # (with the interpreter's own encoding and error handlers: stderr's backslashreplace writes an
        # argument's lone surrogate as an escape, where a strict stream raised)
        for name, fd in (("stdin", 0), ("stdout", 1), ("stderr", 2)):
            real = getattr(sys, f"__{name}__")
            setattr(sys, name, open(fd, "r" if fd == 0 else "w", encoding=real.encoding,  # noqa: SIM115
                                    errors=real.errors, closefd=False))
        rc = main(argv)
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 -- the point: a traceback is what the fuzz looks for
        traceback.print_exc()
        rc = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(rc if isinstance(rc, int) else 1)


def _wait(pid: int, timeout: float) -> tuple[int, bool]:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status, False
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            return status, True
        time.sleep(0.01)


def check(case: Case, before: dict[str, str], after: dict[str, str]) -> None:
    """The rule: exit 0 or 2, no traceback, one `error:` line on a refusal and nothing of the workspace changed; an
    error line that names no output for a refused write; no output taken inside a git directory."""
    if "Traceback (most recent call last)" in case.out + case.err:
        case.problems.append("traceback")
    allowed = {0, 2} | ({1} if case.command in EXIT_1_OK else set())
    if case.rc not in allowed:
        case.problems.append(f"exit {case.rc}")
    unnamed = [line for line in case.err.splitlines() if re.fullmatch(
        r"error: (no space left on device|disk quota exceeded|file too large)", line.strip().lower())]
    if unnamed:
        case.problems.append(f"a refused write names no output: {unnamed[0]!r}")
    if case.git_state in NOT_UNCOMMITTED and "uncommitted changes" in case.err:
        case.problems.append(f"{case.git_state} in the harness repo named as uncommitted changes")
    if case.rc == 0 and (git := _git_output(case.argv)):
        case.problems.append(f"took an output inside a git directory: {git}")
    if case.rc == 2 and case.stdout_full and case.err.rstrip().endswith(STDOUT_FULL_LINE):
        return  # the command did its work and could not print what it had to say: its progress lines and outputs stay
    outputs = _outputs(case.argv)
    if case.rc == 2 and any(case.err.rstrip().endswith(f"error: {o}: no space left on device") for o in outputs
                            if o in FULL_LINKS):
        return  # the work was done and its result could not be written to a full device: its progress lines stay
    if case.rc == 2:
        left = sorted(k for k in after if k not in before and any(k == o or k.startswith(o.rstrip("/") + "/")
                                                                   for o in outputs))
        if left:
            case.problems.append(f"refused, but left an output behind: {', '.join(left[:5])}")
        lines = [line for line in case.err.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("error: ")]
        if len(errors) != 1:
            case.problems.append(f"{len(errors)} error lines")
        # --skip-invalid's own report of what it skipped ("skipped: FILE:record N: ...", "skipped 3 invalid ...")
        others = [line for line in lines if not line.startswith(("error: ", "warning: ")) and not (
            "--skip-invalid" in case.argv and line.startswith("skipped"))]
        if others:
            case.problems.append(f"stderr lines that are no error or warning: {others[0][:120]!r}")
        changed = sorted(k for k in before if after.get(k) != before[k])
        if changed:
            case.problems.append(f"refused, but changed or removed {', '.join(changed[:5])}")


def _stats(root: Path) -> dict[str, tuple[int, int]]:
    """Size and modification time of every file under ``root``, git's and the home's included: a case runs on a copy,
    and nothing of the original may change (a copied run maps its harness to the copy's: ``graph/moved.py``)."""
    out = {}
    for p in root.rglob("*"):
        with contextlib.suppress(OSError):
            st = p.lstat()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


FULL_LINKS = ("full",)  # the workspace's outputs that are a link to /dev/full


def _outputs(argv: list[str]) -> list[str]:
    """The values of the output options (``OUT_OPTIONS``) and `init DIR`."""
    values = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in OUT_OPTIONS]
    values += [a.split("=", 1)[1] for a in argv if a.split("=", 1)[0] in OUT_OPTIONS and "=" in a]
    return values + (argv[1:2] if argv[:1] == ["init"] else [])


def _git_output(argv: list[str]) -> str | None:
    """The value of an output option (``OUT_OPTIONS``, `init DIR`) with a ``.git`` component, if any."""
    return next((v for v in _outputs(argv) if any(part.lower() == ".git" for part in Path(v).parts)), None)


# ---------------------------------------------------------------- the loop


def fuzz(budget_s: float, n: int | None, seed: int, only: list[str] | None = None, timeout: float = TIMEOUT_S,
         out=sys.stdout) -> dict[str, dict[str, int]]:
    """Run cases until ``budget_s`` or ``n``; per command: cases, deep cases, exit 0, exit 2, other, failures."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # fuzz_importers, beside this script
    table = commands()
    if only:
        unknown = [c for c in only if c not in table]
        if unknown:
            raise SystemExit(f"fuzz_cli: unknown command(s) {unknown}; commands: {', '.join(table)}")
        table = {c: table[c] for c in only}
    rng = random.Random(seed)
    order = sorted(table)
    rng.shuffle(order)
    kinds = ("cases", "deep", "git", "exit 0", "exit 2", "other", "failures")
    counts = {c: dict.fromkeys(kinds, 0) for c in order}
    with tempfile.TemporaryDirectory(prefix="fuzz-cli-") as tmp:
        workspace, scratch = Path(tmp) / "workspace", Path(tmp) / "scratch"
        build_workspace(workspace)
        scratch.mkdir()
        maker = Maker(rng, settings_keys(), workspace)
        original = _stats(workspace)
        start, i = time.monotonic(), 0
        while (n is None or i < n) and time.monotonic() - start < budget_s:
            name = order[i % len(order)]
            argv, files = maker.argv(name, table[name])
            case = Case(name, argv, stdout_full=FULL_DEVICE and rng.random() < STDOUT_FULL_SHARE,
                        git_state=maker.git_state, run_change=maker.run_change)
            run_case(case, workspace, scratch, files, timeout)
            if (now := _stats(workspace)) != original:  # a copy's run wrote the original's (its harness, its home)
                changed = sorted(k for k in original.keys() | now.keys() if original.get(k) != now.get(k))
                case.problems.append(f"changed the workspace it was copied from: {', '.join(changed[:5])}")
                original = now
            c = counts[name]
            c["cases"] += 1
            c["deep"] += maker.was_deep
            c["git"] += maker.git_state is not None
            c["exit 0" if case.rc == 0 else "exit 2" if case.rc == 2 else "other"] += 1
            if case.problems:
                c["failures"] += 1
                report(i, case, out)
            i += 1
    return counts


def report(i: int, case: Case, out) -> None:
    shown = [a if len(a) <= 80 else f"{a[:40]}...<{len(a)} chars>" for a in case.argv]
    full = (" (stdout on /dev/full)" if case.stdout_full else "") + (
        f" (harness repo: {case.git_state})" if case.git_state else "") + (
        f" (run: {case.run_change})" if case.run_change else "")
    print(f"FAILURE case {i} ({case.command}){full}: {'; '.join(case.problems)}\n  argv: {shown!r}\n  exit {case.rc}, "
          f"{case.seconds:.1f} s", file=out)
    tail = (case.err or case.out).strip().splitlines()[-12:]
    for line in tail:
        print(f"  | {line[:300]}", file=out)


def main_(argv: list[str] | None = None) -> int:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=DefaultsHelp)
    ap.add_argument("--budget", type=float, default=60.0, help="seconds of fuzzing (the workspace's build not counted)")
    ap.add_argument("-n", type=int, default=None, help="stop after this many cases (default: the budget decides)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--command", action="append", help="fuzz only this command (repeatable; e.g. 'dataset export')")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds a case may take")
    args = ap.parse_args(argv)
    counts = fuzz(args.budget, args.n, args.seed, args.command, args.timeout)
    total = {k: sum(c[k] for c in counts.values()) for k in counts[next(iter(counts))]}
    for name, c in [*sorted(counts.items()), ("all", total)]:
        print(f"{name:16} {c['cases']:5} cases ({c['deep']:4} deep, {c['git']:3} git)  {c['exit 0']:4} exit 0  "
              f"{c['exit 2']:4} exit 2  "
              f"{c['other']:3} other  {c['failures']:3} failures")
    return 1 if total["failures"] else 0


if __name__ == "__main__":
    from evoharness.benchrepeat import same_checkout

    same_checkout(__file__)
    raise SystemExit(main_())
