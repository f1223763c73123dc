"""A benchmark asked for no work says so in one `error:` line and exits 2 (it used to divide by zero, fail
to import an empty file, or print zero rates)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.modules import load_file

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _this_checkouts_code(monkeypatch):
    """The scripts run as subprocesses import this checkout's evoharness: from a second checkout (a git worktree
    using the first one's .venv) they imported the first one's, and the rule-check scripts now refuse that
    (benchrepeat.same_checkout)."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))


@pytest.mark.parametrize("script,args", [
    ("benchmarks/export_scale.py", ["--n", "0"]),
    ("benchmarks/export_scale.py", ["--max-tokens", "0"]),
    ("benchmarks/export_scale.py", ["--tokenizer", "no-such-dir"]),
    ("benchmarks/export_scale.py", ["--fresh", "--store"]),  # the service's store: no command exports it
    ("benchmarks/label_throughput.py", ["--copies", "0"]),
    ("benchmarks/gc_hold.py", ["--cycles", "0"]),
    ("benchmarks/gc_hold.py", ["--against", "no-such-tree"]),
    ("benchmarks/label_throughput.py", ["--data", "no-such.json"]),
    ("benchmarks/rollout_overhead.py", ["--rollouts", "0"]),
    ("benchmarks/rollout_overhead.py", ["--batch", "0"]),
    ("benchmarks/rollout_overhead.py", ["--breakdown", "--batch", "1"]),
    ("benchmarks/rollout_overhead.py", ["--breakdown", "--batch", "8", "--model", "openai:http://127.0.0.1:9/v1#m"]),
    ("benchmarks/loop_turns.py", ["--rollouts", "0"]),
    ("benchmarks/loop_turns.py", ["--turns", "7", "0"]),
    ("benchmarks/model_boundary.py", ["--rollouts", "0"]),
    ("benchmarks/model_boundary.py", ["--reps", "0"]),
    ("scripts/dump_labels.py", ["no-such-dir/labels.tsv"]),
    ("benchmarks/tau2_gold_paths.py", ["--limit", "0"]),
    ("benchmarks/tau2_gold_paths.py", ["--out", "/dev/null/x"]),  # a missing folder is made; one under a file is not
    ("scripts/bfcl_ground_truth.py", ["multi_turn_bsae"]),  # a mistyped category: a traceback before
    ("scripts/bfcl_ground_truth.py", ["multi_turn_base", "--help"]),
    ("scripts/import_share.py", ["no-such-package-dir"]),  # it printed '0 internal imports (0.0%)'
    ("benchmarks/label_groups.py", ["--data", "no-such-dir"]),  # no Algorithm-Generated folder: nothing to group
    ("benchmarks/label_invariance.py", ["--only", "quote"]),  # no check's name: the table's header alone, exit 0
    ("benchmarks/verification_power_bound.py", ["--boot", "0"]),  # no bootstrap draws: no interval to give
])
def test_no_work_is_one_error_line(script, args, tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / script), *args], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    errors = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
    assert proc.returncode == 2 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]


def test_instructions_without_valgrind_is_one_error_line(tmp_path):
    """``export_scale.py --instructions`` needs valgrind: without it on PATH, one ``error:`` line and exit 2."""
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks/export_scale.py"), "--instructions", "--n", "5"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={"PATH": str(tmp_path), "PYTHONPATH": str(ROOT)})
    errors = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
    assert proc.returncode == 2 and len(errors) == 1 and "valgrind" in errors[0], proc.stderr[-2000:]


def test_real_without_the_public_data_is_one_error_line(tmp_path):
    """``export_scale.py --real`` where ../shared/data is missing: was an InputError traceback from the import."""
    script = tmp_path / "repo" / "benchmarks" / "export_scale.py"
    script.parent.mkdir(parents=True)
    script.write_text((ROOT / "benchmarks" / "export_scale.py").read_text())
    proc = subprocess.run([sys.executable, str(script), "--real", "--n", "5"], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    errors = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
    assert proc.returncode == 2 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "gpt-4o-airline.json" in errors[0]


@pytest.mark.parametrize("content", ['{"a": 1}', "[1, 2]", "[" * 100_000 + "]" * 100_000])
def test_tau_dev_sample_of_a_file_that_is_no_record_list_is_one_error_line(content, tmp_path):
    """``tau_dev_sample.py --data FILE``: an object, a list of numbers or a deeply nested list was a traceback
    (AttributeError, RecursionError)."""
    data = tmp_path / "records.json"
    data.write_text(content)
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks/tau_dev_sample.py"), "--data", str(data)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    errors = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
    assert proc.returncode == 2 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]


@pytest.mark.parametrize("content", ['{"a": 1}', "[1, 2]", '[{"trial": "x"}]', "[]", "[" * 100_000 + "]" * 100_000])
def test_label_throughput_of_a_file_that_is_no_record_list_is_one_error_line(content, tmp_path):
    """``label_throughput.py --data FILE`` that is no list of tau-bench records: was a traceback in replicate()."""
    data = tmp_path / "records.json"
    data.write_text(content)
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks/label_throughput.py"), "--copies", "1",
                           "--data", str(data)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    errors = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
    assert proc.returncode == 2 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]


def _sample_input(script: str, tmp_path: Path) -> Path:
    """A small input each sample script reads: failed SWE-bench runs, or reward-0 tau-bench records."""
    if script.endswith("swe_dev_sample.py"):
        for inst in ("a__a-1", "b__b-2"):
            (tmp_path / "logs" / inst).mkdir(parents=True)
            (tmp_path / "logs" / inst / "report.json").write_text(json.dumps({"resolved": False}))
            (tmp_path / "trajs" / inst).mkdir(parents=True)
        return tmp_path
    data = tmp_path / "records.json"
    data.write_text(json.dumps([{"task_id": t, "trial": k, "reward": 0} for t in range(30) for k in range(2)]))
    return data


@pytest.mark.parametrize("script", ["benchmarks/swe_dev_sample.py", "benchmarks/tau_dev_sample.py"])
def test_a_sample_piped_into_a_reader_that_left_ends_quietly(script, tmp_path):
    """``swe_dev_sample.py | head -1``: the reader leaves after its line; the script was a BrokenPipeError
    traceback. Here the pipe's read end is closed before the script starts, so its first line finds no reader."""
    data = _sample_input(script, tmp_path)
    ok = subprocess.run([sys.executable, str(ROOT / script), "--data", str(data)], capture_output=True, text=True,
                        timeout=120, cwd=tmp_path)
    assert ok.returncode == 0 and ok.stdout.count("\n") >= 2, ok.stderr[-2000:]  # the input is a sample's
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, str(ROOT / script), "--data", str(data)], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=120, cwd=tmp_path)
    finally:
        os.close(write)
    assert proc.returncode == 141 and proc.stderr == "", proc.stderr[-2000:]


def test_label_throughput_parses_the_same_records_one_copy_at_a_time(tmp_path):
    """The plain parse that ``label_throughput.py`` sets beside import + label reads the same records as the
    replicated file, one copy's list per file (each the ``--data`` file's layout), not one list of all of them."""

    bench = load_file(ROOT / "benchmarks" / "label_throughput.py", "label_throughput")
    src = tmp_path / "src.json"
    records = [{"task_id": i, "trial": 0, "reward": i % 2, "traj": [{"role": "user", "content": f"é {i}"}]}
               for i in range(3)]
    src.write_text(json.dumps(records, indent=2))
    parts = tmp_path / "parts"
    parts.mkdir()
    n = bench.replicate(src, tmp_path / "all.json", 4, parts)
    whole = json.loads((tmp_path / "all.json").read_bytes())
    lists = [json.loads((parts / f"{c}.json").read_bytes()) for c in range(4)]
    assert n == 12 and [len(x) for x in lists] == [3] * 4
    assert [r for x in lists for r in x] == whole
    assert [r["trial"] for r in whole] == [0, 0, 0, 10, 10, 10, 20, 20, 20, 30, 30, 30]
    assert (parts / "0.json").read_text() == src.read_text()  # one copy is the source file, byte for byte
    assert sorted(p.name for p in parts.iterdir()) == ["0.json", "1.json", "2.json", "3.json"]


def test_bfcl_ground_truth_help_is_its_usage(tmp_path):
    """`scripts/bfcl_ground_truth.py --help` took --help for a category: a traceback ending in InputError."""
    proc = subprocess.run([sys.executable, str(ROOT / "scripts/bfcl_ground_truth.py"), "--help"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0 and "bfcl_ground_truth.py [CATEGORY ...]" in proc.stdout, proc.stderr[-2000:]


SCRIPTS = sorted(p for p in [*ROOT.glob("benchmarks/*.py"), *ROOT.glob("scripts/*.py")]
                 if "argparse.ArgumentParser(" in p.read_text())


def _parser(script: Path, monkeypatch):
    """The parser ``script --help`` builds (run through runpy, stopped at its parse)."""
    import argparse
    import runpy

    parsers: list[argparse.ArgumentParser] = []

    def capture(self, *args, **kwargs):
        parsers.append(self)
        raise SystemExit(0)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", capture)
    monkeypatch.setattr(sys, "argv", [str(script), "--help"])
    with pytest.raises(SystemExit):
        runpy.run_path(str(script), run_name="__main__")
    return parsers[0]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_option_with_a_default_states_it_in_help(script, monkeypatch):
    """`label_invariance.py --help` showed `--data DATA` and `--show SHOW  print the first N runs that miss` with
    nothing of ../shared/data or 0; 22 of 27 scripts had such options (README: each prints its options with --help)."""
    import argparse

    parser = _parser(script, monkeypatch)
    formatter = parser._get_formatter()
    silent = [a.option_strings[-1] for a in parser._actions
              if a.option_strings and a.nargs != 0 and not any(a.default is x for x in (None, False, argparse.SUPPRESS))
              and "default" not in formatter._format_action(a)]  # the lines --help prints for it
    assert not silent, f"{script.name}: {silent} have a default their help does not state"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_help_says_what_the_script_does_in_whole_sentences(script, monkeypatch):
    """`label_invariance.py --help` began 'Metamorphic checks ...: rewordings a reader would not judge by must not move
    a run's' and stopped: the docstring's first line, cut where the line broke (planted_flaws, tau2_gold_paths too)."""
    first = " ".join((_parser(script, monkeypatch).description or "").split("\n\n")[0].split())  # its first paragraph
    assert first and first[-1] in ".:?)", f"{script.name}: {first[-60:]!r}"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_default_path_is_shown_from_the_repository_not_as_this_checkouts_absolute_path(script, monkeypatch):
    """`label_invariance.py --help` said `(default: /work/main/../shared/data)`, label_accuracy.py its four label
    files under /work/wt-x/benchmarks/data: the directory of whoever's checkout ran it, computed from the script's
    place. Shown relative to the repository now; the default the script gets is the same absolute path."""
    monkeypatch.setenv("COLUMNS", "2000")  # no path broken across lines
    monkeypatch.chdir(ROOT)  # as README runs them; from elsewhere: test_a_default_path_shown_away_from_...
    parser = _parser(script, monkeypatch)
    text = parser.format_help()
    assert str(ROOT) not in text and str(ROOT.parent) + os.sep not in text, script.name
    for action in parser._actions:
        if isinstance(action.default, str | Path) and os.path.isabs(action.default) and "default" not in (
                action.help or ""):  # the formatter states it (a help that names its default says it in words)
            rel = os.path.relpath(os.path.normpath(action.default), ROOT)
            assert f"(default: {rel})" in text, (script.name, action.dest, rel)


def test_the_default_paths_shown_name_the_repositorys_files(monkeypatch):
    import argparse

    from evoharness.script_help import DefaultsHelp

    monkeypatch.chdir(ROOT)

    ap = argparse.ArgumentParser(formatter_class=DefaultsHelp)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--labels", default=str(ROOT / "benchmarks" / "data" / "x.json"), help="labels; '' to leave out")
    ap.add_argument("--far", type=Path, default=Path("/opt/x"))  # not beside the checkout: as it is
    text = " ".join(ap.format_help().split())
    assert "--data DATA (default: ../shared/data)" in text
    assert "labels; '' to leave out (default: benchmarks/data/x.json)" in text and "(default: /opt/x)" in text
    assert ap.parse_args([]).data == ROOT.parent / "shared" / "data"  # what the script reads is unchanged


def test_a_default_path_shown_away_from_the_repository_is_one_usable_there(tmp_path, monkeypatch):
    """--help showed a default path relative to the repository's root whatever the working directory:
    `python /work/main/benchmarks/label_accuracy.py --help` run from /tmp said `(default: benchmarks/data/...)`, a path
    that names nothing there. Now a default is shown relative to the working directory when it lies under it (or
    beside the root, run from the root), else as its absolute path: every path shown names the file from where the
    help was printed."""
    import argparse

    from evoharness.script_help import DefaultsHelp

    labels = ROOT / "benchmarks" / "data"
    ap = argparse.ArgumentParser(formatter_class=DefaultsHelp)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--labels", default=str(labels / "x.json"))
    shown = {}
    for where in (tmp_path, ROOT / "benchmarks", ROOT):
        monkeypatch.chdir(where)
        text = " ".join(ap.format_help().split())
        shown[where] = [text.split(f"--{n} {n.upper()} (default: ")[1].split(")")[0] for n in ("data", "labels")]
        for path, default in zip(shown[where], (ROOT.parent / "shared" / "data", labels / "x.json"), strict=True):
            assert os.path.normpath(where / path) == os.path.normpath(default), (where, path)  # names it from there
    assert shown[tmp_path] == [os.path.normpath(ROOT.parent / "shared" / "data"), str(labels / "x.json")]
    assert shown[ROOT / "benchmarks"] == [os.path.normpath(ROOT.parent / "shared" / "data"), "data/x.json"]
    assert shown[ROOT] == ["../shared/data", "benchmarks/data/x.json"]


def _readme_script_rows() -> dict[str, str]:
    """README's benchmarks table: each script named in a row's first cell -> that row's options cell."""
    rows = {}
    for line in (ROOT / "README.md").read_text().splitlines():
        cells = line.split(" | ")
        if line.startswith("| `") and len(cells) >= 3:
            for name in re.findall(r"`([\w]+\.py)`", cells[0]):
                rows[name] = cells[-1]
    return rows


@pytest.mark.parametrize("script", sorted(ROOT.glob("benchmarks/*.py")), ids=lambda p: p.name)
def test_the_readme_table_lists_every_option_of_every_benchmark(script, monkeypatch):
    """README says its benchmarks table lists every script with its options; tau2_gold_paths.py's row left out
    `--outcome-claims` (a new user's walk, fourteenth session), and nothing checked it."""
    rows = _readme_script_rows()
    assert script.name in rows, f"{script.name} has no row in README's benchmarks table"
    said = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", rows[script.name]))
    import argparse

    options = {o for a in _parser(script, monkeypatch)._actions if a.help != argparse.SUPPRESS  # a child's own
               for o in a.option_strings if o.startswith("--")} - {"--help"}
    assert not options - said, f"{script.name}: {sorted(options - said)} not in its README row"
