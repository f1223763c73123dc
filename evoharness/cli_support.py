"""Helpers for the per-area CLI modules (kept apart from cli.py to avoid import cycles)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import TextIO

import typer

from evoharness.errors import SYMLINK_LOOP


class AppState:
    """What the root callback hands to every command (``ctx.obj``)."""

    def __init__(self, config: Path | None, overrides: list[str]) -> None:
        self.config_path = config
        self.overrides = overrides
        self.collector = False  # whose log a collector reads (`serve`: JSON lines unless log_format says)
        self._settings = None

    @property
    def settings(self):
        if self._settings is None:
            from evoharness.config import load_settings

            self._settings = load_settings(self.config_path, self.overrides)
            self._configure_logging()
        return self._settings

    def collected(self) -> None:
        """The command's log is read by a collector (`serve`): JSON lines when ``log_format`` is auto."""
        if not self.collector:
            self.collector = True
            if self._settings is not None:  # already loaded (a --set was checked before the command ran)
                self._configure_logging()

    def _configure_logging(self) -> None:
        from evoharness.logging import configure_logging

        configure_logging(self._settings.log_level, self._settings.log_format, collector=self.collector)


def settings_of(ctx: typer.Context, *, collector: bool = False):
    """The loaded ``Settings`` for a command (reads the config on first use). ``collector``: the command's
    log is read by a log collector, not a person (JSON lines when ``log_format`` is auto and not a TTY)."""
    root_ctx = ctx.find_root()
    if not isinstance(root_ctx.obj, AppState):
        root_ctx.obj = AppState(None, [])
    if collector:
        root_ctx.obj.collected()
    return root_ctx.obj.settings


# Most rollouts per task one command takes (--rollouts / -k): the noise table stops at 16 and a sequential
# verification asks at most sequential_max_factor x k; a typo such as 99999999999 built a list of that
# many requests before the first rollout (21 GB, then the kernel killed it).
MAX_ROLLOUTS_PER_TASK = 1000
# Most rollouts `evoharness rollout` makes in one command (tasks x k; ~1.2 KB each while planned).
MAX_ROLLOUTS = 100_000


# Seeds `rollout --seed` takes: rollout k uses seed + k, sent as the request's `seed` to an OpenAI-compatible
# endpoint. One past 64 bits (99999999999999999999999) is refused there (vLLM checks int64), so every rollout
# failed, silently; numpy's seeding refuses a negative seed or one past 2**32 - 1. 2**31 - 1 (a signed 32-bit
# seed) is the conservative range every consumer takes.
MAX_SEED = 2**31 - 1


# Most rounds a --round / --rounds option or run.max_rounds takes: a round count past this is a typo (a round
# takes seconds to hours), and 99999999999999999999999 overflowed SQLite's INTEGER in `dataset enqueue
# --round` (a traceback). The demo's own limit is lower: its budget (6000 rollouts) ends it within ~5 rounds.
MAX_ROUNDS = 10_000
MAX_DEMO_ROUNDS = 100
# Most rollouts at once (--workers, sandbox.workers): each is a sandbox (a process or container) on this
# machine, or a request in flight to the model; more starts thousands of sandboxes at once.
MAX_WORKERS = 256


def check_range(value: int | None, option: str, least: int, most: int, note: str = "") -> int | None:
    """``value`` when it is None or within least..most; otherwise one ``error:`` line, exit 2."""
    if value is not None and not least <= value <= most:
        fail(f"{option} must be {least:,} to {most:,}{note}, not {value:,}")
    return value


def check_rollouts(k: int | None, option: str = "--rollouts", least: int = 1) -> int | None:
    """``k`` when it is None or within least..MAX_ROLLOUTS_PER_TASK; otherwise one ``error:`` line, exit 2."""
    if k is not None and not least <= k <= MAX_ROLLOUTS_PER_TASK:
        fail(f"{option} must be {least} to {MAX_ROLLOUTS_PER_TASK:,} rollouts per task, not {k:,}")
    return k


TEMPERATURE_HELP = ("sampling temperature of an openai:URL#model agent model, 0 to 2 (default: run.temperature "
                    "where the model is run.model, else 0); written into the spec as ?temperature=T")


def agent_spec(settings, model: str | None, temperature: float | None) -> str:
    """The agent model spec a command runs: ``model`` (None: ``run.model``) at ``temperature`` (None: as the spec
    says; for ``run.model``, ``run.temperature``). InputError for a temperature the model cannot take. An
    ``openai:URL`` spec (no ``#model``) given a temperature is resolved to its server's one model first, as
    `rollout` and `run` do: it was refused as a model that "does not sample"."""
    from evoharness.model_specs import with_temperature

    spec, option = model if model is not None else settings.run.model, "--temperature"
    if model is None and temperature is None:
        temperature, option = settings.run.temperature, "run.temperature"
    if temperature:
        from evoharness.agent.models import resolve_model_spec

        spec = resolve_model_spec(spec)  # other specs come back unchanged
    return with_temperature(spec, temperature, option)


def output_dir(raw: str) -> Path:
    """A typer ``parser`` for an ``--out DIR`` option (dataset export, report, demo): ``-`` is a usage error, as for
    ``--out FILE`` (``output_file``): it made a directory named ``-`` in the working directory."""
    if raw == "-":
        raise typer.BadParameter("'-' (standard output) is not supported for --out; name the directory to write")
    path = Path(raw)
    outside_git(raw, path)
    _under_a_directory(raw, path, "a directory")  # `demo --out t.jsonl/x` printed 'a fresh demo in ...' first
    if os.path.lexists(path) and not os.path.isdir(path):  # `demo --out LINK-TO-/dev/full`: the same two lines
        try:
            os.stat(path)
            loop = False
        except OSError as e:
            loop = e.errno == errno.ELOOP
        what = f": {SYMLINK_LOOP}" if loop else " exists and is not a directory"
        raise typer.BadParameter(f"{raw}{what}; --out is the directory the files are written into")
    if path.suffix.lower() in _FILE_SUFFIXES and not path.is_dir():  # `report --out x/report.md` made a dir report.md
        raise typer.BadParameter(f"{raw} names a file; --out is the directory the files are written into "
                                 f"(e.g. --out {path.parent / path.stem})")
    return path


# What a user names when they mean a file (a report, a data file), never a new output directory.
_FILE_SUFFIXES = frozenset({".md", ".html", ".htm", ".json", ".jsonl", ".png", ".csv", ".txt", ".parquet", ".pdf"})


def output_file(default_name: str):
    """A typer ``parser`` for an ``--out FILE`` option: a value ending in ``/`` or naming an existing directory
    means ``DIR/default_name`` (as ``cp FILE DIR/`` does), not a file named like the directory (typer's
    ``Path`` drops the trailing slash, so ``--out runs/`` wrote a file ``runs``; an existing directory failed
    only after the work was done). An empty value is a usage error. A file name implied this way never
    replaces an existing file (``--out RUN_DIR`` would silently replace the run's own ``trajectories.jsonl``):
    that is a usage error, raised while the options are parsed, before any work; an explicit ``--out FILE``
    still replaces FILE. ``-`` is a usage error too (it wrote a file named ``-``, where a trace argument ``-`` reads
    standard input)."""

    def parse(raw: str) -> Path:
        if not raw.strip():
            raise typer.BadParameter("an empty path; name the file to write")
        if raw == "-":  # a trace argument '-' reads standard input; '--out -' wrote a file named '-'
            raise typer.BadParameter("'-' (standard output) is not supported for --out; name the file to write")
        path = Path(raw)
        outside_git(raw, path)
        if raw.endswith(("/", os.sep)) or path.is_dir():
            implied = path / default_name
            if os.path.lexists(implied):
                raise typer.BadParameter(
                    f"{raw} is a directory and {implied} already exists; a directory's {default_name} is never "
                    f"replaced: pass --out {implied} to replace it, or name another file")
            return implied
        _under_a_directory(raw, path)
        return path

    return parse


def outside_git(raw: str, path: Path) -> None:
    """``typer.BadParameter`` when ``path`` lies inside a git directory (``inside_git``)."""
    if inside_git(path):
        raise typer.BadParameter(f"{raw} is {INSIDE_GIT}")


INSIDE_GIT = "inside a git directory (.git), which evoharness never writes into; name a path outside it"


def inside_git(path: Path) -> bool:
    """Whether ``path``, as typed or as its nearest existing parent resolves (a symlink into one), lies inside a git
    directory: a component ``.git``, in any case (git on a case-insensitive disk reads ``.GIT`` as ``.git``).
    `import --out h/.git/x` wrote its trajectories into the harness repo's own git directory, where git keeps refs,
    objects and the verdict key, and nothing of evoharness's belongs."""
    parts = list(path.parts)
    with contextlib.suppress(OSError, RuntimeError):  # a loop or an unreadable parent: _under_a_directory says so
        existing = next(p for p in (path, *path.parents) if os.path.lexists(p))
        parts += list(existing.resolve().parts)
    return any(part.lower() == ".git" for part in parts)


def _under_a_directory(raw: str, path: Path, what: str = "a file") -> None:
    """``typer.BadParameter`` when the nearest existing parent of ``path`` is no directory (a file, a device, a symlink
    loop): nothing can be written there, and `evaluate --out loop/x` or `--out t.jsonl/x` ran all of its rollouts
    before the write said so (`error: loop: file exists`). ``what`` the option names (an ``--out DIR``: "a
    directory"; `demo --out t.jsonl/x` was told to name a file)."""
    for parent in path.parents:
        try:
            if os.path.isdir(parent) or not os.path.lexists(parent):
                if os.path.isdir(parent):
                    return
                continue
            os.stat(parent)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise typer.BadParameter(f"{raw}: {parent}: {SYMLINK_LOOP}; name {what} in a directory") from None
            raise typer.BadParameter(f"{raw}: {parent}: {(e.strerror or str(e)).lower()}") from None
        raise typer.BadParameter(f"{raw}: {parent} is not a directory; name {what} in a directory")


def no_stdin(path: Path, command: str) -> None:
    """``-`` (standard input) names a trace file for ``import``, ``diagnose``, ``label`` and ``export-otel``; a
    command that reads its file more than once (or a labels file) refuses it with one line saying what to do, not
    "no such file"."""
    if str(path) == "-":
        from evoharness.errors import InputError

        raise InputError("-", f"{command} reads a file, not standard input: write it to a file first "
                              "(e.g. `evoharness import - --out FILE`)")


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and the noun it counts: "1 rollout", "2 rollouts", "1 trajectory" / "3 trajectories" via ``plural``."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def fail(message: str, code: int = 2) -> None:
    """Print one error line to stderr and exit with ``code``."""
    typer.echo(f"error: {one_line(message)}", err=True)
    raise typer.Exit(code)


def one_line(message: str) -> str:
    """``message`` with each control character, Unicode line or paragraph break and bidirectional text control
    written as its Python escape (``\\n``, ``\\x1b``, ``\\u2028``): an error names what the user gave (a run id, a
    branch, a revision), and one holding a line break printed the error over two lines, the second of the user's
    choosing (``error: ...`` included); an escape sequence reached the terminal as it was.

    A byte the shell passed that is not UTF-8 (Python's ``\\udced``) is written as that byte, ``\\xed``, and
    half a UTF-16 surrogate pair (``\\ud800``, from a program) as its escape: `diagnose $'\\xed\\xa0\\x80'` named
    ``\\udced\\udca0\\udc80``, which the user never typed, and the line could not be written to a strict stream."""
    from evoharness.untrusted import control_character

    if control_character(message) is not None:
        message = "".join(ch if control_character(ch) is None else ch.encode("unicode_escape").decode("ascii")
                          for ch in message)
    return shortened(_SURROGATE.sub(_surrogate_shown, message))


_SURROGATE = re.compile("[\ud800-\udfff]")


def _surrogate_shown(m: re.Match) -> str:
    code = ord(m[0])
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


LONG_WORD = 400  # characters of one word (no space in it) an error line shows whole


def shortened(message: str) -> str:
    """``message`` with each word (a run of non-space characters) over ``LONG_WORD`` characters cut to its start and
    end, saying how much was cut: an error names what the user gave, and a 100,000-character id was echoed whole, a
    100 KB line that buried what was wrong with it."""
    if len(message) <= LONG_WORD:
        return message
    return _LONG_WORD.sub(lambda m: f"{m[0][:240]}...[{len(m[0]) - 300:,} characters cut]...{m[0][-60:]}", message)


_LONG_WORD = re.compile(rf"\S{{{LONG_WORD + 1},}}")


def command_name() -> str:
    """How to type ``evoharness`` again in this shell, for printed next steps.

    ``evoharness`` when that is on PATH (and is the one running); otherwise the path it was started by,
    e.g. ``.venv/bin/evoharness``, shell-quoted, so a printed command runs as printed.
    """
    argv0 = Path(sys.argv[0])
    if argv0.name == "__main__.py":
        return f"{shell_words(_short(Path(sys.executable)))} -m evoharness"
    if argv0.name != "evoharness":  # called in-process (tests, an embedding program)
        return "evoharness"
    found = shutil.which("evoharness")
    if found and Path(found).resolve() == argv0.resolve():
        return "evoharness"
    return shell_words(_short(argv0))


class Ticker:
    """A line on stderr every ``EVERY`` seconds while a command reads trajectories (``[  10.0s] 42,000 trajectories
    read``), on a terminal only (a log or a test sees none): `diagnose` / `label` / `import` of 100,000 runs said
    nothing for minutes. ``tick()`` once per trajectory: a clock read, ~60 ns."""

    EVERY = 10.0

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.on = self.stream.isatty()
        self.t0 = self.last = time.monotonic()
        self.n = 0

    def tick(self) -> None:
        self.n += 1
        if self.on and (now := time.monotonic()) - self.last >= self.EVERY:
            self.last = now
            print(f"[{now - self.t0:6.1f}s] {self.n:,} trajectories read", file=self.stream, flush=True)


def shell_words(*words: object) -> str:
    """``words`` as one command line a POSIX shell splits back into them (``shlex.quote`` each): a printed command
    with a path that holds a space or a ``&`` (Who&When's folders) runs as printed."""
    import shlex

    return " ".join(shlex.quote(str(w)) for w in words)


def activate_hint(command: str) -> str | None:
    """``source .venv/bin/activate`` when ``command`` (``command_name``: shell words) is a virtualenv's script not
    on PATH."""
    import shlex

    path = Path(shlex.split(command)[0])
    activate = path.parent / "activate"
    if len(path.parts) > 1 and activate.is_file():
        return f"or run `{shell_words('source', activate)}` once, then type `evoharness ...`"
    return None


def _short(path: Path) -> str:
    try:
        rel = path.absolute().relative_to(Path.cwd())
    except ValueError:
        return str(path)
    return str(rel) if len(rel.parts) > 1 else os.path.join(".", rel)
