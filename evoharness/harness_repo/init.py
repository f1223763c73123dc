"""`init_harness`: create a seed harness repo with one initial commit on ``main``."""

from __future__ import annotations

import shutil
from pathlib import Path

import git

from evoharness.errors import InputError, missing_reason
from evoharness.harness_repo import gitops
from evoharness.harness_repo.config import HarnessRepoConfig
from evoharness.harness_repo.manifest import MANIFEST_NAME, Manifest
from evoharness.harness_repo.repo import HarnessRepo
from evoharness.harness_repo.review import git_reason
from evoharness.harness_repo.seed import seed_files


def init_harness(dir: Path | str, manifest: Manifest | None = None,
                 config: HarnessRepoConfig | None = None) -> HarnessRepo:
    """Create ``dir`` (absent or empty) as a harness repo: seed files, ``harness.toml``, one commit."""
    root = Path(dir)
    if root.is_symlink() and not root.exists():  # a link that leads nowhere said 'file exists' (mkdir's error)
        raise InputError(str(root), missing_reason(root))
    if root.exists() and not root.is_dir():  # said "is not an empty directory" of a file
        raise InputError(str(root), "is a file; name an absent or empty directory for the new harness repo")
    if root.exists() and any(root.iterdir()):
        raise InputError(str(root), "exists and is not an empty directory")
    manifest = manifest or Manifest()
    made = _missing(root)
    root.mkdir(parents=True, exist_ok=True)
    files = dict(seed_files())
    files[MANIFEST_NAME] = manifest.to_toml()
    try:
        for rel, text in files.items():
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        repo = git.Repo.init(root, initial_branch=manifest.main_branch)
        repo.git.add("--", *sorted(files))
        repo.git.commit("-q", "-m", "evoharness: seed harness", env=gitops.identity_env(repo))
    except (OSError, git.GitCommandError) as e:  # a full disk, a file size limit: no half a repo left behind
        _undo(root, made)
        if isinstance(e, OSError):
            where = f"{Path(e.filename).relative_to(root)}: " if e.filename and root in Path(e.filename).parents else ""
            reason = where + (e.strerror or str(e)).lower()
        else:
            reason = f"git: {git_reason(e)}"
        raise InputError(str(root), f"could not create the harness repo ({reason}); nothing was left there") from None
    return HarnessRepo(root, config)


def _missing(root: Path) -> list[Path]:
    """``root`` and its parents that do not exist yet, deepest first."""
    made = []
    p = root
    while not p.exists() and p != p.parent:
        made.append(p)
        p = p.parent
    return made


def _undo(root: Path, made: list[Path]) -> None:
    """What a failed ``init_harness`` wrote: the directories it made go, and a directory that was there (empty, as
    ``init_harness`` requires) is emptied again."""
    if made:
        shutil.rmtree(made[-1], ignore_errors=True)
        return
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
