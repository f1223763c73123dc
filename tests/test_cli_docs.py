"""docs/cli.md says it gives every command in full, its options included; the README and docs/*.md write commands
as a user would type them. Both are checked against the built command tree: every option a command's `--help`
lists is in that command's entry of docs/cli.md, and every option a page writes after `evoharness COMMAND` is
one the command takes (a renamed flag left in an example is what a new user hits first)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evoharness.cli import command
from evoharness.cli_usage import is_group, walk

ROOT = Path(__file__).resolve().parents[1]
LEAVES = {" ".join(path): cmd for path, cmd in walk(command()) if not is_group(cmd)}
EVERYWHERE = {"--config", "-c", "--set", "--help"}  # taken before or after any command name
OPTION = re.compile(r"(?<![\w-])--?[a-zA-Z][a-z0-9-]*")


def _command_named(words: list[str]) -> str | None:
    """The command that ``words`` (what follows `evoharness`, global options skipped) start with."""
    while words[:1] and words[0] in ("-c", "--config", "--set"):
        words = words[2:]
    return next((" ".join(words[:n]) for n in (2, 1) if " ".join(words[:n]) in LEAVES), None)


def cli_md_entries(text: str) -> dict[str, str]:
    """docs/cli.md's entries by command: a bullet that begins with the command's synopsis (`evoharness CMD ...`, or
    `CMD --option ...` for a further entry of the same command), up to the next bullet, heading or paragraph."""
    entries: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("- `"):
            words = line[3:].split("`")[0].split()
            current = _command_named(words[1:] if words[:1] == ["evoharness"] else words)
        elif not line.startswith("  "):
            current = None
        if current:
            entries.setdefault(current, []).append(line)
    # `approve CANDIDATE --run RUN_ID` / `evoharness reject CANDIDATE --run RUN_ID [--reason ..]`: one entry for both
    for line in text.splitlines():
        for name in re.findall(r"/ `evoharness ([a-z-]+)", line):
            if name in LEAVES and name not in entries:
                entries[name] = [line[line.index(f"`evoharness {name}"):]]
    return {name: "\n".join(lines) for name, lines in entries.items()}


ENTRIES = cli_md_entries((ROOT / "docs" / "cli.md").read_text())


@pytest.mark.parametrize("name", sorted(LEAVES))
def test_every_option_of_every_command_is_in_its_cli_md_entry(name):
    assert name in ENTRIES, f"docs/cli.md has no entry that begins with `evoharness {name}`"
    options = {o for p in LEAVES[name].params if p.param_type_name == "option" for o in p.opts if o.startswith("--")}
    said = set(OPTION.findall(ENTRIES[name]))
    assert not options - said - EVERYWHERE, f"{name}: {sorted(options - said - EVERYWHERE)} not in docs/cli.md"


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "ops").rglob("*.md"))]


def written_commands(text: str):
    """(command, the words after it) for each `evoharness COMMAND ...` in an inline code span or a code block's
    line, up to the first shell separator."""
    spans = re.findall(r"`([^`\n]+)`", text)
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
        spans += block.replace("\\\n", " ").splitlines()
    for span in spans:
        for m in re.finditer(r"(?:^|[\s(])(?:[\w./-]*/)?evoharness\s+(.*)", span):
            rest = re.split(r"\s(?:&&|\|\||\||>|#)\s|;", m.group(1))[0]
            if name := _command_named(rest.split()):
                yield name, rest


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_option_a_page_writes_after_a_command_is_one_it_takes(page):
    wrong = []
    for name, rest in written_commands(page.read_text()):
        cmd = LEAVES[name]
        options = {o for p in cmd.params for o in (*p.opts, *getattr(p, "secondary_opts", []))}
        wrong += [f"evoharness {name} ... {o}  (in `{rest[:80]}`)" for o in OPTION.findall(rest)
                  if o not in options and o not in EVERYWHERE]
    assert not wrong, "\n".join(wrong)


def test_the_checks_read_what_they_check():
    """The parsers above find the entries and the written commands (a parser that finds nothing passes all)."""
    assert len(ENTRIES) == len(LEAVES)
    assert "--release-reservation" in ENTRIES["verify"] and "--reason" in ENTRIES["reject"]
    found = list(written_commands("run `evoharness --set home=x diagnose a.json --show 3 | head`, then\n"
                                  "```bash\nevoharness rollout --harness h \\\n  --tasks 2 > out  # --nope\n```\n"))
    assert [(name, rest.split()) for name, rest in found] == [
        ("diagnose", ["--set", "home=x", "diagnose", "a.json", "--show", "3"]),
        ("rollout", ["rollout", "--harness", "h", "--tasks", "2"])]
