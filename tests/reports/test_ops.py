"""The ops/ deployment files: the example config loads and names only real settings; the unit and
compose file carry the stop semantics the service relies on."""

from __future__ import annotations

import configparser
import re
import tomllib
from pathlib import Path

import yaml
from pydantic import BaseModel

from evoharness.config import Settings, load_settings
from tests.reports.conftest import cli

OPS = Path(__file__).resolve().parents[2] / "ops"
EXAMPLE = OPS / "evoharness.example.toml"


def _unknown_keys(tree: dict, model: type[BaseModel], prefix: str = "") -> list[str]:
    """Keys of ``tree`` that are not fields of ``model`` (pydantic would silently ignore them)."""
    out = []
    for key, value in tree.items():
        field = model.model_fields.get(key)
        if field is None:
            out.append(prefix + key)
            continue
        ann = field.annotation
        if isinstance(value, dict) and isinstance(ann, type) and issubclass(ann, BaseModel):
            out += _unknown_keys(value, ann, f"{prefix}{key}.")
    return out


def test_the_example_config_loads_and_every_key_is_a_setting():
    settings = load_settings(EXAMPLE, environ={})
    tree = tomllib.loads(EXAMPLE.read_text())
    assert _unknown_keys(tree, Settings) == []
    sections = {name for name, f in Settings.model_fields.items()
                if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel)}
    assert sections <= set(tree), f"sections missing from the example: {sections - set(tree)}"
    # the values are the example's, not the defaults
    assert settings.home == Path("/var/lib/evoharness")
    assert settings.run.review is True and settings.run.budget == 20000
    assert settings.service.protect_reads is True and settings.sandbox.workers == 4
    assert settings.diagnosis.routing["F3"] == "harness"


def test_the_examples_verification_values_are_the_tuned_defaults():
    """The example set max_tasks 24, control_ratio 0.5 and attribution_min_share 0.5, the values from before the
    2026-12-04 re-tuning (control_ratio 0.5 let 6 of 96 simulated harmful edits through, 2.0 none): a deployment
    copied from it verified with the weaker settings. Every [verification] key it sets is now the default."""
    from evoharness.verification.config import VerificationSettings

    section = tomllib.loads(EXAMPLE.read_text())["verification"]
    fields = VerificationSettings.model_fields
    assert {k: v for k, v in section.items() if v != fields[k].default} == {}


def test_the_cli_reads_the_example_config(capsys, monkeypatch):
    monkeypatch.delenv("EVOHARNESS_HOME")  # the test isolation sets it; it would override the file's home
    # an unknown run is looked up under the example's home: proof the CLI loaded the file
    assert cli("--config", str(EXAMPLE), "report", "run-none", "--out", "/nonexistent/x") == 2
    assert "/var/lib/evoharness/runs" in capsys.readouterr().err


def test_the_systemd_unit_restarts_on_failure_and_stops_gracefully():
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str
    unit.read_string((OPS / "evoharness.service").read_text())
    svc = unit["Service"]
    assert svc["Restart"] == "on-failure" and svc["KillSignal"] == "SIGTERM"
    assert svc["ExecStart"].split()[-3:] == ["serve", "--config", "/etc/evoharness/evoharness.toml"]
    timeout = int(svc["TimeoutStopSec"].removesuffix("s"))
    shutdown = load_settings(EXAMPLE, environ={}).service.shutdown_timeout_s
    assert timeout > shutdown  # the node gets its shutdown_timeout_s before systemd escalates to SIGKILL


def test_compose_runs_the_service_postgres_and_ray_with_the_token_from_the_environment():
    compose = yaml.safe_load((OPS / "compose.yaml").read_text())
    services = compose["services"]
    assert {"evoharness", "postgres", "ray-head"} <= set(services)
    svc = services["evoharness"]
    env = svc["environment"]
    assert env["EVOHARNESS_API_TOKEN"].startswith("${EVOHARNESS_API_TOKEN")
    assert env["EVOHARNESS_RUN__CHECKPOINTER"].startswith("postgresql://")
    assert any(str(v).endswith(":/var/lib/evoharness") for v in svc["volumes"])
    grace = int(str(svc["stop_grace_period"]).removesuffix("s"))
    assert svc["stop_signal"] == "SIGTERM" and grace > load_settings(EXAMPLE, environ={}).service.shutdown_timeout_s
    # every EVOHARNESS_* variable compose sets (but the token and config path) is a real setting
    for key in env:
        if key.startswith("EVOHARNESS_") and key not in ("EVOHARNESS_API_TOKEN", "EVOHARNESS_CONFIG"):
            path = key.removeprefix("EVOHARNESS_").lower().split("__")
            model: type[BaseModel] = Settings
            for part in path[:-1]:
                model = model.model_fields[part].annotation
            assert path[-1] in model.model_fields, key


def test_every_ops_file_the_deployment_files_name_exists():
    """A path under ops/ that a deployment file or its README tells the reader to copy, build or install
    exists in the repository; ``ops/.env`` is the one the reader writes (ops/README.md, "compose.yaml")."""
    written_by_the_reader = {"ops/.env"}
    texts = [p for p in OPS.rglob("*") if p.is_file() and p.suffix in ("", ".yaml", ".md", ".toml", ".service", ".sh")]
    named = {m for p in texts for m in re.findall(r"ops/[A-Za-z0-9_./-]*[A-Za-z0-9_]", p.read_text(errors="replace"))}
    assert named  # the pattern finds the paths the files do name (ops/Dockerfile, ...)
    missing = sorted(n for n in named - written_by_the_reader if not (OPS.parent / n).exists())
    assert missing == []


def test_the_secrets_file_the_ops_pages_write_is_never_readable_by_others(tmp_path):
    """ops/README.md and compose.yaml's header write the API token and the Postgres password with `printf ... >
    ops/.env`, then `chmod 600`: under the usual umask 022 the file is made readable by every local user first, and
    stays so if the chmod never runs (a paste cut short). Each writing line, run as written under umask 022, leaves a
    file only its owner reads."""
    import os
    import stat
    import subprocess

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "openssl").write_text("#!/bin/sh\necho 0123abcd\n")  # `openssl rand -hex N`, offline
    (bin_dir / "openssl").chmod(0o755)
    (tmp_path / "ops").mkdir()
    pages = {"README.md": (OPS / "README.md").read_text(), "compose.yaml": (OPS / "compose.yaml").read_text()}
    lines = [(page, line.strip().removeprefix("#").strip()) for page, text in pages.items()
             for line in text.splitlines() if "> ops/.env" in line]
    assert len(lines) == 2, lines
    for page, line in lines:
        (tmp_path / "ops" / ".env").unlink(missing_ok=True)
        subprocess.run(["bash", "-c", f"umask 022; {line}"], cwd=tmp_path, check=True,
                       env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
        mode = stat.S_IMODE((tmp_path / "ops" / ".env").stat().st_mode)
        assert mode & 0o077 == 0, (page, oct(mode), line)
        assert "EVOHARNESS_API_TOKEN=0123abcd" in (tmp_path / "ops" / ".env").read_text()
