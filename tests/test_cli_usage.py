"""Usage errors for every registered command: one `error:` line naming the closest valid choice, exit 2.

The commands are found by walking the built command tree, so a command added later is covered here
without a line of its own.
"""

from __future__ import annotations

import re
import typing

import pytest

from evoharness.cli import ROOT_VALUE_OPTIONS, command, main
from evoharness.cli_usage import FREE_TEXT, _param_label, is_group, takes_path, takes_text, walk

TREE = list(walk(command()))
GROUPS = [(path, cmd) for path, cmd in TREE if is_group(cmd)]
LEAVES = [(path, cmd) for path, cmd in TREE if not is_group(cmd)]


def _ids(items):
    return [" ".join(path) or "evoharness" for path, _ in items]


def _one_error_line(capsys, argv: list[str]) -> str:
    rc = main(argv)
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert rc == 2, (argv, out, err)
    assert len(lines) == 1 and lines[0].startswith("error: "), (argv, err)
    assert "Traceback" not in err
    return lines[0]


def _long_options(cmd) -> list[str]:
    return [o for p in cmd.params if p.param_type_name == "option" for o in p.opts if o.startswith("--")]


def _is_numeric(param) -> bool:
    if param.param_type_name != "option":
        return False
    annotation = param.type_descriptor.annotation
    return bool({annotation, *typing.get_args(annotation)} & {int, float})


def test_the_tree_holds_the_readme_commands():
    names = {" ".join(path) for path, _ in LEAVES}
    assert {"diagnose", "run", "demo", "candidate new", "dataset export", "serve"} <= names


_PARAM_FIELDS = ("name", "opts", "secondary_opts", "default", "help", "required", "multiple", "nargs", "metavar",
                 "hidden", "is_flag", "envvar", "show_default", "min", "max", "rich_help_panel", "expose_value")


def _shape(cmd) -> list:
    """What a command tree parses and says: every command's path and help, and each parameter's options, type,
    default, help and checks (add_root_options's wrapped process_value), as click holds them."""
    return [(path, c.help, [(*(repr(getattr(p, f, None)) for f in _PARAM_FIELDS),
                             getattr(p.type_descriptor, "annotation", None), "process_value" in vars(p))
                            for p in c.params]) for path, c in walk(cmd)]


@pytest.mark.parametrize("path", sorted({path[0] for path, _ in TREE if path}))
def test_a_command_line_builds_the_tree_of_its_command_alone_and_that_tree_whole(path):
    """main() builds only the top-level command or group a command line names (typer's build of the whole tree, ~60 ms
    a process, is most of a cold command's set-up after imports); that part is as in the whole tree: the same
    commands, help, options, defaults."""
    whole = dict(TREE)
    for argv in ([path, "--help"], ["--set", "log_level=info", path], ["-c", "x", "--set=a=b", "--config=y", path]):
        only = command(argv)
        assert list(only.commands) == [path], argv
        assert _shape(only.commands[path]) == _shape(whole[(path,)]), argv
        assert [p.opts for p in only.params] == [p.opts for p in whole[()].params]


@pytest.mark.parametrize("argv", [[], ["--help", "dataset"], ["--version", "dataset"], ["--", "dataset"],
                                  ["--bogus", "dataset"], ["-c/x.toml", "dataset"], ["datset", "export"],
                                  ["--set", "dataset", "export"], ["--config"]])
def test_a_command_line_that_names_no_command_first_builds_the_whole_tree(argv):
    """Root help, --version, an unknown option or command, a missing value: the whole tree, whose help and
    suggestions name every command."""
    assert list(command(argv).commands) == list(command().commands)


def test_the_words_passed_over_to_find_the_command_are_the_root_options_that_take_a_value():
    root = command()
    assert set(ROOT_VALUE_OPTIONS) == {o for p in root.params if not p.is_flag for o in (*p.opts, *p.secondary_opts)}


def test_bare_evoharness_prints_help_and_exits_0(capsys):
    assert main([]) == 0
    out, err = capsys.readouterr()
    assert "Usage" in out and "diagnose" in out and err == ""
    assert out.count("Usage: evoharness") == 1, "the help is printed once"


def test_help_wraps_a_paragraph_to_the_terminal_not_at_the_docstring_line_breaks(capsys, monkeypatch):
    """`serve --help` broke its second paragraph where the docstring's source lines end ('refuses to start' /
    'unless --insecure-no-auth'), and the command list broke `label`'s summary after 'a one-line'."""
    monkeypatch.setattr("typer.rich_utils.MAX_WIDTH", 200)
    assert main(["serve", "--help"]) == 0
    assert "the service refuses to start unless --insecure-no-auth is given" in capsys.readouterr().out
    assert main([]) == 0
    assert "agent, a one-line quote, all signals" in capsys.readouterr().out


@pytest.mark.parametrize(("path", "group"), GROUPS, ids=_ids(GROUPS))
def test_every_group_bare_is_help_and_a_typo_names_the_command(capsys, path, group):
    assert main(list(path)) == 0
    assert capsys.readouterr().out.count("Usage: evoharness") == 1
    for name in group.commands:
        line = _one_error_line(capsys, [*path, name + "x"])
        assert f"no such command '{name}x'; did you mean {name}?" in line
    line = _one_error_line(capsys, [*path, "zzqqzz"])
    assert "valid commands: " in line and all(n in line for n in group.commands)


@pytest.mark.parametrize(("path", "leaf"), LEAVES, ids=_ids(LEAVES))
def test_every_command_names_the_closest_option(capsys, path, leaf):
    options = _long_options(leaf)
    assert "--config" in options and "--set" in options  # the root's options are taken after the command
    for opt in options:
        line = _one_error_line(capsys, [*path, opt + "zq"])
        assert line.endswith(f"no such option {opt}zq; did you mean {opt}?"), line
    line = _one_error_line(capsys, [*path, "--qqqqqqqqqq"])
    assert "valid options: " in line and "--help" in line


@pytest.mark.parametrize(("path", "leaf"), LEAVES, ids=_ids(LEAVES))
def test_every_command_missing_and_bad_values_are_one_line(capsys, path, leaf):
    required = [p for p in leaf.params if p.required]
    if required:
        line = _one_error_line(capsys, list(path))
        assert "missing " in line and f"evoharness {' '.join(path)} --help" in line
    for param in leaf.params:
        if _is_numeric(param):
            opt = param.opts[0]
            line = _one_error_line(capsys, [*path, opt, "notanumber"])
            assert f"invalid value for option {opt}" in line or "missing " in line, line
            line = _one_error_line(capsys, [*path, opt])
            assert opt in line and "requires an argument" in line, line


PATHS = [(path, leaf, p) for path, leaf in LEAVES for p in leaf.params if takes_path(p) and p.expose_value]


@pytest.mark.parametrize(("path", "leaf", "param"), PATHS,
                         ids=[f"{' '.join(path)} {p.opts[0]}" for path, _, p in PATHS])
def test_an_empty_path_is_refused_not_taken_for_the_current_directory(capsys, tmp_path, monkeypatch, path, leaf,
                                                                      param):
    """Path("") is ".": `diagnose "$TRACES"` with TRACES unset read every trace file under the current directory,
    `init ""` made it a harness repo."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.jsonl").write_text("{not json\n")  # what a scan of the current directory would trip on
    argv = [*path, param.opts[0], ""] if param.param_type_name == "option" else [*path, ""]
    line = _one_error_line(capsys, argv)
    assert line.endswith(f"invalid value for {_param_label(param)}: an empty path"), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl"]


TEXTS = [(path, leaf, p) for path, leaf in LEAVES for p in leaf.params
         if takes_text(p) and p.expose_value and p.name not in FREE_TEXT]


@pytest.mark.parametrize(("path", "leaf", "param"), TEXTS,
                         ids=[f"{' '.join(path)} {p.opts[0]}" for path, _, p in TEXTS])
def test_an_empty_value_is_refused_not_taken_for_not_given(capsys, tmp_path, monkeypatch, path, leaf, param):
    """An unset variable gives "": `run --resume "$RUN"` started a fresh run, `dataset status --url "$URL"` read
    the default queue, `show ""` showed main, `approve "" --run R` said 'error: : not awaiting review'."""
    monkeypatch.chdir(tmp_path)
    for empty in ("", "  "):
        argv = [*path, param.opts[0], empty] if param.param_type_name == "option" else [*path, empty]
        line = _one_error_line(capsys, argv)
        assert line.endswith(f"invalid value for {_param_label(param)}: an empty value"), line
    assert list(tmp_path.iterdir()) == []


def test_the_free_text_reason_may_be_empty(capsys):
    line = _one_error_line(capsys, ["reject", "candidate/x", "--run", "nope", "--reason", ""])
    assert "no such run" in line  # the reason passed; the run is what is wrong


def test_config_after_the_command_is_read(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = _one_error_line(capsys, ["run", "--config", "evoharness.toml"])
    assert line == "error: evoharness.toml: no such file or directory"
    (tmp_path / "bad.toml").write_text('[run]\nbudget = "lots"\n')
    line = _one_error_line(capsys, ["dataset", "status", "--config", "bad.toml"])
    assert line.startswith("error: bad.toml: run.budget: ")
    line = _one_error_line(capsys, ["dataset", "status", "--set", "run.budget=lots"])
    assert line.startswith("error: settings: run.budget: ")


def test_a_bad_config_or_setting_is_refused_by_commands_that_read_no_settings(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = _one_error_line(capsys, ["noise", "--sigma", "0.02", "--config", "nope.toml"])
    assert line == "error: nope.toml: no such file or directory"
    line = _one_error_line(capsys, ["--set", "run.budget=lots", "schema", "trajectory"])
    assert line.startswith("error: settings: run.budget: ")
    line = _one_error_line(capsys, ["init", "h", "--set", "no_such.key=1"])
    assert "no_such" in line
    assert not (tmp_path / "h").exists()  # refused before the command ran
    assert main(["noise", "--sigma", "0.02", "--set", "run.budget=10"]) == 0  # a good one is fine
    assert "resolvable" in capsys.readouterr().out


def test_a_value_a_model_refuses_is_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = _one_error_line(capsys, ["--set", "sandbox.backend=foo", "demo", "--out", "d"])
    assert line.startswith("error: settings: sandbox.backend: Input should be 'bwrap', "), line
    assert "rounds" in _one_error_line(capsys, ["demo", "--rounds", "0", "--out", "e"])


def test_demo_names_the_sandbox_option_the_user_typed(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = _one_error_line(capsys, ["demo", "--sandbox", "foo", "--out", "d"])
    assert line == "error: --sandbox: unknown sandbox backend 'foo' (bwrap | docker | none | inprocess)", line
    assert not (tmp_path / "d").exists()


def test_a_path_that_cannot_be_written_is_one_line(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    line = _one_error_line(capsys, ["init", str(blocker / "harness")])
    assert line.startswith(f"error: {blocker / 'harness'}: ") and "not a directory" in line


@pytest.mark.parametrize("argv", [
    ["rollout", "--harness", "h", "--env", "synthetic", "--out", "r.jsonl", "--rollouts", "99999999999"],
    ["rollout", "--harness", "h", "--env", "synthetic", "--out", "r.jsonl", "--rollouts", "10", "--tasks", "0"],
    ["evaluate", "--harness", "h", "--rollouts", "99999999999"],
    ["ablate", "some-run", "-k", "1001"],
    ["report", "some-run", "--out", "r", "--compute", "-k", "0"],
    ["verify", "c", "--harness", "h", "--tasks", "d0", "--anchor-rollouts", "99999999999"],
])
def test_a_huge_rollout_count_is_refused_before_any_request_is_planned(capsys, tmp_path, monkeypatch, argv):
    """`rollout --rollouts 99999999999` planned 10^11 requests: 21 GB, then the kernel killed it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("evoharness.sandbox.cli.MAX_ROLLOUTS", 100)  # 14 synthetic dev tasks x 10 is over it
    assert main(["init", "h"]) == 0
    capsys.readouterr()
    line = _one_error_line(capsys, argv)
    assert "rollouts per task" in line or "14 tasks x 10 rollouts is more than one command makes (100)" in line, line


@pytest.mark.parametrize(("path", "leaf"), LEAVES, ids=_ids(LEAVES))
def test_no_help_text_holds_what_rich_takes_for_a_style_tag(path, leaf):
    """evaluate's '(default: [run] env)' was shown as '(default:  env)': rich read [run] as markup."""

    for text in [leaf.help or "", *(getattr(p, "help", None) or "" for p in leaf.params)]:
        assert not re.search(r"(?<!\\)\[[a-z][a-z_ .=-]*\]", text), (path, text)


# Every option a user may leave out, but a flag (off unless given): its help must say what happens without it.
OPTIONAL = [(path, p) for path, leaf in LEAVES for p in leaf.params
            if p.param_type_name == "option" and p.expose_value and not p.required and not p.is_flag]


@pytest.mark.parametrize(("path", "param"), OPTIONAL, ids=[f"{' '.join(path)} {p.opts[0]}" for path, p in OPTIONAL])
def test_every_option_a_user_may_leave_out_states_its_default(path, param):
    """`rollout --help` said `--sandbox  bwrap | docker | none | inprocess` and `--workers  rollouts at once`: nothing
    of what runs when they are left out (sandbox.backend, sandbox.workers); `evaluate --out` said nothing of being
    required with --harness, so `evaluate --harness h` as README wrote it ended in `error: --out: ...`."""
    shown = param.show_default and param.default is not None  # typer prints `[default: X]` for these
    text = param.help or ""
    assert shown or "default" in text or "required" in text, (path, param.opts, text)


@pytest.mark.parametrize(("path", "cmd"), TREE, ids=_ids(TREE))
def test_a_flag_shows_no_value_in_help(capsys, monkeypatch, path, cmd):
    """Every flag's row read `--json <bool>`, `--review <bool>`, `--help <bool>`: a value to give, it seemed, and
    `diagnose F --json true` took `true` for a second trace path (`error: true: no such file or directory`)."""
    monkeypatch.setenv("COLUMNS", "200")
    assert main([*path, "--help"]) == 0
    out = capsys.readouterr().out
    assert "--help" in out and "<bool>" not in out


SETTING_DEFAULT = re.compile(r"\(default:? ([a-z_]+(?:\.[a-z_]+)+)")  # `(default: sandbox.backend)`, the setting


def _help_rows(capsys, monkeypatch, path) -> dict[str, str]:
    """Each option's row of `PATH --help`, one line each (wide enough not to wrap): its first long name -> the row."""
    monkeypatch.setattr("typer.rich_utils.MAX_WIDTH", 2000)
    monkeypatch.setenv("COLUMNS", "2000")
    assert main([*path, "--help"]) == 0
    rows = {}
    for line in capsys.readouterr().out.splitlines():
        words = line.strip("│ ").split()
        name = next((w for w in words[:2] if w.startswith("--")), None)
        if name:
            rows.setdefault(name, line.rstrip("│ "))
    return rows


WITH_DEFAULTS = [(path, leaf) for path, leaf in LEAVES if any(q == path for q, _ in OPTIONAL)]


@pytest.mark.parametrize(("path", "leaf"), WITH_DEFAULTS, ids=_ids(WITH_DEFAULTS))
def test_the_default_an_option_says_is_the_one_the_command_gets_without_it(capsys, monkeypatch, path, leaf):
    """6102d7b's test above checks only that a help text says 'default' or 'required'. Here the value: what
    `--help` prints as `[default: X]` is what the command receives when the option is left out, and a default
    named as a setting (`(default: sandbox.backend)`) is a real setting, whose value the command can only read
    when the option leaves it None."""
    from evoharness.config import Settings
    from evoharness.config_keys import known_keys

    settings = set(known_keys(Settings))
    argv = [x for p in leaf.params if p.required
            for x in (["x"] if p.param_type_name == "argument" else [p.opts[0], "x"])]
    got = leaf.make_context(" ".join(path), argv).params  # the values the command function is called with
    rows = _help_rows(capsys, monkeypatch, path)
    for param in (p for p in leaf.params if (path, p) in OPTIONAL):
        long = next(o for o in param.opts if o.startswith("--"))
        printed = re.search(r"\[default: ([^\]]*)\]$", rows[long])
        if printed:
            value = got[param.name]
            assert printed.group(1) == str(value), (long, printed.group(1), value)
        if named := SETTING_DEFAULT.search(param.help or ""):
            assert named.group(1) in settings, (long, named.group(1))
            assert got[param.name] in (None, ()), (long, got[param.name])


SANDBOX_OPTIONS = [(path, p) for path, leaf in LEAVES for p in leaf.params if "--sandbox" in p.opts]


@pytest.mark.parametrize(("path", "param"), SANDBOX_OPTIONS, ids=_ids(SANDBOX_OPTIONS))
def test_a_sandbox_option_names_every_backend_it_takes(path, param):
    """`demo --help` said `--sandbox  bwrap | docker | none`, yet `demo --sandbox inprocess` ran a whole demo (its
    refusal of a bad value lists inprocess too): what the option takes is the backend list, not a shorter one."""
    from evoharness.sandbox.factory import BACKENDS

    named = set(re.findall(r"[a-z]+", (param.help or "").split("(default")[0]))
    assert set(BACKENDS) <= named, (path, param.help)
