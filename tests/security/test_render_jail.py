"""The host-side template render process runs in a bubblewrap jail where bubblewrap works
(``untrusted_render.render_jail``): code that escaped Jinja's sandbox there can write no host path and reach
no network. The escape is stood in for by a test-only child program (``TemplateRenderer._child_code``
overridden: the probe below runs where the render code would, with the real jail's command line), and a
control runs the same probe in the plain child (no bwrap), where every attack succeeds."""

from __future__ import annotations

import json
import socket
import sys
import time
import uuid
from pathlib import Path

import pytest

from evoharness import untrusted_render
from evoharness.cli import main
from evoharness.harness_repo.init import init_harness
from evoharness.sandbox.bwrap import BwrapSandbox
from evoharness.sandbox.models import Limits
from evoharness.traces.models import Trajectory
from evoharness.traces.store import write_trajectories
from evoharness.untrusted_render import TemplateRenderer, render_jail

# Speaks the render process's protocol (answers the compile, then each record with a JSON of what it tried).
PROBE = r'''
import json, os, pickle, socket, struct, sys
H = struct.Struct(">I")
def read():
    (n,) = H.unpack(sys.stdin.buffer.read(4))
    return pickle.loads(sys.stdin.buffer.read(n))
def answer(text):
    data = b"O" + text.encode()
    os.write(1, H.pack(len(data)) + data)
def attempt(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return type(e).__name__ + ": " + (e.strerror or str(e))
def write(path):
    with open(path, "w") as fh:
        fh.write("escaped")
def tcp():
    with socket.create_connection(("127.0.0.1", ARGS["port"]), timeout=3):
        pass
def unix():
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(3)
        s.connect(ARGS["unix"])
def read_secret():
    with open(ARGS["secret"]) as fh:
        fh.read()
read()
answer("")
message = read()
for _ in message[1]:
    answer(json.dumps({"uid": os.getuid(), "tcp": attempt(tcp), "unix": attempt(unix),
                       "read": attempt(read_secret),
                       **{"write " + p: attempt(lambda p=p: write(p)) for p in ARGS["writes"]}}))
'''


class Probe(TemplateRenderer):
    def __init__(self, args: dict) -> None:
        super().__init__("{{ n }}", "prompts/system.md")
        self.args = args

    def _child_code(self) -> str:
        return f"ARGS = {self.args!r}\n" + PROBE


@pytest.fixture()
def targets(tmp_path):
    """Host resources the probe goes for: a TCP and a Unix listener, a secret file, two writable host paths
    (one in the test's directory, one beside the interpreter the jail binds read-only); removed after."""
    tcp = socket.create_server(("127.0.0.1", 0))
    unix = socket.socket(socket.AF_UNIX)
    unix_path = tmp_path / "s.sock"
    unix.bind(str(unix_path))
    unix.listen()
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    writes = [str(tmp_path / "escaped.txt"), str(Path(sys.prefix) / f"evoharness-render-probe-{uuid.uuid4().hex}")]
    try:
        yield {"port": tcp.getsockname()[1], "unix": str(unix_path), "secret": str(secret), "writes": writes}
    finally:
        tcp.close()
        unix.close()
        for w in writes:
            Path(w).unlink(missing_ok=True)


def probe(args: dict) -> tuple[dict, Probe]:
    with Probe(args) as r:
        return json.loads(r.render_one({"n": 0})), r


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (from /proc)."""
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        try:
            parents[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (ValueError, OSError, IndexError):
            continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        out += kids
        todo += kids
    return out


needs_jail = pytest.mark.skipif(render_jail()[0] is None, reason=f"no bubblewrap jail here: {render_jail()[1]}")


@needs_jail
def test_code_in_the_jailed_render_process_writes_no_host_path_and_reaches_no_network(targets):
    got, r = probe(targets)
    assert r.jailed is True and r.unjailed == ""
    for w in targets["writes"]:
        assert got[f"write {w}"] != "ok", got
        assert not Path(w).exists()
    assert got["tcp"] != "ok" and got["unix"] != "ok", got  # its own network namespace; no socket bound in
    assert got["read"] != "ok", got  # the test's directory is not in the jail at all
    if untrusted_render.render_jail()[0].privileged:
        assert got["uid"] != 0, got  # as root, another uid


def test_control_the_same_probe_in_the_plain_child_escapes(targets, monkeypatch):
    """Without bubblewrap (a missing program stands in for a machine without it) the child runs as before,
    and says so: every attack of the probe succeeds there (what the jail test above would see unjailed)."""
    monkeypatch.setattr(untrusted_render, "BWRAP", "evoharness-no-such-bwrap")
    got, r = probe(targets)
    assert r.jailed is False and "evoharness-no-such-bwrap" in r.unjailed
    assert [got[f"write {w}"] for w in targets["writes"]] == ["ok", "ok"], got
    assert (got["tcp"], got["unix"], got["read"]) == ("ok", "ok", "ok"), got


def test_without_bubblewrap_templates_still_render_and_the_fallback_is_logged_once(monkeypatch, capsys):
    monkeypatch.setattr(untrusted_render, "BWRAP", f"evoharness-no-such-bwrap-{uuid.uuid4().hex}")
    for n in range(2):
        with TemplateRenderer("record {{ n }}", "prompts/system.md") as r:
            assert r.render_many([{"n": n}, {"n": n + 1}]) == [f"record {n}", f"record {n + 1}"]
            assert r.jailed is False and "not found" in r.unjailed
    logged = capsys.readouterr()
    assert (logged.out + logged.err).count("render.unjailed") == 1


@needs_jail
def test_the_jailed_child_keeps_its_limits_and_leaves_no_process_behind():
    template = ("{% if bomb %}{% for a in range(10000) %}{% for b in range(10000) %}{% for c in range(10) %}"
                "{% endfor %}{% endfor %}{% endfor %}{% endif %}record {{ n }}")
    r = TemplateRenderer(template, "prompts/system.md", limits=untrusted_render.RenderLimits(cpu_s=1))
    results = r.render_many([{"n": 0, "bomb": False}, {"n": 1, "bomb": True}, {"n": 2, "bomb": False}])
    assert r.jailed is True
    assert results[0] == "record 0" and results[2] == "record 2"
    assert "CPU-second limit" in results[1].reason and results[1].limit  # bwrap's 128 + SIGXCPU read as such
    assert r.render_one({"n": 3, "bomb": False}) == "record 3"
    jail = r._proc.pid
    inside = descendants(jail)
    assert inside  # bwrap's own process, then the render process
    r.close()
    deadline = time.monotonic() + 10  # bwrap's own pid 1 may take a moment to follow the render process out
    while [p for p in inside if running(p)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in inside if running(p)]


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (an exited one not yet reaped by init is a zombie: not running)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_jail_is_a_rollouts_without_its_writable_mounts(tmp_path):
    """The command line: the rollout sandbox's namespaces, filter and session, and no writable bind."""
    argv = BwrapSandbox().jail_argv(["python"], uid=None, seccomp=9)
    rollout = BwrapSandbox().argv(["python"], harness_dir=tmp_path, workdir=tmp_path,
                                  limits=Limits(), uid=None, seccomp=9)
    for flag in ("--unshare-net", "--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session"):
        assert flag in argv and flag in rollout
    assert argv[argv.index("--seccomp") + 1] == "9"
    assert "--bind" not in argv and "--bind" in rollout  # the rollout's /scratch is its one writable bind
    assert argv[argv.index("--chdir") + 1] == "/"


@pytest.mark.parametrize("jail", [True, False], ids=["bwrap", "no bwrap"])
def test_the_export_says_when_its_render_process_ran_unjailed(tmp_path, capsys, monkeypatch, jail):
    if jail and render_jail()[0] is None:
        pytest.skip(f"no bubblewrap jail here: {render_jail()[1]}")
    if not jail:
        monkeypatch.setattr(untrusted_render, "BWRAP", "evoharness-no-such-bwrap")
    repo = init_harness(tmp_path / "harness")
    trajs = [Trajectory(id=f"t{i}", task_id=f"task_{i}", task=f"task {i}",
                        messages=[{"role": "user", "content": f"task {i}"}, {"role": "assistant", "content": "done"}],
                        final_answer="done", score=1.0, termination="delivered", meta={"env": "synthetic"})
             for i in range(3)]
    write_trajectories(tmp_path / "t.jsonl", trajs)
    capsys.readouterr()
    code = main(["dataset", "export", "--out", str(tmp_path / "out"), "--source", "all", "-t",
                 str(tmp_path / "t.jsonl"), "--harness", str(repo.path), "--render-under", "seed"])
    assert code == 0
    line = capsys.readouterr().out
    card = (tmp_path / "out" / "README.md").read_text()
    data = (tmp_path / "out" / "data.jsonl").read_text().splitlines()
    systems = [json.loads(x)["messages"][0]["content"] for x in data]
    assert len(systems) == 3 and not any("{{" in s or "{%" in s for s in systems)  # rendered either way
    assert "fell back" not in line
    said = "without its bubblewrap jail" in line, "without its bubblewrap jail" in card
    assert said == ((False, False) if jail else (True, True)), (line, card)
    if not jail:
        assert "evoharness-no-such-bwrap" in line


def test_a_jail_that_cannot_start_python_falls_back_and_says_why(monkeypatch):
    """A jail where the interpreter cannot start (here: one without the Python runtime bound; on a host, a
    runtime the jail's uid cannot read) would fail every render; it is not used, and the reason is given."""
    import shutil

    from evoharness.sandbox import bwrap as bwrap_module

    if render_jail()[0] is None:
        pytest.skip(f"no bubblewrap jail here: {render_jail()[1]}")
    monkeypatch.setattr(bwrap_module, "BwrapSandbox",
                        lambda bwrap: BwrapSandbox(bwrap=bwrap, python_runtime=False))
    monkeypatch.setattr(untrusted_render, "BWRAP", shutil.which("bwrap"))  # checked afresh under this name
    with TemplateRenderer("record {{ n }}", "prompts/system.md") as r:
        assert r.render_one({"n": 1}) == "record 1"
        assert r.jailed is False and "python does not start in the jail" in r.unjailed, r.unjailed
