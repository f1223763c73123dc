"""Settings section `[datasets]`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from . import urls


class DatasetsConfig(BaseModel):
    """The training-dataset queue and exporters. Each field carries a description."""

    model_config = ConfigDict(allow_inf_nan=False)  # inf, nan (TOML reads 1e999 as inf): refused

    url: str | None = Field(
        None,
        description="SQLAlchemy URL of the training queue (e.g. postgresql+psycopg://user@host/db). "
        "Unset: a SQLite file `queue.db` under `home`.",
    )

    @field_validator("url")
    @classmethod
    def _url_not_blank(cls, v: str | None) -> str | None:
        """An empty or blank URL (``--set datasets.url=``, a variable left unset) is no URL: it read the default
        queue under ``home`` without a word."""
        if v is not None and not v.strip():
            raise ValueError("empty URL (leave datasets.url unset for the SQLite queue under home)")
        if v is not None and isinstance(problem := urls.parse(v), str):  # checked as the settings load: `run`,
            raise ValueError(problem)  # `demo` and `serve` took an in-memory queue and lost what they enqueued
        return v

    heldout_tasks: list[str] = Field(
        default_factory=list,
        description="Task ids that are held out and never exported, in addition to every task that "
        "any source trajectory marks `split = heldout`.",
    )
    tokenizer: str | None = Field(
        None,
        description="A local Hugging Face tokenizer directory (the base model's: tokenizer.json and its chat template) "
        "that exports count token lengths with (`dataset export` without --tokenizer, and the service's "
        "POST /datasets/export, whose body names no path on the server). Unset: approximate, UTF-8 bytes / 3.",
    )
    placebo_seed: int = Field(0, description="Seed of the placebo permutation (same seed, same placebo).")
    placebo_window: int = Field(
        5_000, ge=2,
        description="Placebo permutes assistant turns within windows of this many records, which "
        "bounds the memory of a placebo export (a window is held in memory); smaller sets are "
        "permuted as one window.",
    )
