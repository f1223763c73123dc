"""Ctrl-C in `import` (fix, sixth session): exit 130 with one `interrupted` line and the earlier output kept. A
Ctrl-C while a trajectory was serialised reached the user as pydantic's PydanticSerializationError traceback, exit
1 (pydantic wraps the KeyboardInterrupt); one anywhere else exited 130 without a word (typer's Exit(130))."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, field_serializer

import evoharness.traces.cli as traces_cli
from evoharness.cli import main

TAU = Path(__file__).resolve().parents[1] / "fixtures" / "data" / "tau_bench_airline_gpt4o"


class _Pressed(BaseModel):  # a record whose serialisation is where Ctrl-C lands
    x: int = 0

    @field_serializer("x")
    def _ctrl_c(self, v):
        raise KeyboardInterrupt


def _while_writing(path, trajectories):
    for _ in trajectories:
        _Pressed().model_dump_json()


def _while_reading(path, trajectories):
    raise KeyboardInterrupt


@pytest.mark.parametrize("where", [_while_writing, _while_reading])
def test_ctrl_c_is_one_line_exit_130_and_the_earlier_output_is_kept(where, monkeypatch, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    out.write_text("earlier\n")
    monkeypatch.setattr(traces_cli, "write_trajectories", where)
    assert main(["import", str(TAU), "--out", str(out)]) == 130
    assert capsys.readouterr().err == "interrupted\n"
    assert out.read_text() == "earlier\n"
