"""One configuration model: `evoharness.toml` + `EVOHARNESS_*` env + dotted CLI overrides.

Precedence, lowest first: defaults, the TOML file, environment variables
(``EVOHARNESS_DIAGNOSIS__REPEAT_MIN=4``: double underscore between levels),
then ``--set diagnosis.repeat_min=4`` overrides on the command line.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from evoharness import config_keys
from evoharness.datasets.config import DatasetsConfig
from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.errors import InputError, missing_reason
from evoharness.graph.config import RunConfig
from evoharness.harness_repo.config import HarnessRepoConfig
from evoharness.roles.config import RolesConfig
from evoharness.sandbox.config import SandboxConfig
from evoharness.service.config import ServiceConfig
from evoharness.verification.config import VerificationSettings, check_seed_room

ENV_PREFIX = "EVOHARNESS_"

# Keys that were removed or moved: old dotted key -> its replacement. Setting one is an error that
# names the replacement (in a file, an env variable or --set). Data, so the unknown-key check can
# read it too.
REMOVED_KEYS: dict[str, str] = {
    "run.ceiling_process_share": "diagnosis.ceiling_process_share (one ceiling, shared by `diagnose` and runs)",
    "run.dev_tasks": "run.dev_limit (a count of dev tasks)",
    "run.heldout_tasks": "run.heldout_limit (a count; datasets.heldout_tasks is the list of held-out task ids)",
    "agent": "run.model for the agent's model and the harness's policies.yaml for its policies (the [agent] "
             "section was empty)",
    "roles.timeout_s": "roles.deadline_s (a per-call deadline: the request is cancelled, never re-sent)",
    "verification.rollouts": "`evoharness verify --rollouts` (runs use run.rollouts; the key was ignored by runs)",
    "verification.anchor_rollouts": "`evoharness verify --anchor-rollouts` (runs use run.rollouts; the key was "
                                    "ignored by runs)",
    "verification.budget": "`evoharness verify --budget` (runs use run.budget; the key was ignored by runs)",
    "sandbox.warm_spare": "nothing (a warm worker now serves any commit: one per sandbox slot, no spare ones)",
    "roles.max_candidates_per_round": "run.max_candidates (the analyst returns up to that many patterns a round; "
                                      "this key was never read)",
    "verification.paired_alpha": "nothing (no selection strategy uses the paired gate, so the key was never read; "
                                 "`verification.sequential_alpha` is the gain test's false-accept rate)",
}


# How a run's saved settings (`settings.json` written by an older version) carry over on resume:
# old dotted key -> new dotted key (None: dropped). The same keys as REMOVED_KEYS.
MIGRATED_KEYS: dict[str, str | None] = {
    "run.ceiling_process_share": "diagnosis.ceiling_process_share",
    "run.dev_tasks": "run.dev_limit",
    "run.heldout_tasks": "run.heldout_limit",
    "agent": None,
    "verification.rollouts": None,
    "verification.anchor_rollouts": None,
    "verification.budget": None,
    "sandbox.warm_spare": None,
    "roles.max_candidates_per_round": None,
    "verification.paired_alpha": None,
}


def migrate_saved(tree: dict[str, Any]) -> dict[str, Any]:
    """A saved settings tree with its removed keys moved to their replacements (or dropped)."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in tree.items()}
    for old, new in MIGRATED_KEYS.items():
        *parents, leaf = old.split(".")
        node = out
        for p in parents:
            node = node.get(p) if isinstance(node, dict) else None
        if not isinstance(node, dict) or leaf not in node:
            continue
        value = node.pop(leaf)
        if new is not None:
            section, key = new.split(".")
            out.setdefault(section, {})[key] = value
    return out


def check_removed_keys(tree: dict[str, Any], source: str = "settings") -> None:
    """Raise `InputError` naming the replacement when ``tree`` sets a key of `REMOVED_KEYS`."""
    for dotted, instead in REMOVED_KEYS.items():
        node: Any = tree
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
        else:
            raise InputError(source, f"{dotted} was removed: use {instead}")


class Settings(BaseModel):
    """Everything evoharness reads. Sections are owned by the package that uses them."""

    home: Path = Field(
        Path(".evoharness"),
        description="Where runs, stores, checkpoints and caches live (relative to the cwd).",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "warning", description="debug | info | warning | error (progress lines are separate)")
    log_format: Literal["auto", "console", "json", "plain"] = Field(
        "auto", description="auto (console on a TTY; otherwise json for `serve`, plain for every other "
        "command) | console | json | plain (one `warning: event: detail` line per event)")
    diagnosis: DiagnosisConfig = Field(default_factory=DiagnosisConfig)
    harness_repo: HarnessRepoConfig = Field(default_factory=HarnessRepoConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    verification: VerificationSettings = Field(default_factory=VerificationSettings)
    roles: RolesConfig = Field(default_factory=RolesConfig)
    datasets: DatasetsConfig = Field(default_factory=DatasetsConfig)
    run: RunConfig = Field(default_factory=RunConfig)
    service: ServiceConfig = Field(default_factory=ServiceConfig)

    @field_validator("log_level", "log_format", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:  # "INFO" was read as info before the values were checked
        return value.strip().lower() if isinstance(value, str) else value

    @model_validator(mode="before")
    @classmethod
    def _no_removed_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            check_removed_keys(data)
        return data

    @model_validator(mode="after")
    def _seeds_fit_a_round(self) -> Settings:
        check_seed_room(self.verification, self.run.rollouts, "run.rollouts")
        return self


def _set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for p in parts[:-1]:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise InputError("override", f"{dotted}: {p} is not a section")
    node[parts[-1]] = value


def _parse_value(raw: str, source: str) -> Any:
    """``raw`` read as a TOML value, else the text itself; InputError (naming ``source``) for a value no setting can
    be made of: an integer over Python's 4,300-digit conversion limit (tomllib's ValueError) or brackets nested past
    the parser's recursion (RecursionError) were tracebacks; so was text that is not UTF-8 (a shell passes such bytes
    as ``\\udc80``-``\\udcff``: a UnicodeEncodeError out of pydantic)."""
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InputError(source, f"not UTF-8 text (character {e.start + 1}); a setting's value is text") from None
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw
    except ValueError:
        raise InputError(source, "a number over 4,300 digits, which no setting takes") from None
    except (RecursionError, MemoryError):
        raise InputError(source, "nested too deeply to read") from None


def _env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for key, raw in environ.items():
        if not key.startswith(ENV_PREFIX) or key in _NOT_SETTINGS:
            continue
        dotted = config_keys.env_key(key, Settings)
        if dotted is None:
            continue
        _set_dotted(tree, dotted, _parse_value(raw, key))
    return tree


_NOT_SETTINGS = {"EVOHARNESS_API_TOKEN", "EVOHARNESS_CONFIG"}


def settings_in_environment(environ: dict[str, str] | None = None) -> bool:
    """Whether the environment sets (or misspells) a setting, or names a config file (``EVOHARNESS_CONFIG``):
    a command then loads the settings before it runs, so a bad value is an error even where the command reads
    none (it was ignored by ``import``, ``schema``, ``noise``). Other ``EVOHARNESS_*`` variables (the API token,
    the test switches) are not settings."""
    environ = os.environ if environ is None else environ
    for key in environ:
        if key == "EVOHARNESS_CONFIG":
            return True
        if key.startswith(ENV_PREFIX) and key not in _NOT_SETTINGS:
            try:
                if config_keys.env_key(key, Settings) is not None:
                    return True
            except InputError:
                return True
    return False


def check_environment_settings(environ: dict[str, str] | None = None) -> None:
    """The settings the environment gives (``EVOHARNESS_A__B``, ``$EVOHARNESS_CONFIG``'s file), checked as
    ``load_settings`` checks them (InputError), but without ``./evoharness.toml``: a command that reads no
    settings is not failed by a file only the commands that use settings read (it was, with a setting in the
    environment, since 4cf00e6)."""
    load_settings(environ=environ, local_file=False)


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


MAX_CONFIG_BYTES = 16 << 20  # a config of settings is a few KB


def _read_toml(path: Path) -> dict[str, Any]:
    """The config file's tables; a FIFO (which hung the read), a device (``/dev/zero``: memory without end), a
    file not UTF-8 (a UnicodeDecodeError traceback) or nested past the parser's recursion is one InputError."""
    from evoharness.untrusted import check_nesting, read_limited

    if not path.exists():
        raise InputError(str(path), missing_reason(path))
    raw = read_limited(path, MAX_CONFIG_BYTES, what="config file")
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark (Windows Notepad's UTF-8) skipped
    except UnicodeDecodeError as e:
        raise InputError(str(path), f"not UTF-8 text (byte {e.start + 1}); a config file is TOML") from None
    check_nesting(text, str(path))
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(str(path), f"invalid TOML: {e}") from None
    except ValueError:  # an integer past Python's int/str conversion limit: tomllib's own ValueError
        raise InputError(str(path), "a number over 4,300 digits, which no setting takes") from None


def load_settings(
    path: Path | None = None,
    overrides: list[str] | None = None,
    environ: dict[str, str] | None = None,
    local_file: bool = True,
) -> Settings:
    """Load settings. ``path`` defaults to ``$EVOHARNESS_CONFIG`` or ``./evoharness.toml`` if present (the
    latter only with ``local_file``)."""
    environ = dict(os.environ) if environ is None else environ
    tree: dict[str, Any] = {}
    if path is None and environ.get("EVOHARNESS_CONFIG"):
        path = Path(environ["EVOHARNESS_CONFIG"])
    if path is None and local_file and Path("evoharness.toml").is_file():
        path = Path("evoharness.toml")
    if path is not None:
        tree = _read_toml(Path(path))
        config_keys.check_tree(Settings, tree, str(path))
    tree = _merge(tree, _env_overrides(environ))
    for item in overrides or []:
        if "=" not in item:
            raise InputError("--set", f"expected KEY=VALUE, got {item!r}")
        key, raw = item.split("=", 1)
        config_keys.check_override(Settings, key.strip())
        _set_dotted(tree, key.strip(), _parse_value(raw.strip(), f"--set {key.strip()}"))
    try:
        return Settings.model_validate(tree)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise InputError(str(path or "settings"), f"{loc}: {first['msg']}") from None
