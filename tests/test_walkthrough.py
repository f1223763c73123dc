"""A newcomer's first commands, in a fresh `git clone` of this repository, as subprocesses.

The README's cheap commands must work from the clone alone (no ../shared, no absolute paths), and the
usual mistakes must each give one `error:` line and exit 2, never a traceback. The demo and the report
it points to run in the slow test at the end.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TAU = "tests/fixtures/data/tau_bench_airline_gpt4o/gpt-4o-airline.json"
EDIT = {"message": "Enable the loop guard", "targets": "F3.repeated_action",
        "changes": [{"path": "lessons.md", "content": "Stop repeating a call that failed.\n"}]}


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: nothing to clone")
    root = tmp_path_factory.mktemp("walkthrough")
    subprocess.run(["git", "clone", "-q", str(REPO), str(root / "evoharness")], check=True)
    return root / "evoharness"


def _env(clone: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVOHARNESS_")}
    return {**env, "PYTHONPATH": str(clone), "EVOHARNESS_HOME": str(clone / ".evoharness"), **(extra or {})}


def evoharness(clone: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120):
    """``python -m evoharness ARGS`` with the clone's package first on the path, in the clone."""
    return subprocess.run([sys.executable, "-m", "evoharness", *args], cwd=clone, env=_env(clone, env),
                          capture_output=True, text=True, timeout=timeout)


# Many commands in one interpreter (each a fresh `main(argv)` with its own stdout/stderr and exit code):
# the commands' behaviour is the same, without paying Python's start-up and imports per command.
_BATCH = """
import contextlib, io, json, os, sys
from evoharness.cli import main
out = []
for argv, env in json.loads(sys.stdin.read()):
    saved = dict(os.environ); os.environ.update(env)
    o, e = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        try:
            rc = main(argv)
        except SystemExit as x:
            rc = x.code
        except BaseException:
            import traceback; traceback.print_exc(); rc = "raised"
    os.environ.clear(); os.environ.update(saved)
    out.append([rc, o.getvalue(), e.getvalue()])
print(json.dumps(out))
"""


def batch(clone: Path, commands: list[tuple[list[str], dict[str, str]]]) -> list[tuple[int, str, str]]:
    r = subprocess.run([sys.executable, "-c", _BATCH], cwd=clone, env=_env(clone), input=json.dumps(commands),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return [tuple(x) for x in json.loads(r.stdout.splitlines()[-1])]


def ok(result: tuple[int, str, str]) -> str:
    rc, out, err = result
    assert rc == 0 and "Traceback" not in err, (rc, out[-2000:], err[-2000:])
    return out


def one_error(result: tuple[int, str, str]) -> str:
    rc, out, err = result
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: "), (rc, out[-1000:], err[-2000:])
    assert "Traceback" not in err and out == ""
    return lines[0]


def run(proc: subprocess.CompletedProcess) -> tuple[int, str, str]:
    return proc.returncode, proc.stdout, proc.stderr


def test_the_clone_is_self_contained(clone):
    where = subprocess.run([sys.executable, "-c", "import evoharness; print(evoharness.__file__)"], cwd=clone,
                           env={**os.environ, "PYTHONPATH": str(clone)}, capture_output=True, text=True, check=True)
    assert Path(where.stdout.strip()).is_relative_to(clone)  # the commands below run the clone's code
    readme = (clone / "README.md").read_text()
    assert not re.search(r"\]\(\.\./|`\.\./", readme), "README links a file outside the repository"
    paths = set(re.findall(r"`((?:docs|ops|scripts|examples|benchmarks|evoharness|tests)/[\w./-]+)`", readme))
    paths |= {p for p in re.findall(r"\]\(([^)#:]+)\)", readme)}  # markdown links to files
    assert "docs/design.md" in paths
    missing = [p for p in sorted(paths) if "<" not in p and "*" not in p and not (clone / p.rstrip("/")).exists()]
    assert not missing, f"README names files the clone lacks: {missing}"
    # code finds files relative to the repository (sandbox tests probe host paths on purpose: not here)
    tracked = subprocess.run(["git", "ls-files", "evoharness", "scripts", "benchmarks", "tests/conftest.py"],
                             cwd=clone, capture_output=True, text=True, check=True).stdout.split()
    absolute = [f for f in tracked if f.endswith((".py", ".sh")) and "/work/" in (clone / f).read_text()]
    assert not absolute, f"absolute machine paths in {absolute}"
    for name in ("tau_bench_airline_gpt4o", "mini_swe_agent_sample", "who_and_when", "agentrx_magentic_one"):
        assert list((clone / "tests/fixtures/data" / name).glob("LICEN[CS]E*")), f"{name} has no license file"


def test_the_readme_commands(clone):
    out = ok(run(evoharness(clone)))  # the real entry point, bare: help, exit 0
    assert "Usage" in out and "diagnose" in out
    (clone / "edit.json").write_text(json.dumps(EDIT))
    version, diag, imported, init, new, review, noise, schema, status = batch(clone, [
        (["--version"], {}),
        (["diagnose", TAU, "--json"], {}),
        (["import", "tests/fixtures/data/mini_swe_agent_sample", "--out", "traces.jsonl", "--split", "dev"], {}),
        (["init", "harness"], {}),
        (["candidate", "new", "--harness", "harness", "--edit", "edit.json"], {}),
        (["review", "--harness", "harness", "--json"], {}),
        (["noise", "--sigma", "0.023", "--rollouts", "1,2,4,8,16"], {}),
        (["schema", "trajectory"], {}),
        (["dataset", "status"], {}),
    ])
    assert ok(version).startswith("evoharness ")
    diag = json.loads(ok(diag))
    assert diag["n"] == 12 and diag["composition"]["healthy"] == 0.5
    ok(imported)
    assert len((clone / "traces.jsonl").read_text().splitlines()) == 4
    assert "initialised harness" in ok(init)
    branch = ok(new).strip()
    assert branch == "candidate/r0-enable-the-loop-guard"
    assert [c["branch"] for c in json.loads(ok(review))] == [branch]
    assert "0.07" in ok(noise)
    assert json.loads(ok(schema)) == json.loads((clone / "docs/trajectory.schema.json").read_text())
    assert "training queue" in ok(status)


def _readme_block(readme: str, holding: str) -> str:
    """The README's ```bash block that holds ``holding``."""
    blocks = [b for b in re.findall(r"```bash\n(.*?)```", readme, re.S) if holding in b]
    assert len(blocks) == 1, f"{len(blocks)} bash blocks hold {holding!r}"
    return blocks[0]


def test_the_readme_harness_example_runs_as_written(clone, tmp_path):
    """README's harness block ran `candidate new --edit edit.json` with no edit.json anywhere; the EDIT.json block
    beside it holds placeholders (`"diff": "... unified diff"`, a delete of a file the seed lacks), so copying it
    ended in `error: policies.yaml: diff does not apply: no hunks in diff`."""
    block = _readme_block((clone / "README.md").read_text(), "evoharness candidate new")
    shim = tmp_path / "bin" / "evoharness"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m evoharness "$@"\n')
    shim.chmod(0o755)
    env = _env(clone, {"PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}"})
    here = tmp_path / "walk"  # not the shared clone, where the commands above made a harness already
    here.mkdir()
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=here, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    printed = re.search(r"# prints (\S+)", block).group(1)
    assert printed in done.stdout.splitlines()  # what the comment says `candidate new` prints
    assert f"{printed}  " in done.stdout.splitlines()[-1]  # and `review` lists it


def test_the_readme_dataset_example_runs_after_the_examples_before_it(clone, tmp_path):
    """README's dataset block exported `--trajectories traces.jsonl`, a file no example before it writes: a newcomer
    who ran the harness and rollout examples in turn got `error: traces.jsonl: trajectory file not found`."""
    readme = (clone / "README.md").read_text()
    blocks = [_readme_block(readme, holding) for holding in
              ("evoharness candidate new", "evoharness rollout --harness", "evoharness dataset export")]
    shim = tmp_path / "bin" / "evoharness"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m evoharness "$@"\n')
    shim.chmod(0o755)
    here = tmp_path / "walk"
    here.mkdir()
    env = _env(clone, {"PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}",
                       "EVOHARNESS_HOME": str(here / ".evoharness"),  # a fresh home: an empty training queue
                       "EVOHARNESS_SANDBOX__BACKEND": "inprocess"})  # the commands as written, without bwrap
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(blocks)], cwd=here, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    written = re.search(r"wrote (\d+) records \(openai\) to sft", done.stdout)
    assert written and int(written.group(1)) > 0, done.stdout[-2000:]  # the rollouts' healthy runs, not nothing
    assert f"{written.group(1)} records, all valid (openai)" in done.stdout


def test_the_usual_mistakes(clone):
    line = one_error(run(evoharness(clone, "diagnose", TAU, "--jsn")))  # the real entry point
    assert line.endswith("no such option --jsn; did you mean --json?")
    (clone / "bogus.json").write_text(json.dumps({**EDIT, "targets": "F9.bogus"}))
    (clone / "yaml.json").write_text(json.dumps({**EDIT, "changes": [
        {"path": "policies.yaml", "content": "loop_guard:\n  max_repeats: [1, 2\n"}]}))
    (clone / "good.json").write_text(json.dumps(EDIT))
    results = batch(clone, [
        (["diagnoze", TAU], {}),
        (["diagnose"], {}),
        (["noise", "--sigma", "abc"], {}),
        (["run", "--config", "evoharness.toml"], {}),
        (["--set", "diagnosis.repeat_minn=2", "diagnose", TAU], {}),
        (["dataset", "status"], {"EVOHARNESS_RUN_BUDGET": "5"}),
        (["diagnose", "nope.json"], {}),
        (["init", "h2"], {}),
        (["candidate", "new", "--harness", "h2", "--edit", "bogus.json"], {}),
        (["candidate", "new", "--harness", "h2", "--edit", "yaml.json"], {}),
        (["candidate", "new", "--harness", "h2", "--edit", "good.json"], {}),
    ])
    typo, missing, bad_value, config, setting, env, no_file, init, target, yaml_error, good = results
    assert one_error(typo).endswith("no such command 'diagnoze'; did you mean diagnose?")
    assert "missing argument PATHS" in one_error(missing)
    assert "invalid value for option --sigma" in one_error(bad_value)
    assert one_error(config) == "error: evoharness.toml: no such file or directory"
    assert one_error(setting).endswith("unknown setting diagnosis.repeat_minn; did you mean diagnosis.repeat_min?")
    assert "did you mean EVOHARNESS_RUN__BUDGET?" in one_error(env)
    assert "no such file" in one_error(no_file)
    ok(init)
    assert "targets: unknown signal 'F9.bogus'" in one_error(target)
    assert re.search(r"YAML does not parse: .*\(line \d+, column \d+\)", one_error(yaml_error))
    branch = ok(good).strip()
    pr_args = ["pr", branch, "--harness", "h2", "--remote", "upstream"]
    unverified, pr = batch(clone, [(pr_args, {}), ([*pr_args, "--allow-unverified"], {})])
    assert f"{branch}: not verified; `pr` pushes only a candidate verified" in one_error(unverified)
    assert "upstream: not a remote of" in one_error(pr)


@pytest.mark.slow
@pytest.mark.timeout(900)  # the demo's own limit below; the suite's 300 s cut it first at load 15-20
def test_the_demo_and_its_printed_next_command(clone):
    r = evoharness(clone, "demo", "--rounds", "1", "--sandbox", "none", timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "demo: a fresh demo in demo-out/" in r.stderr and "Traceback" not in r.stderr
    nexts = [line.split("#")[0].strip() for line in r.stdout.splitlines() if " report demo-out/" in line]
    assert len(nexts) == 1
    argv = shlex.split(nexts[0])
    assert argv[:3] == [sys.executable, "-m", "evoharness"]  # how this shell started it: runs as printed
    printed = subprocess.run(argv, cwd=clone, env={**os.environ, "PYTHONPATH": str(clone)},
                             capture_output=True, text=True)
    assert printed.returncode == 0, printed.stderr[-2000:]
    assert "report.md" in printed.stdout
