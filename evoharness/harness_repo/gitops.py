"""Low-level git helpers: identity, the repo lock, tree building, notes and trailers.

Candidate commits are built from objects (blobs, trees, commits) and published with a
compare-and-swap ``git update-ref``: nothing touches the user's working tree or index.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import git
from git.objects.fun import tree_to_stream
from gitdb.base import IStream

from evoharness.errors import InfraError

DEFAULT_NAME = "evoharness"
DEFAULT_EMAIL = "evoharness@localhost"
ZERO = "0" * 40
TREE_MODE, BLOB_MODE, EXEC_MODE, LINK_MODE = 0o040000, 0o100644, 0o100755, 0o120000


def identity(repo: git.Repo) -> git.Actor:
    """The repo's configured user (local or global), else ``evoharness <evoharness@localhost>``."""
    reader = repo.config_reader()
    name = reader.get_value("user", "name", default="") or DEFAULT_NAME
    email = reader.get_value("user", "email", default="") or DEFAULT_EMAIL
    return git.Actor(str(name), str(email))


def identity_env(repo: git.Repo) -> dict[str, str]:
    """Environment for git commands that create commits (notes, commit)."""
    who = identity(repo)
    return {
        "GIT_AUTHOR_NAME": who.name, "GIT_AUTHOR_EMAIL": who.email,
        "GIT_COMMITTER_NAME": who.name, "GIT_COMMITTER_EMAIL": who.email,
    }


@contextlib.contextmanager
def repo_lock(repo: git.Repo, timeout_s: float = 60.0) -> Iterator[None]:
    """An exclusive ``flock`` on ``<git-common-dir>/evoharness.lock`` (across processes)."""
    path = Path(repo.common_dir) / "evoharness.lock"
    deadline = time.monotonic() + timeout_s
    with open(path, "a+") as fh:
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise InfraError(f"could not take the harness repo lock {path} in {timeout_s:g}s") from None
                time.sleep(0.02)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def store_blob(repo: git.Repo, data: bytes) -> bytes:
    return repo.odb.store(IStream(b"blob", len(data), io.BytesIO(data))).binsha


def _store_tree(repo: git.Repo, entries: dict[str, tuple[bytes, int]]) -> bytes:
    def key(item: tuple[str, tuple[bytes, int]]) -> bytes:
        name, (_, mode) = item
        return name.encode() + (b"/" if mode == TREE_MODE else b"")

    rows = [(sha, mode, name) for name, (sha, mode) in sorted(entries.items(), key=key)]
    buf = io.BytesIO()
    tree_to_stream(rows, buf.write)
    data = buf.getvalue()
    return repo.odb.store(IStream(b"tree", len(data), io.BytesIO(data))).binsha


def rewrite_tree(repo: git.Repo, base: git.Tree, files: dict[str, bytes | None]) -> str:
    """A new tree: ``base`` with each path set to its bytes (regular file) or removed (None)."""
    nested: dict[str, dict[str, bytes | None]] = {}
    here: dict[str, bytes | None] = {}
    for path, data in files.items():
        head, _, rest = path.partition("/")
        if rest:
            nested.setdefault(head, {})[rest] = data
        else:
            here[head] = data
    entries: dict[str, tuple[bytes, int]] = {}
    for obj in base:
        entries[obj.name] = (obj.binsha, obj.mode)
    for name, data in here.items():
        if data is None:
            entries.pop(name, None)
        else:
            old_mode = entries.get(name, (b"", BLOB_MODE))[1]
            mode = old_mode if old_mode in (BLOB_MODE, EXEC_MODE) else BLOB_MODE
            entries[name] = (store_blob(repo, data), mode)
    for name, sub in nested.items():
        sub_base = base[name] if name in entries and entries[name][1] == TREE_MODE else _empty_tree(repo)
        sha = rewrite_tree(repo, sub_base, sub)
        if sha == EMPTY_TREE:
            entries.pop(name, None)
        else:
            entries[name] = (bytes.fromhex(sha), TREE_MODE)
    return _store_tree(repo, entries).hex()


EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def _empty_tree(repo: git.Repo) -> git.Tree:
    binsha = _store_tree(repo, {})
    return git.Tree(repo, binsha)


def make_commit(repo: git.Repo, tree: str, message: str, parents: list[str]) -> str:
    who = identity(repo)
    commit = git.Commit.create_from_tree(
        repo, git.Tree(repo, bytes.fromhex(tree)), message,
        parent_commits=[repo.commit(p) for p in parents], head=False, author=who, committer=who,
    )
    return commit.hexsha


def cas_ref(repo: git.Repo, ref: str, new: str, old: str) -> bool:
    """Atomically set ``ref`` to ``new`` iff it is ``old`` (ZERO = must not exist). False if it moved.

    InfraError when it did not move but git could not write it: a lock file left by a git process that crashed
    (``<ref>.lock``), a read-only or full repository. That was 'False' too, so a merge said 'main moved during the
    merge; re-verify' and the run recorded its accepted candidate as not merged, while main had not moved."""
    try:
        repo.git.update_ref(ref, new, old)
        return True
    except git.GitCommandError as e:
        if ref_sha(repo, ref) != (None if old == ZERO else old):
            return False
        stderr = str(e.stderr or "")
        if found := _IN_THE_WAY.search(stderr):  # refs/heads/candidate blocks refs/heads/candidate/r1-x (or back)
            short = found.group(1).removeprefix("refs/heads/")
            raise InfraError(f"git could not make {ref} in the harness repository {repo.working_dir}: the branch "
                             f"'{short}' is in the way (a branch name cannot also be a folder of branches); rename it "
                             f"(git branch -m {short} {short}-old)", retryable=False) from e
        why = next((line.strip() for line in stderr.splitlines() if line.strip()), str(e))
        hint = " (if no git command is running there, remove the stale lock file it names)" if ".lock" in stderr else ""
        raise InfraError(f"git could not update {ref} of the harness repository {repo.working_dir}: "
                         f"{why.removeprefix('stderr: ').strip(chr(39))}{hint}", retryable=False) from e


# git's refusal of a ref whose name another ref's path blocks: "'refs/heads/candidate' exists; cannot create
# 'refs/heads/candidate/r1-x'" (and the other way round, "'refs/heads/candidate/r1-x' exists; cannot create ...")
_IN_THE_WAY = re.compile(r"'(refs/[^']+)' exists; cannot create")


def ref_sha(repo: git.Repo, ref: str) -> str | None:
    """The commit ``ref`` (a full ref name or a revision) points at, or None."""
    if ref.startswith("refs/"):
        try:  # read the ref file / packed-refs in-process: no subprocess on this hot path
            obj = git.Reference(repo, ref, check_path=False).object
            return obj.hexsha if obj.type == "commit" else None
        except (ValueError, OSError, TypeError):
            return None
    try:
        return repo.git.rev_parse("--verify", "--quiet", f"{ref}^{{commit}}")
    except git.GitCommandError:
        return None


# ---- notes -----------------------------------------------------------------------------------

def write_note(repo: git.Repo, notes_ref: str, commit: str, payload: dict) -> None:
    text = json.dumps(payload, indent=2)
    repo.git.notes(f"--ref={notes_ref}", "add", "-f", "-m", text, commit, env=identity_env(repo))


def read_notes(repo: git.Repo, notes_ref: str) -> dict[str, dict]:
    """Every note under ``refs/notes/<notes_ref>`` as {commit sha: parsed JSON} (fan-out aware)."""
    sha = ref_sha(repo, f"refs/notes/{notes_ref}")
    if sha is None:
        return {}
    out: dict[str, dict] = {}

    def walk(tree: git.Tree, prefix: str) -> None:
        for obj in tree:
            if obj.type == "tree":
                walk(obj, prefix + obj.name)
            elif obj.type == "blob":
                try:
                    out[prefix + obj.name] = json.loads(obj.data_stream.read().decode("utf-8"))
                except (ValueError, UnicodeDecodeError):
                    continue  # a note someone else wrote by hand; not ours

    walk(repo.commit(sha).tree, "")
    return out


# ---- trailers --------------------------------------------------------------------------------

def format_trailers(pairs: list[tuple[str, str]]) -> str:
    return "\n".join(f"{k}: {' '.join(v.split()) or '(none)'}" for k, v in pairs)


def parse_trailers(message: str) -> dict[str, str]:
    """Trailers of the last paragraph of a commit message ('(none)' becomes '')."""
    paragraphs = [p for p in message.strip().split("\n\n") if p.strip()]
    if not paragraphs:
        return {}
    out: dict[str, str] = {}
    for line in paragraphs[-1].splitlines():
        key, sep, value = line.partition(": ")
        if sep and key and " " not in key:
            out[key] = "" if value.strip() == "(none)" else value.strip()
    return out


def damaged_object(error: Exception) -> str:
    """One line for GitPython's error on an object the repository lacks (its ValueError 'SHA ... could not be
    resolved, git returned: b'... missing'', or git's own fatal line)."""
    text = str(getattr(error, "stderr", None) or error)
    if "missing" in text or "not a valid object name" in text.lower() or "could not get object info" in text:
        return "the object is missing"
    line = next((x.strip() for x in text.splitlines() if x.strip()), type(error).__name__)
    return line.removeprefix("stderr: ").strip("'")[:200]


def damaged_repository(path: Path) -> str | None:
    """``a damaged git repository: WHY`` for ``path``, which git refused to open as a repository: its ``.git`` is there
    but git cannot read it (HEAD garbage, empty or missing; objects or refs gone). None when ``path`` holds no ``.git``
    (a plain directory). Git itself says only 'not a git repository' of such a directory. The one place these words
    are made: every command that opens a harness repo (``HarnessRepo``, rollout's ``CheckoutCache``, ``dataset export
    --render-under``) says them alike."""
    why = _why_damaged(path)
    return None if why is None else damaged_repository_because(why)


def refused_repository(path: Path) -> str | None:
    """``a damaged git repository: git refuses it: WHY`` when git itself will not work in ``path`` though GitPython
    opened it (a ``.git/config`` git cannot parse: GitPython's cat-file process dies, a broken pipe, or 'SHA is
    empty, possible dubious ownership'); None when git works there. One git process: ask it on a failure path only."""
    done = subprocess.run(["git", "-C", str(path), "rev-parse", "--git-dir"], capture_output=True, text=True,
                          errors="replace", stdin=subprocess.DEVNULL)
    if done.returncode == 0:
        return None
    line = next((x.strip() for x in done.stderr.splitlines() if x.strip()), f"git exited {done.returncode}")
    return damaged_repository_because(f"git refuses it: {line.removeprefix('fatal: ')[:200]}")


def damaged_repository_because(why: str) -> str:
    """``a damaged git repository: WHY``: the one place these words are made (``damaged_repository`` and
    ``refused_repository`` say them with the reason each finds)."""
    return f"a damaged git repository: {why}"


def ref_target(repo: git.Repo, ref: str) -> str | None:
    """The sha a full ref name (``refs/heads/main``) holds, from its file or packed-refs, whether or not the
    repository has that object; None when there is no such ref."""
    try:
        return git.SymbolicReference.dereference_recursive(repo, ref)
    except (ValueError, OSError, TypeError):
        return None


def unreadable_ref(repo: git.Repo, ref: str) -> str | None:
    """``REF names commit SHA, which cannot be read (WHY): a damaged or partly copied repository`` when ``ref`` (a
    full ref name) holds a sha whose commit the repository cannot give (the object missing or not a commit); None
    when there is no such ref or it reads."""
    if not re.fullmatch(r"refs/[A-Za-z0-9._/-]+", ref) or ".." in ref:  # a --commit value: no path out of refs/
        return None
    sha = ref_target(repo, ref)
    if sha is None:
        return None
    try:
        kind = repo.git.cat_file("-t", sha)
    except git.GitCommandError as e:
        return unreadable_commit(ref, sha, damaged_object(e))
    return None if kind == "commit" else unreadable_commit(ref, sha, f"it is a {kind}, not a commit")


def unreadable_commit(ref: str, sha: str, why: str) -> str:
    """``REF names commit SHA, which cannot be read (WHY): a damaged or partly copied repository``: the words
    ``HarnessRepo`` (a branch whose commit git cannot give) and ``unreadable_ref`` (rollout's ``CheckoutCache``) say
    alike; ``why`` is ``damaged_object``'s reason or what the object is instead of a commit."""
    return f"{ref} names commit {sha[:10]}, which cannot be read ({why}): a damaged or partly copied repository"


def _why_damaged(path: Path) -> str | None:
    dot = path / ".git"
    if not dot.exists():
        return None
    if not dot.is_dir():
        return f"{dot} is a file git cannot follow to a git directory"
    head = dot / "HEAD"
    try:
        text = head.read_bytes()[:200]
    except FileNotFoundError:
        return f"{head} is missing (it holds the checked-out branch: write 'ref: refs/heads/main' into it to repair it)"
    except OSError as e:
        return f"{head} cannot be read ({e.strerror or type(e).__name__})"
    if not re.fullmatch(rb"(ref: refs/\S+|[0-9a-f]{40}|[0-9a-f]{64})\s*", text):
        return (f"{head} holds {text.decode('utf-8', 'replace')[:60]!r}, not 'ref: refs/heads/BRANCH' or a commit id "
                "(write 'ref: refs/heads/main' into it to repair it)")
    missing = [name for name in ("objects", "refs") if not (dot / name).is_dir()]
    return f"{dot} lacks {' and '.join(missing)}" if missing else f"{dot} is a git directory git cannot open"
