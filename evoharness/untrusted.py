"""Limits for reading untrusted input: one place for importers, edit validators and host-side renderers.

Traces come from users, production and the agent itself; harness files come from the engineer role,
which an adversary can steer. Everything that reads them on the host goes through these helpers:

- ``read_limited(path, max_bytes)``: a regular file only (a FIFO would hang, ``/dev/zero`` never ends),
  at most ``max_bytes``; ``InputError`` otherwise.
- ``nesting_depth(text, limit)``: the deepest bracket nesting (``[{(``) in linear time, stopping past
  ``limit``; ``check_nesting`` raises ``InputError`` past it. Parsers recurse per level (json, YAML,
  TOML, Python's compiler, Jinja), so the depth is checked before they run.
- ``loads_json(text)``: ``json.loads`` behind the depth check, with every way it can fail (bad JSON,
  a >4,300-digit integer, recursion, memory) turned into one ``InputError`` line.
- ``template_environment()``: a Jinja2 ``ImmutableSandboxedEnvironment`` (no dunder or private
  attributes, no mutation of passed-in objects, no imports) whose ``range``, repetition and power are
  bounded and whose values (operators, ``~``, filters, calls) are held to ``MAX_RENDER_CHARS`` items;
  ``check_template`` rejects loops nested deeper than ``MAX_LOOP_NESTING``. On the host, harness
  templates (``dataset export --render-under``, ``render_template``) are compiled and rendered with it
  only inside the limited child process of ``untrusted_render``; harness code is never imported there.

Importers (``traces/importers/``) call ``read_limited`` and ``loads_json``; new importers should too.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from evoharness.errors import NOT_A_REGULAR_FILE, InputError

MAX_DEPTH = 100
MAX_READ_BYTES = 512 * 1024 * 1024
MAX_RANGE = 10_000
MAX_REPEAT_CHARS = 1_000_000
MAX_LOOP_NESTING = 3
MAX_RENDER_CHARS = 2_000_000

_OPEN = {ord("["), ord("{"), ord("(")}
_CLOSE = {ord("]"), ord("}"), ord(")")}



_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def control_character(text: str) -> str | None:
    """The first control character in ``text`` (newline, NUL, an escape ...), Unicode line or paragraph break
    (U+2028, U+2029: lines to ``str.splitlines`` and to a Markdown or HTML reader) or bidirectional embedding,
    override or isolate (U+202A-U+202E, U+2066-U+2069: they reorder how the text after them is shown) as Python
    writes it; None when there is none. A review reason is one line of text: one with these broke `review`'s
    lines and report.md, or showed a reason other than the one stored. Right-to-left text itself, and other
    format characters (an emoji's zero-width joiner), are text."""
    import unicodedata

    found = next((ch for ch in text if ch in _BIDI_CONTROLS or unicodedata.category(ch) in ("Cc", "Zl", "Zp")),
                 None)
    if found is None:
        return None
    return f"{found!r}, a bidirectional text control" if found in _BIDI_CONTROLS else repr(found)


def read_capped(fd: int, max_bytes: int) -> bytes:
    """At most ``max_bytes + 1`` bytes of an open file: a result longer than ``max_bytes`` means the file
    is (or grew) over the cap, however its size was reported."""
    chunks, left = [], max_bytes + 1
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)

def read_limited(path: Path | str, max_bytes: int = MAX_READ_BYTES, *, what: str = "file") -> bytes:
    """The bytes of ``path``: a regular file (symlinks to one are fine) of at most ``max_bytes``."""
    p = str(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(p, f"no such {what}") from None
    except IsADirectoryError:
        raise InputError(p, f"is a directory, not a {what}") from None
    except OSError as e:
        raise InputError(p, f"cannot open: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InputError(p, f"is a directory, not a {what}")
        if not stat.S_ISREG(st.st_mode):
            raise InputError(p, f"{NOT_A_REGULAR_FILE}; expected a {what}")
        if st.st_size > max_bytes:
            raise InputError(p, f"{what} is {st.st_size} bytes, over the {max_bytes}-byte limit")
        data = read_capped(fd, max_bytes)
        if len(data) > max_bytes:
            raise InputError(p, f"{what} is over the {max_bytes}-byte limit")
        return data
    except OSError as e:
        raise InputError(p, f"cannot read: {e.strerror}") from None
    finally:
        os.close(fd)


def nesting_depth(text: str | bytes, limit: int = MAX_DEPTH) -> int:
    """The deepest nesting of ``[{(`` in ``text`` (quotes are not skipped: an over-estimate), at most
    ``limit + 1`` (the scan stops there). Linear time."""
    data = text.encode("utf-8", "replace") if isinstance(text, str) else text
    depth = deepest = 0
    for b in data:
        if b in _OPEN:
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif b in _CLOSE and depth:
            depth -= 1
    return deepest


def check_nesting(text: str | bytes, where: str, limit: int = MAX_DEPTH) -> None:
    """``InputError`` when ``text`` nests brackets deeper than ``limit``."""
    if nesting_depth(text, limit) > limit:
        raise InputError(where, f"nested deeper than {limit} levels (refused before parsing)")


def loads_json(text: str | bytes, where: str, limit: int = MAX_DEPTH) -> Any:
    """``json.loads`` of untrusted text; any failure is one ``InputError`` line."""
    check_nesting(text, where, limit)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(where, f"invalid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    except UnicodeDecodeError as e:
        raise InputError(where, f"not UTF-8 text: {e.reason} at byte {e.start}") from None
    except (ValueError, RecursionError, MemoryError) as e:  # e.g. an integer over 4,300 digits
        first = (str(e).splitlines() or [type(e).__name__])[0].split("; use sys.set_int_max_str_digits")[0]
        raise InputError(where, f"unreadable JSON: {first[:200]}") from None


# ---- Jinja on the host --------------------------------------------------------------------------

def _too_big(value: Any) -> bool:
    return isinstance(value, str | list | tuple | bytes) and len(value) > MAX_RENDER_CHARS


def _refuse_big(value: Any, what: str) -> Any:
    from jinja2.sandbox import SecurityError

    if _too_big(value):
        raise SecurityError(f"{what} made a value over {MAX_RENDER_CHARS} items in a harness template")
    return value


def _width(n: Any, what: str, times: int = 1) -> None:
    from jinja2.sandbox import SecurityError

    if isinstance(n, int) and n * max(times, 1) > MAX_RENDER_CHARS:
        raise SecurityError(f"{what} over {MAX_RENDER_CHARS} items in a harness template")


def _lines(value: Any) -> int:
    return value.count("\n") + 1 if isinstance(value, str) else 1


# Checks made before a filter runs, on the arguments that set the size of what it makes (the value it is
# given is already bounded): without them the filter would allocate first and be refused after.
_FILTER_SIZES: dict[str, Any] = {
    "center": lambda v, width=80, *a, **k: _width(width, "center width"),
    "indent": lambda v, width=4, *a, **k: _width(width if isinstance(width, int) else len(str(width)),
                                                 "indent width times lines", _lines(v)),
    "batch": lambda v, linecount, *a, **k: _width(linecount, "batch size"),
    "slice": lambda v, slices, *a, **k: _width(slices, "slice count"),
    "replace": lambda v, old, new, *a, **k: _width(
        len(str(v)) + str(v).count(str(old)) * (len(str(new)) - len(str(old))), "replace result")
    if len(str(new)) > len(str(old)) else None,
}


def _bounded_filter(name: str, func: Any) -> Any:
    """``func`` with its result (and, for the filters above, its size arguments) held to
    ``MAX_RENDER_CHARS``; keeps the filter's ``pass_*`` marker (it is in ``__dict__``)."""
    import functools

    before = _FILTER_SIZES.get(name)
    skip = 0 if getattr(func, "jinja_pass_arg", None) is None else 1  # a context/environment comes first

    @functools.wraps(func)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        if before is not None and len(args) > skip:
            before(*args[skip:], **kwargs)
        return _refuse_big(func(*args, **kwargs), f"the {name} filter")

    return bounded


def template_environment(**kw: Any) -> Any:
    """A sandboxed, bounded Jinja2 environment for harness templates rendered outside a sandbox.

    Every value a template makes with an operator (``+ * ** %``), a concatenation (``~``), a filter or a
    method call is held to ``MAX_RENDER_CHARS`` items; the filters that take a size (``center``,
    ``indent``, ``batch``, ``slice``, ``replace``) are checked before they allocate; ``range`` is bounded.
    Values are checked after they are made, so the allocation of one that is refused still happens:
    on the host, such templates render only in the limited child of ``untrusted_render``."""
    from jinja2 import StrictUndefined
    from jinja2.compiler import CodeGenerator
    from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

    class _Generator(CodeGenerator):
        def visit_Concat(self, node: Any, frame: Any) -> None:  # ``~``: joined by the bounded join below
            self.write("environment.bounded_join((")
            for arg in node.nodes:
                self.visit(arg, frame)
                self.write(", ")
            self.write("))")

    class _Bounded(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**", "+", "%"})
        code_generator_class = _Generator

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            if operator == "**" and isinstance(right, int | float) and abs(right) > 64:
                raise SecurityError("power with an exponent over 64 is not allowed in a harness template")
            if operator == "*":
                n, seq = (right, left) if isinstance(right, int) else (left, right)
                if isinstance(n, int) and isinstance(seq, str | list | tuple) and len(seq) * n > MAX_REPEAT_CHARS:
                    raise SecurityError(f"repetition over {MAX_REPEAT_CHARS} items in a harness template")
            result = super().call_binop(context, operator, left, right)
            if _too_big(result):
                raise SecurityError(f"a value over {MAX_RENDER_CHARS} items in a harness template")
            return result

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
            return _refuse_big(super().call(__context, __obj, *args, **kwargs), "a call")

        def bounded_join(self, parts: tuple) -> str:
            out = "".join(map(str, parts))
            return _refuse_big(out, "`~`")

    env = _Bounded(undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False, **kw)
    env.filters = {name: _bounded_filter(name, f) for name, f in env.filters.items()}

    def bounded_range(*args: int) -> range:
        r = range(*args)
        if len(r) > MAX_RANGE:
            raise SecurityError(f"range over {MAX_RANGE} items in a harness template")
        return r

    env.globals["range"] = bounded_range
    return env


def check_template(text: str, where: str) -> Any:
    """Parse a harness template (bounded nesting, loops nested at most ``MAX_LOOP_NESTING`` deep);
    the parsed template, or ``InputError``."""
    from jinja2 import TemplateSyntaxError, nodes

    check_nesting(text, where)
    env = template_environment()
    try:
        ast = env.parse(text)
    except TemplateSyntaxError as e:
        raise InputError(where, f"template does not parse: {e.message} (line {e.lineno})") from None
    except (RecursionError, MemoryError):
        raise InputError(where, "template nested too deeply to parse") from None

    def loops(node: Any, depth: int) -> int:
        here = depth + isinstance(node, nodes.For)
        return max([here, *(loops(child, here) for child in node.iter_child_nodes())])

    try:
        deepest = loops(ast, 0)
    except RecursionError:
        raise InputError(where, "template nested too deeply to check") from None
    if deepest > MAX_LOOP_NESTING:
        raise InputError(where, f"template nests loops {deepest} deep (at most {MAX_LOOP_NESTING})")
    return ast


def render_template(text: str, where: str, **variables: Any) -> str:
    """Render a harness template once, in the bounded sandbox inside the limited render process
    (``untrusted_render``: memory, CPU and wall limits; compiled there too); ``InputError`` on any
    failure, escape attempt or limit hit."""
    from evoharness.untrusted_render import RenderFailed, TemplateRenderer

    with TemplateRenderer(text, where) as renderer:
        try:
            return renderer.render_one(variables)
        except RenderFailed as e:
            raise InputError(where, e.reason) from None


def some_keys(obj: dict) -> str:
    """An untrusted object's first keys, for an error that says what it got instead: at most 6, each cut to 30
    characters ("none" for an empty object)."""
    keys = [str(k)[:30] for k in list(obj)[:6]]
    return (", ".join(keys) + (", ..." if len(obj) > 6 else "")) if keys else "none"
