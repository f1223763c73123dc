"""Validate an `Edit` against the manifest and the base tree, before anything is written.

``resolve_edit`` returns the new content of every touched path (None = delete) or raises
``EditRejected`` with the reason and the offending path. It is the one guard every path that creates
or revises a candidate goes through (``HarnessRepo.create_candidate``/``revise``: the CLI's
``candidate new``, the API, the roles): paths, sizes, parse (with bounded nesting: hostile input
is one clear rejection, never a traceback), and instructions that subvert evaluation
(``harness_repo/injection.py``) in the text the edit adds.
"""

from __future__ import annotations

import json
import posixpath
import re
import tomllib

import git
import yaml

from evoharness.errors import EditRejected, InputError, yaml_problem
from evoharness.harness_repo.config import HarnessRepoConfig
from evoharness.harness_repo.gitops import LINK_MODE, TREE_MODE
from evoharness.harness_repo.manifest import Manifest
from evoharness.harness_repo.models import Edit
from evoharness.harness_repo.patch import PatchError, apply_unified_diff, diff_creates_file
from evoharness.untrusted import MAX_DEPTH, check_template, nesting_depth

MAX_COMPONENT_BYTES = 255  # NAME_MAX: a longer file name cannot be checked out (every rollout would crash)
MAX_PATH_BYTES = 1024


def normalise_path(raw: str) -> str:
    """A clean repo-relative posix path, or EditRejected for absolute, ``..``, ``.git`` or odd paths."""
    if not raw or not raw.strip():
        raise EditRejected("empty path", raw)
    if "\x00" in raw or "\\" in raw:
        raise EditRejected("path contains a NUL or backslash", raw)
    if raw.startswith("/") or raw.startswith("~") or (len(raw) > 1 and raw[1] == ":"):
        raise EditRejected("absolute paths are not allowed", raw)
    parts = raw.split("/")
    if ".." in parts:
        raise EditRejected("'..' is not allowed in a path", raw)
    clean = posixpath.normpath(raw)
    if clean in (".", ""):
        raise EditRejected("path names the repository root", raw)
    if any(p.lower() == ".git" for p in clean.split("/")):
        raise EditRejected("paths inside .git are never editable", raw)
    if len(clean.encode("utf-8", "replace")) > MAX_PATH_BYTES:
        raise EditRejected(f"path is over {MAX_PATH_BYTES} bytes", raw[:200])
    if any(len(p.encode("utf-8", "replace")) > MAX_COMPONENT_BYTES for p in clean.split("/")):
        raise EditRejected(f"a path component is over {MAX_COMPONENT_BYTES} bytes (no file system can hold it)",
                           raw[:200])
    if any(ord(c) < 32 or ord(c) == 127 for c in clean):
        raise EditRejected("path contains a control character", raw[:200])
    return clean


def _lookup(tree: git.Tree, path: str) -> git.objects.base.IndexObject | None:
    """The object at ``path`` in ``tree`` (None if absent); rejects symlinks and files as parents."""
    parts = path.split("/")
    node: git.objects.base.IndexObject = tree
    for i, part in enumerate(parts):
        where = "/".join(parts[: i + 1])
        try:
            node = node[part]  # type: ignore[index]
        except KeyError:
            return None
        if node.mode == LINK_MODE:
            raise EditRejected(f"path goes through a symlink ({where})", path)
        if i < len(parts) - 1 and node.mode != TREE_MODE:
            raise EditRejected(f"a parent of the path is a file ({where})", path)
    return node


_SURROGATE = re.compile("[\ud800-\udfff]")


def check_encodable(edit: Edit) -> None:
    """``EditRejected`` when a text of the edit holds half a UTF-16 surrogate pair (``"\\ud83d"`` in EDIT.json, as a
    writer cutting text by UTF-16 units leaves it): no UTF-8 file or commit message can hold it (it was a
    UnicodeEncodeError traceback when the file or the commit was written)."""
    texts: list[tuple[str, str | None, str | None]] = [
        ("message", edit.message, None), ("rationale", edit.rationale, None), ("targets", edit.targets, None),
        ("failure_class", edit.failure_class, None), ("critic", edit.critic, None),
        *(("evidence", e, None) for e in edit.evidence), *(("predicted_flips", f, None) for f in edit.predicted_flips)]
    for ch in edit.changes:
        texts += [("path", ch.path, ch.path), ("content", ch.content, ch.path), ("diff", ch.diff, ch.path)]
    for name, value, path in texts:
        if value is not None and (bad := _SURROGATE.search(value)) is not None:
            raise EditRejected(f"{name} holds half a UTF-16 surrogate pair ({bad.group()!r}), which no UTF-8 file "
                               "can hold", path)


def check_commit_text(edit: Edit) -> None:
    """``EditRejected`` when a text the commit message carries holds a NUL (git ends the message there: the candidate
    was committed without its ``Targets``/``Evidence`` trailers, and no command found it again), or when the message
    is blank (committed with an empty subject line)."""
    if not edit.message.strip():
        raise EditRejected("message is blank (the commit subject)")
    texts = [("message", edit.message), ("rationale", edit.rationale), ("targets", edit.targets),
             ("failure_class", edit.failure_class), ("critic", edit.critic),
             *(("evidence", e) for e in edit.evidence), *(("predicted_flips", f) for f in edit.predicted_flips)]
    for name, value in texts:
        if value is not None and "\x00" in value:
            raise EditRejected(f"{name} holds a NUL character, which would end the commit message there")


def resolve_edit(
    repo: git.Repo, manifest: Manifest, base: git.Commit, edit: Edit, limits: HarnessRepoConfig
) -> dict[str, bytes | None]:
    check_encodable(edit)
    check_commit_text(edit)
    if len(edit.changes) > limits.max_files:
        raise EditRejected(f"edit touches {len(edit.changes)} files; the limit is {limits.max_files}")
    out: dict[str, bytes | None] = {}
    total = 0
    for change in edit.changes:
        path = normalise_path(change.path)
        if path in out:
            raise EditRejected("path given twice in one edit", path)
        if manifest.is_protected(path):
            raise EditRejected("path is protected by harness.toml", path)
        if not manifest.in_surface(path):
            raise EditRejected(f"path is outside the editable surfaces ({', '.join(manifest.surfaces)})", path)
        existing = _lookup(base.tree, path)
        if existing is not None and existing.mode == TREE_MODE:
            raise EditRejected("path is a directory", path)
        if change.delete:
            if existing is None:
                raise EditRejected("cannot delete a file that does not exist", path)
            out[path] = None
            continue
        if change.content is not None:
            text = change.content
        else:
            assert change.diff is not None
            if existing is None and not diff_creates_file(change.diff):
                raise EditRejected("diff targets a file that does not exist", path)
            old = existing.data_stream.read().decode("utf-8", "replace") if existing is not None else ""
            try:
                text = apply_unified_diff(old, change.diff)
            except PatchError as e:
                raise EditRejected(f"diff does not apply: {e}", path) from None
        if (nul := text.find("\x00")) >= 0:  # git stores it as binary: `show` and a PR said "Binary files differ"
            raise EditRejected(f"file holds a NUL character (at offset {nul}): git would store it as binary and "
                               "review would show no diff of it", path)
        data = text.encode("utf-8")
        if len(data) > limits.max_file_bytes:
            raise EditRejected(f"file is {len(data)} bytes; the limit is {limits.max_file_bytes}", path)
        total += len(data)
        if total > limits.max_edit_bytes:
            raise EditRejected(f"edit is over {limits.max_edit_bytes} bytes in all")
        check_syntax(path, text)
        out[path] = data
    check_instructions(edit, {p: _old_text(base.tree, p) for p in out})
    return out


def _old_text(tree: git.Tree, path: str) -> str:
    node = _lookup(tree, path)
    if node is None or node.mode == TREE_MODE:
        return ""
    return node.data_stream.read().decode("utf-8", "replace")


def check_instructions(edit: Edit, old: dict[str, str]) -> None:
    """``EditRejected`` when the text an edit adds (its new lines, message and rationale) carries an
    instruction that subverts evaluation (skip verification, ignore instructions, edit the scorer...)."""
    from evoharness.harness_repo.injection import added_lines, find_injection

    parts = [edit.message, edit.rationale]
    for ch in edit.changes:
        if ch.content is not None:
            parts.extend(added_lines(old.get(posixpath.normpath(ch.path), ""), ch.content))
        elif ch.diff is not None:
            parts.extend(line[1:] for line in ch.diff.splitlines() if line.startswith("+") and
                         not line.startswith("+++"))
    phrase = find_injection("\n".join(parts))
    if phrase:
        raise EditRejected(f"edit carries an instruction that subverts evaluation: {phrase!r}")


def check_syntax(path: str, text: str) -> None:
    """Python must compile; YAML, TOML and JSON must parse; prompt templates must be valid Jinja2 (in
    the bounded sandbox of ``evoharness.untrusted``). Nesting is bounded before any parser runs."""
    name = path.rsplit("/", 1)[-1]
    parsed = name.endswith((".py", ".yaml", ".yml", ".toml", ".json")) or (
        path.startswith("prompts/") and name.endswith((".md", ".j2", ".jinja")))
    if parsed and nesting_depth(text, MAX_DEPTH) > MAX_DEPTH:
        raise EditRejected(f"nested deeper than {MAX_DEPTH} levels of brackets", path)
    try:
        if name.endswith(".py"):
            compile(text, path, "exec")
        elif name.endswith((".yaml", ".yml")):
            yaml.safe_load(text)
        elif name.endswith(".toml"):
            tomllib.loads(text)
        elif name.endswith(".json"):
            json.loads(text)
        elif path.startswith("prompts/") and name.endswith((".md", ".j2", ".jinja")):
            check_template(text, path)
    except InputError as e:
        raise EditRejected(e.reason, path) from None
    except (RecursionError, MemoryError):
        raise EditRejected("nested too deeply to parse", path) from None
    except SyntaxError as e:
        raise EditRejected(f"Python does not compile: {e.msg} (line {e.lineno})", path) from None
    except yaml.YAMLError as e:
        raise EditRejected(f"YAML does not parse: {yaml_problem(e)}", path) from None
    except tomllib.TOMLDecodeError as e:
        raise EditRejected(f"TOML does not parse: {e}", path) from None
    except json.JSONDecodeError as e:
        raise EditRejected(f"JSON does not parse: {e}", path) from None
    except ValueError as e:  # e.g. a JSON integer over 4,300 digits, a NUL byte in Python source
        raise EditRejected(f"does not parse: {(str(e).splitlines() or ['ValueError'])[0][:200]}", path) from None
