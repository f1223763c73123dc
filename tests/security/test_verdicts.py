"""Merges need a verdict the verifier signed: a hand-built ``Verdict`` or a forged git note is not one."""

from __future__ import annotations

import pytest

from evoharness.errors import MergeRefused
from evoharness.harness_repo import gitops
from evoharness.harness_repo.init import init_harness
from evoharness.harness_repo.models import Edit, Verdict
from evoharness.harness_repo.review import list_candidates
from evoharness.harness_repo.signing import is_signed, key_path, sign


def _candidate(tmp_path):
    hr = init_harness(tmp_path / "h")
    cand = hr.create_candidate(Edit(message="Add a lesson", targets="F3.repeated_action",
                                    changes=[{"path": "lessons.md", "content": "Read each result.\n"}]))
    return hr, cand


def test_a_hand_built_verdict_does_not_merge(tmp_path):
    hr, cand = _candidate(tmp_path)
    main = hr.main_head()
    forged = Verdict(candidate=cand.branch, commit=cand.commit, base=main, accepted=True, reason="trust me")
    with pytest.raises(MergeRefused, match="not signed"):
        hr.merge_verified(cand.branch, forged)
    with pytest.raises(MergeRefused, match="not signed"):  # a signature copied from another verdict
        other = sign(hr.repo, forged.model_copy(update={"accepted": False}))
        hr.merge_verified(cand.branch, forged.model_copy(update={"signature": other.signature}))
    assert hr.main_head() == main
    signed = sign(hr.repo, forged)  # what the verifier does
    assert is_signed(hr.repo, signed) and key_path(hr.repo).stat().st_mode & 0o077 == 0
    assert hr.merge_verified(cand.branch, signed) == hr.main_head() != main


def test_a_forged_note_does_not_make_review_show_verified(tmp_path):
    hr, cand = _candidate(tmp_path)
    forged = Verdict(candidate=cand.branch, commit=cand.commit, base=hr.main_head(), accepted=True,
                     signature="00" * 32)
    gitops.write_note(hr.repo, hr.config.notes_ref, cand.commit, {"status": "verdict",
                                                                   "verdict": forged.model_dump(mode="json")})
    (info,) = list_candidates(hr)
    assert info.status == "pending" and "did not sign" in info.verdict
    hr.record_verdict(sign(hr.repo, forged))
    (info,) = list_candidates(hr)
    assert info.status == "verified"


def test_the_verdict_key_is_out_of_the_sandbox(tmp_path, bwrap):
    """The key is per repository, 0600, in a 0700 directory; sandboxed code cannot read it at its host path,
    and a run whose sandbox would bind the repository's git directory is refused before any rollout."""
    import sys

    from evoharness.errors import InfraError
    from evoharness.sandbox.api import RolloutRequest
    from evoharness.sandbox.bwrap import BwrapSandbox
    from evoharness.sandbox.executor import LocalExecutor
    from evoharness.sandbox.models import Limits

    hr, cand = _candidate(tmp_path)
    sign(hr.repo, Verdict(candidate=cand.branch, commit=cand.commit, base=hr.main_head(), accepted=True))
    key = key_path(hr.repo)
    assert key.stat().st_mode & 0o777 == 0o600 and key.parent.stat().st_mode & 0o777 == 0o700
    other = init_harness(tmp_path / "other")
    sign(other.repo, Verdict(candidate="c", commit="x", base="y", accepted=True))
    assert key_path(other.repo).read_bytes() != key.read_bytes()  # one key per repository
    work = tmp_path / "work"
    work.mkdir()
    probe = f"open({str(key)!r}, 'rb').read()"
    res = bwrap.run([sys.executable, "-c", probe], harness_dir=hr.path, workdir=work, env={},
                    limits=Limits(wall_seconds=20))
    assert res.returncode != 0 and "FileNotFoundError" in res.stderr, (res.returncode, res.stderr)
    exposing = BwrapSandbox(ro_paths=[tmp_path])  # binds the repository, .git and its key included
    with pytest.raises(InfraError, match="could read its verdict key"), \
            LocalExecutor(hr.path, "synthetic", "scripted:oracle", sandbox=exposing) as ex:
        ex.run([RolloutRequest(task_id="contact_0", harness_commit="HEAD")])
    key.chmod(0o644)  # loosened by someone: narrowed again when read
    assert is_signed(hr.repo, sign(hr.repo, Verdict(candidate="c", commit="x", base="y", accepted=True)))
    assert key.stat().st_mode & 0o777 == 0o600
