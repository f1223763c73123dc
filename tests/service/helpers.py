"""A real `evoharness serve` on a free loopback port, and trajectories to post to it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

TOKEN = "test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(root: Path, *, run: dict[str, Any] | None = None, service: dict[str, Any] | None = None,
                 extra_sections: dict[str, dict[str, Any]] | None = None) -> Path:
    """An evoharness.toml for a tiny, fast run: synthetic env, in-process agent, playbook roles."""
    run = {"harness": str(root / "harness"), "env": "synthetic", "model": "scripted:weak", "rollouts": 2,
           "max_rounds": 1, "budget": 3000, "patience": 2, **(run or {})}
    service = {"loop": True, "poll_interval_s": 0.2, "min_new_process_failures": 0, **(service or {})}

    def table(name: str, values: dict[str, Any]) -> str:
        return f"[{name}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items())

    text = (f"home = {json.dumps(str(root / 'home'))}\nlog_level = \"warning\"\nlog_format = \"json\"\n\n"
            + table("run", run) + "\n" + table("service", service)
            + "\n[sandbox]\nbackend = \"inprocess\"\nworkers = 1\n\n[roles]\nkind = \"playbook\"\n"
            + "".join("\n" + table(k, v) for k, v in (extra_sections or {}).items()))
    path = root / "evoharness.toml"
    path.write_text(text)
    return path


class Server:
    """`python -m evoharness --config CFG serve` in a subprocess, on 127.0.0.1:<free port>."""

    def __init__(self, config: Path, *, token: str | None = TOKEN, args: list[str] | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.config = config
        self.token = token
        self.args = args or []
        self.extra_env = env or {}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = config.parent / f"serve-{self.port}.log"

    def start(self, timeout: float = 60.0) -> Server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVOHARNESS_")}
        if self.token is not None:
            env["EVOHARNESS_API_TOKEN"] = self.token
        env.update(self.extra_env)
        self._fh = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "evoharness", "--config", str(self.config), "serve", "--port", str(self.port),
             *self.args], env=env, stdout=self._fh, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited {self.proc.returncode}:\n{self.output()}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.proc.kill()
        self.proc.wait()
        raise AssertionError(f"serve did not answer /health within {timeout} s:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""

    def client(self, auth: bool = True, timeout: float = 60.0) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=AUTH if auth else {}, timeout=timeout)

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 60.0) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        finally:
            self._fh.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "_fh", None):
            self._fh.close()


def wait_for(fn, timeout: float = 60.0, every: float = 0.2, what: str = "condition"):
    """Poll ``fn()`` until it returns something truthy; returns that value."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def trajectory(tid: str, kind: str = "healthy", task: str = "task-1", split: str = "dev") -> dict[str, Any]:
    """A canonical trajectory dict: 'healthy' (delivered, score 1), 'content' (delivered, backed, score 0.1:
    F4) or 'process' (the same tool call repeated, never delivered: F3)."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are the agent."},
                                  {"role": "user", "content": f"Look up the status of order 42 ({task})."}]
    calls = 4 if kind == "process" else 1
    for i in range(calls):
        cid = f"c{i}"
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": "get_order", "arguments": "{\"id\": 42}"}}]})
        msgs.append({"role": "tool", "tool_call_id": cid, "name": "get_order", "content": "order 42: shipped"})
    final = None if kind == "process" else "Order 42: shipped."
    if final:
        msgs.append({"role": "assistant", "content": final})
    return {"id": tid, "task_id": task, "split": split, "model": "m", "messages": msgs, "final_answer": final,
            "score": {"healthy": 1.0, "content": 0.1, "process": 0.0}[kind],
            "termination": "step_budget" if kind == "process" else "delivered",
            "usage": {"steps": calls + (1 if final else 0)}}
