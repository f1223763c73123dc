"""`init_harness`: create a seed harness repo with one initial commit on ``main``."""

from __future__ import annotations

from pathlib import Path

import git

from evoharness.errors import InputError
from evoharness.harness_repo import gitops
from evoharness.harness_repo.config import HarnessRepoConfig
from evoharness.harness_repo.manifest import MANIFEST_NAME, Manifest
from evoharness.harness_repo.repo import HarnessRepo
from evoharness.harness_repo.seed import seed_files


def init_harness(dir: Path | str, manifest: Manifest | None = None,
                 config: HarnessRepoConfig | None = None) -> HarnessRepo:
    """Create ``dir`` (absent or empty) as a harness repo: seed files, ``harness.toml``, one commit."""
    root = Path(dir)
    if root.exists() and not root.is_dir():  # said "is not an empty directory" of a file
        raise InputError(str(root), "is a file; name an absent or empty directory for the new harness repo")
    if root.exists() and any(root.iterdir()):
        raise InputError(str(root), "exists and is not an empty directory")
    manifest = manifest or Manifest()
    root.mkdir(parents=True, exist_ok=True)
    files = dict(seed_files())
    files[MANIFEST_NAME] = manifest.to_toml()
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    repo = git.Repo.init(root, initial_branch=manifest.main_branch)
    repo.git.add("--", *sorted(files))
    repo.git.commit("-q", "-m", "evoharness: seed harness", env=gitops.identity_env(repo))
    return HarnessRepo(root, config)
