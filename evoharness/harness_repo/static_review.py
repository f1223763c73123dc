"""A static review of a candidate's middleware and tools for process-level tricks.

Harness code runs inside the rollout's process. Whatever it does through the agent's hooks is
measured; what it does to the *process* (exit handlers, signal handlers, threads that outlive the
call, subprocesses, ``os._exit``, reading ``/proc``, writing outside the scratch directory, patching
evoharness or the interpreter) is how a harness forges results or escapes measurement. ``review_source``
reads a Python file's syntax tree (nothing is run) and lists such uses as ``Finding``s.

Findings do not reject a candidate (a harness may have a reason); they are evidence: ``review``/``show``
print them, and a verified merge of a candidate with findings needs a human's approval
(``evoharness run --review`` then ``evoharness approve``; ``verified_merge(..., human_approved=True)``).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pydantic import BaseModel

if TYPE_CHECKING:
    from evoharness.harness_repo.repo import HarnessRepo

REVIEWED = ("middleware/", "tools/")

_MODULES = {  # importing these is a finding by itself
    "atexit": "exit handlers", "signal": "signal handlers", "subprocess": "subprocesses",
    "multiprocessing": "processes", "threading": "threads", "_thread": "threads", "ctypes": "native calls",
    "socket": "sockets", "pty": "terminals", "gc": "the object graph (reaching other code's objects)",
    "inspect": "frames of other code", "importlib": "dynamic imports", "builtins": "patching builtins",
    "concurrent": "threads or processes", "asyncio": "an event loop that may outlive the call",
    "sched": "scheduled calls", "faulthandler": "signal handlers", "resource": "process limits",
    "mmap": "memory maps", "evoharness": "evoharness internals (scorer, environment, worker)",
    "pkgutil": "package files (an environment's data, its reference solutions)",
    "site": "package locations", "sysconfig": "package locations", "zipimport": "dynamic imports",
    "marshal": "code objects", "pickle": "runs code while loading",
}
# the environments' and scorers' packages: importing one lets harness code rebuild a task's reference
# solution or its grader (the environment runs in the sandbox beside the harness, its package on disk)
_ENV_MODULES = ("agentdojo", "tau2", "tau_bench", "bfcl", "bfcl_eval", "swebench", "appworld", "webarena",
                "evoharness_envs")
for _m in _ENV_MODULES:
    _MODULES[_m] = "an environment's or scorer's package (task data, reference solutions, the grader)"
_CALLS = {  # module.attr (or bare name) called
    "os._exit": "exits the process at once", "os.fork": "forks", "os.forkpty": "forks", "os.kill": "signals",
    "os.killpg": "signals", "os.system": "runs a shell", "os.popen": "runs a shell", "os.setsid": "new session",
    "os.register_at_fork": "fork handlers", "os.unshare": "namespaces", "os.setns": "namespaces",
    "os.chroot": "chroot", "os.dup2": "rewires file descriptors",
    "sys.exit": "exits the process", "sys.settrace": "traces other code", "sys.setprofile": "traces other code",
    "sys.addaudithook": "audit hooks", "sys.setrecursionlimit": "interpreter limits",
    "exec": "runs generated code", "eval": "runs generated code", "compile": "compiles generated code",
    "__import__": "dynamic imports", "setattr": "patches objects (possibly other modules)",
    "globals": "reaches module globals", "vars": "reaches module namespaces",
    "sys._getframe": "frames of other code", "sys.modules.get": "reaches loaded modules",
}
_ATTRS = {  # module.attr read anywhere (not only called)
    "sys.modules": "reaches loaded modules (the environment's, the worker's)",
    "sys.argv": "the worker's request and output files", "sys.path": "package locations",
}
_OS_PREFIXES = ("os.exec", "os.spawn", "os.posix_spawn")
_PATHS = ("/proc", "/sys", "/dev", "/etc", "/root", "/home", "/harness", "/usr", "/var", "/run")


class Finding(BaseModel):
    path: str
    line: int
    what: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what} ({self.why})"


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def review_source(path: str, text: str) -> list[Finding]:
    """Process-level tricks in one Python file (a file that does not parse gives no findings: the edit
    validator refuses it)."""
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out: list[Finding] = []
    aliases: dict[str, str] = {}

    def add(node: ast.AST, what: str, why: str) -> None:
        out.append(Finding(path=path, line=getattr(node, "lineno", 0), what=what, why=why))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                aliases[a.asname or top] = a.name if a.asname else top
                if top in _MODULES:
                    add(node, f"import {a.name}", _MODULES[top])
        elif isinstance(node, ast.ImportFrom) and node.module:
            top = node.module.split(".")[0]
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            if top in _MODULES:
                add(node, f"from {node.module} import {', '.join(a.name for a in node.names)}", _MODULES[top])
            elif top in ("os", "sys"):
                for a in node.names:
                    full = f"{top}.{a.name}"
                    if full in _CALLS or full in _ATTRS or full.startswith(_OS_PREFIXES):
                        why = _CALLS.get(full) or _ATTRS.get(full) or "runs another program"
                        add(node, f"from {top} import {a.name}", why)
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name is None:
                continue
            head, _, rest = name.partition(".")
            full = f"{aliases.get(head, head)}.{rest}" if rest else aliases.get(head, head)
            if full in _CALLS:
                add(node, f"{name}()", _CALLS[full])
            elif full.split(".")[0] in _MODULES and "." in full:
                add(node, f"{name}()", _MODULES[full.split(".")[0]])
            elif full.startswith(_OS_PREFIXES):
                add(node, f"{name}()", "runs another program")
            elif full in ("open", "io.open", "os.open", "pathlib.Path.write_text") and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("/") \
                        and not arg.value.startswith(("/tmp", "/scratch")):
                    add(node, f"{name}({arg.value!r})", "a file outside the scratch directory")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            v = node.value
            if v.startswith(_PATHS) and len(v) < 300:
                add(node, repr(v), "a host path outside the scratch directory")
        elif isinstance(node, ast.Attribute) and node.attr in ("__globals__", "__subclasses__", "__code__",
                                                               "__builtins__", "f_back", "f_globals", "f_locals",
                                                               "tb_frame", "gi_frame", "cr_frame"):
            add(node, f".{node.attr}", "reaches other code's internals")
        elif isinstance(node, ast.Attribute) and node.attr in ("__file__", "__path__", "__spec__", "__loader__"):
            add(node, f".{node.attr}", "package files (an environment's data, its reference solutions)")
        if isinstance(node, ast.Attribute):
            name = _dotted(node)
            head, _, rest = (name or "").partition(".")
            full = f"{aliases.get(head, head)}.{rest}" if rest else ""
            for attr, why in _ATTRS.items():
                if full == attr or full.startswith(attr + "."):
                    add(node, name or attr, why)
    seen: set[tuple[int, str]] = set()
    unique = []
    for f in out:
        if (f.line, f.what) not in seen:
            seen.add((f.line, f.what))
            unique.append(f)
    return unique


def review_files(files: dict[str, str]) -> list[Finding]:
    """Findings in the Python files under ``middleware/`` and ``tools/`` of ``files`` (path -> text)."""
    out: list[Finding] = []
    for path, text in sorted(files.items()):
        if path.startswith(REVIEWED) and path.endswith(".py"):
            out.extend(review_source(path, text))
    return out


def review_change(hr: HarnessRepo, base: str, head: str) -> list[Finding]:
    """Findings in the middleware and tools that ``base..head`` adds or changes."""
    tree = hr.repo.commit(head).tree
    files = {}
    for path in hr.changed_paths(base, head):
        if path.startswith(REVIEWED) and path.endswith(".py"):
            try:
                files[path] = (tree / path).data_stream.read().decode("utf-8", "replace")
            except KeyError:  # deleted
                continue
    return review_files(files)
