"""Which files a coding agent's write action writes, read from its shell command or its editor call.

``F4.first_write`` locates a failed SWE run at the first write *to a file the delivered patch changes*. A command
that only names such a file is no write to it: ``cp pkg/core.py /tmp/x`` copies it away, ``cat pkg/core.py > out``
and ``grep foo pkg/core.py > out`` write ``out``, ``python -c "open('pkg/core.py').read()"`` reads it. A command
writes a file when it targets it: ``sed -i`` / ``perl -i`` on it, a redirection into it (``>``, ``>>``, ``&>``; a
heredoc into it is one), ``tee`` it, ``cp`` / ``mv`` / ``install`` onto it (``mv`` away from it too: the file is
gone), ``rm`` / ``truncate`` it, ``git checkout`` / ``git restore`` it, ``patch FILE``, a diff naming it applied or
saved (``git apply`` / ``patch`` with the diff in a heredoc, or the diff written to a file to apply later), SWE-agent's
``create`` / ``str_replace_editor CMD FILE``, a formatter that rewrites it or its folder (``black``, ``isort``,
``ruff format``; ``autopep8`` / ``yapf`` / ``autoflake`` with ``-i``; not ``--check`` / ``--diff``), an ``ed`` script
that writes (``w``), ``find DIR -name GLOB -exec sed -i ... {}`` (or ``-delete``: the files under DIR matching GLOB),
``dd of=`` it, ``rsync`` / ``ln -sf`` onto it, Python's ``shutil`` copies / moves and ``os.replace`` / ``os.rename``
onto it, and Python that opens it for writing (``open(F, "w")``, ``Path(F).
write_text``, with ``F`` a literal, a name bound to one, or a ``Path`` / ``os.path.join`` of literals) -- run at
once (``python -c``, ``python - <<EOF``) or saved as a script (``cat > fix.py <<EOF``: the edit is written there,
and a later ``python fix.py`` only runs it). Paths are matched whole (``pkg/core.py.bak`` is another file), with
``/testbed/`` and ``./`` dropped and a ``cd DIR`` earlier in the command applied. Where a command writes a file it
does not say (``git apply fix.diff``, ``patch -p1 < fix.diff``, ``python fix.py``, ``git stash``; Python writing a
path it computes), it is taken to write any file it names, as before.

Pure functions of the text; the detector asks only about its write calls (``changes_state``) that name a patched
file's base name, so an ordinary run pays nothing.
"""

from __future__ import annotations

import ast
import fnmatch
import keyword
import posixpath
import re
from dataclasses import dataclass

HEREDOC = re.compile(r"(?<!<)<<(-?)\s*(['\"]?)([A-Za-z_][\w.-]*)\2")
_OPERATOR = frozenset(";&|<>()")
_MODULES = frozenset({"io", "codecs", "builtins", "os"})
DIFF_TARGET = re.compile(r"^(?:diff --git a/\S+ b/(\S+)|\+\+\+ b/(\S+)|\*\*\* (?:Update|Add|Delete) File: (\S+))", re.M)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_NOT_A_CHANGE = frozenset(keyword.kwlist) | {"self", "print", "True", "False", "None"}
_COMMAND_WORDS = frozenset({"cat", "echo", "printf", "tee", "sed", "perl", "edit", "end_of_edit", "EOF", "create",
                            "python", "python3", "testbed", "str_replace_editor", "str_replace", "insert", "command",
                            "path", "file_text", "new_str", "old_str", "insert_line", "git", "apply", "patch"})
_FILE_NAME = re.compile(r"['\"]?[\w.-]+\.[A-Za-z]{1,5}['\"]?")
# what Python code that writes a file holds somewhere (a quoted mode with w / a / x / +, a mode=, write_text,
# fileinput's inplace): code without any is not parsed
_OPEN_WRITE = (r"['\"][rbt]{0,2}[wax+][bt+]{0,2}['\"]\s*[,)]|\bmode\s*=|\.write_(?:text|bytes)\s*\(|"
               r"inplace\s*=\s*(?:True|1)")
_FILE_OP_CALL = r"\b(?:shutil\.(?:copy\w*|move)|os\.(?:replace|rename|symlink)|copyfile|copy2|copytree)\s*\("
PY_WRITE = re.compile(_OPEN_WRITE + "|" + _FILE_OP_CALL)
OPEN_WRITE, FILE_OP_CALL = re.compile(_OPEN_WRITE), re.compile(_FILE_OP_CALL)
# a file put in place of another: shutil's copies and moves, os.replace / os.rename / os.symlink (onto their second
# argument; a move or rename takes the first away too); only under these modules' names, or imported by name
_FILE_OPS = {"shutil": {"copy": False, "copy2": False, "copyfile": False, "copytree": False, "move": True},
             "os": {"replace": True, "rename": True, "symlink": False}}
_BY_NAME = frozenset({"copy2", "copyfile", "copytree"})
_LITERAL_OPEN = re.compile(r"\bopen\s*\(\s*(['\"])([^'\"\n]+)\1\s*,\s*(?:mode\s*=\s*)?(['\"])([^'\"\n]*)\3")


@dataclass(frozen=True)
class Writes:
    """What one command writes: ``files`` (as written, before matching) with the text of each write (``edits``:
    the segment, heredoc body or Python code that writes it), and ``unknown``: it may write files it does not say
    (then any file it names counts)."""

    files: tuple[str, ...] = ()
    edits: tuple[str, ...] = ()
    unknown: bool = False
    trees: tuple[str, ...] = ()  # ``DIR`` + TREE_SEP + a base-name glob: any file under DIR matching it may be written

    def writes(self, path: str, command: str = "") -> bool:
        """Does the command write the repository file ``path``: a file it targets, a file under a tree it rewrites
        (``find DIR -name GLOB -exec sed -i``, ``black DIR``), or, where it writes files it does not say, one it
        names (``command``)."""
        return any(same_file(f, path) for f in self.files) or any(in_tree(t, path) for t in self.trees) or (
            self.unknown and bool(command) and path in command)


def normal(path: str, cwd: str = "") -> str:
    """``path`` as a repository path: quotes and ``/testbed/`` / ``./`` dropped, resolved against ``cwd``."""
    p = path.strip("\"'")
    if cwd and not p.startswith("/"):
        p = posixpath.join(cwd, p)
    p = posixpath.normpath(p) if p else p
    for root in ("/testbed/", "/repo/", "/workspace/"):
        if p.startswith(root):
            p = p[len(root):]
    return p.removeprefix("./")


TREE_SEP = "\x00"


def in_tree(tree: str, path: str) -> bool:
    """Is repository file ``path`` under ``tree`` (``DIR`` + ``TREE_SEP`` + a base-name glob, as ``Writes.trees``)."""
    root, _, glob = tree.partition(TREE_SEP)
    path = normal(path)
    under = root in ("", ".") or path.startswith(root.rstrip("/") + "/") or ("/" + path).startswith(
        root.rstrip("/") + "/")  # an absolute root outside the repository's own prefix never matches
    return under and fnmatch.fnmatchcase(posixpath.basename(path), glob or "*")


def same_file(written: str, path: str) -> bool:
    """Does a written path (``normal``) name the repository path ``path``: equal, or an absolute path ending in it."""
    path = normal(path)
    return written == path or written.endswith("/" + path)


def shell_writes(command: str, names: tuple[str, ...] = ()) -> Writes:
    """What a shell command writes (see the module docstring). With ``names`` (file base names), a heredoc or
    ``python -c`` code is read as Python or a diff only where it holds one of them: the caller asks about those
    files only (a write of one names it), and parsing a long script costs milliseconds."""
    bodies: dict[int, list[str]] = {}  # line index of the ``<<`` -> its heredocs' bodies
    lines = command.replace("\\\n", " ").split("\n")
    kept: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        kept.append(line)
        i += 1
        for m in HEREDOC.finditer(line):
            end, body = m.group(3), []
            while i < len(lines) and (lines[i].strip() if m.group(1) else lines[i]) != end:
                body.append(lines[i])
                i += 1
            i += 1  # the terminator
            bodies.setdefault(len(kept) - 1, []).append("\n".join(body))
    files: list[str] = []
    edits: list[str] = []
    trees: list[str] = []
    unknown = False
    cwd = ""
    for n, line in enumerate(kept):
        line_bodies = bodies.get(n, [])
        for words, redirects in _segments(line):
            if words and words[0] == "cd" and len(words) > 1:
                if len(cwd) + len(words[1]) < 1000:  # a hostile chain of cds cannot make each join longer
                    cwd = normal(words[1], cwd)
                continue
            seg_text = " ".join(words + [w for r in redirects for w in r])
            redirected = seg_text + "\n" + "\n".join(line_bodies) if redirects else ""  # one string for all
            for op, target in redirects:
                if op != ">&" or not target.isdigit():
                    files.append(normal(target, cwd))
                    edits.append(redirected)
            # an ed script may come from a pipe or a here-string on the line: the line is read for its ``w``
            ed = bool(words) and posixpath.basename(words[0]) in ("ed", "ex")
            got, unsure = _program_writes(words, line_bodies + [line] if ed else line_bodies, names)
            unknown |= unsure
            for f, text in got:
                if TREE_SEP in f:
                    root, _, glob = f.partition(TREE_SEP)
                    trees.append(normal(root, cwd) + TREE_SEP + glob)
                    continue
                files.append(normal(f, cwd))
                edits.append(text or seg_text)
    return Writes(tuple(files), tuple(edits), unknown, tuple(trees))


def _segments(line: str) -> list[tuple[list[str], list[tuple[str, str]]]]:
    """A command line as simple commands: each its words and its output redirections ``(op, target)``."""
    # the shell's words (quoted parts kept whole, then unquoted) and operators, as shlex would split them but by one
    # regex (shlex reads a character at a time: ~20x slower); an unclosed quote is read as an ordinary character
    tokens = [_unquote(w) if w[0] not in _OPERATOR else w for w in _TOKEN.findall(line)]
    out: list[tuple[list[str], list[tuple[str, str]]]] = []
    words: list[str] = []
    redirects: list[tuple[str, str]] = []
    k = 0
    while k < len(tokens):
        tok = tokens[k]
        if not tok or not set(tok) <= _OPERATOR:
            words.append(tok)
        elif ">" in tok:  # an output redirection: its file is written
            if k + 1 < len(tokens):
                redirects.append((tok, tokens[k + 1]))
            k += 1
        elif tok.startswith("<"):  # an input redirection, a heredoc or a here-string: its word is read
            k += 1
        else:  # ; & && | || ( ): the next simple command
            if words or redirects:
                out.append((words, redirects))
            words, redirects = [], []
        k += 1
    if words or redirects:
        out.append((words, redirects))
    # ``2>`` / ``1>``: the fd number lexes as a word before the operator
    for words, redirects in out:
        if redirects and words and words[-1] in ("1", "2"):
            words.pop()
    return out


_TOKEN = re.compile(r"""(?:[^\s'"\\;&|<>()]|\\.|'[^']*'|"(?:[^"\\]|\\.)*"|['"])+|[;&|<>()]+""")
_QUOTED = re.compile(r"""'([^']*)'|"((?:[^"\\]|\\.)*)"|\\(.)""")


def _unquote(word: str) -> str:
    if "'" not in word and '"' not in word and "\\" not in word:
        return word
    return _QUOTED.sub(lambda m: m.group(1) if m.group(1) is not None else
                       re.sub(r"\\([\\\"$`])", r"\1", m.group(2)) if m.group(2) is not None else m.group(3), word)


# an rsync remote spec (host:path, user@host:path): not a file here. Two alternatives, not ``\w+@?[\w.-]*``, whose two
# overlapping runs made an argument of word characters with no colon quadratic (160,000 characters: 42 s)
_REMOTE = re.compile(r"\w[\w.-]*:.*|\w+@[\w.-]*:.*")


def _program_writes(words: list[str], bodies: list[str],
                    names: tuple[str, ...] = ()) -> tuple[list[tuple[str, str]], bool]:
    """Files a simple command's program writes by its arguments (redirections aside): ``[(file, edit text)]`` and
    whether it may write others it does not say."""
    while words and (words[0] in ("sudo", "env", "command", "exec") or re.match(r"^\w+=", words[0])):
        words = words[1:]
    if not words:
        return [], False
    prog = posixpath.basename(words[0])
    args = [w for w in words[1:] if not w.startswith("-")]
    text = " ".join(words)
    if prog in ("sed", "perl"):
        if any(re.fullmatch(r"-[a-zA-Z]*i.*|--in-place.*", w) and not w.startswith(("-I", "-M")) for w in words[1:]):
            return [(a, text) for a in args], False
        return [], False
    if prog == "tee":
        full = text + "\n" + "\n".join(bodies)
        return [(a, full) for a in args], False
    if prog in ("cp", "mv", "install"):
        if len(args) < 2:
            return [], False
        dest = args[-1]
        onto = [(posixpath.join(dest, posixpath.basename(s)), text) for s in args[:-1]] if dest.endswith(
            ("/", ".")) else [(dest, text)]
        return onto + ([(s, text) for s in args[:-1]] if prog == "mv" else []), False
    if prog in ("rm", "truncate"):
        return [(a, text) for a in args], False
    if prog == "find":
        return _find_writes(words, bodies, names)
    if prog in FORMATTERS or re.fullmatch(r"python[\d.]*", prog) and len(words) > 2 and words[1] == "-m" \
            and words[2] in FORMATTERS:
        return _formatter_writes(words[2:] if prog not in FORMATTERS else words), False
    if prog in ("ed", "ex") and args:  # an ed script (a heredoc, a pipe) writes its file with ``w``
        script = text + "\n" + "\n".join(bodies)
        return ([(args[0], text)] if ED_WRITE.search(script) else []), False
    if prog == "dd":
        return [(w[3:], text) for w in words[1:] if w.startswith("of=") and len(w) > 3], False
    if prog in ("rsync", "ln"):  # onto DEST (a folder: the source's base name in it), as cp
        args = [a for a in args if not _REMOTE.fullmatch(a)] if prog == "rsync" else args
        if len(args) < 2:
            return [], False
        dest = args[-1]
        return ([(posixpath.join(dest, posixpath.basename(a)), text) for a in args[:-1]] if dest.endswith(("/", "."))
                else [(dest, text)]), False
    if prog == "git" and len(words) > 1:
        sub = words[1]
        if sub in ("checkout", "restore"):
            return [(a, text) for a in args[1:]], False
        if sub in ("apply", "am"):
            return _diff_writes(bodies), not any(DIFF_TARGET.search(b) for b in bodies)
        return [], sub in ("stash", "reset", "merge", "rebase", "pull", "cherry-pick", "revert")
    if prog == "patch":
        full = text + "\n" + "\n".join(bodies)
        named = [(a, full) for a in args if not re.fullmatch(r"\d+", a)]
        return (named or _diff_writes(bodies)), not named and not any(DIFF_TARGET.search(b) for b in bodies)
    if prog == "create" and args:  # SWE-agent's classic ``create FILE``
        return [(args[0], text)], False
    if prog == "str_replace_editor" and len(args) > 1 and args[0] != "view":
        return [(args[1], text)], False
    if prog in ("apply_patch",):
        return _diff_writes(bodies or [text]), False
    out: list[tuple[str, str]] = []
    unknown = False
    codes = list(bodies)
    if re.fullmatch(r"python[\d.]*", prog) and "-c" in words:
        k = words.index("-c")
        if k + 1 < len(words):
            codes.append(words[k + 1])
    elif re.fullmatch(r"python[\d.]*", prog) and args and not bodies:
        unknown = True  # ``python fix.py``: the script says what it writes (where it was written, if here)
    for code in codes:
        if names and not any(n in code for n in names):
            continue
        files, unsure = python_writes(code)
        out += [(f, code) for f in files]
        unknown |= unsure
        out += _diff_writes([code])  # a diff saved to be applied later
    return out, unknown


# code formatters that rewrite the files (or the folders' files) they are given, unless told only to report
FORMATTERS = frozenset({"black", "autopep8", "yapf", "isort", "autoflake", "ruff"})
_REPORT_ONLY = frozenset({"--check", "--diff", "-d", "--check-only", "--print", "-c", "--code"})
ED_WRITE = re.compile(r"(?:^|[\s'\"]|\\n),?w[q]?(?:\s+\S+)?(?:$|[\s'\"]|\\n)", re.M)
# find's tests that name the files it acts on, and the actions that run a program on them
_FIND_NAME = ("-name", "-iname")
_FIND_EXEC = ("-exec", "-execdir", "-ok", "-okdir")


def _formatter_writes(words: list[str]) -> list[tuple[str, str]]:
    """Files a formatter rewrites: each argument (a folder: every Python file under it); none when it only reports
    (``--check``, ``--diff``), when ``autopep8`` / ``yapf`` / ``autoflake`` lack ``-i`` / ``--in-place`` (they
    print), or ``ruff`` is not ``ruff format`` / ``ruff check --fix``."""
    prog, opts = posixpath.basename(words[0]), words[1:]
    text = " ".join(words)
    if any(o in _REPORT_ONLY for o in opts):
        return []
    if prog in ("autopep8", "yapf", "autoflake") and not any(
            o == "--in-place" or re.fullmatch(r"-[a-zA-Z]*i[a-zA-Z]*", o) for o in opts):
        return []
    if prog == "ruff":
        if not opts or opts[0] not in ("format", "check") or opts[0] == "check" and "--fix" not in opts:
            return []
        opts = opts[1:]
    paths = [o for o in opts if not o.startswith("-")]
    return [(p, text) if re.search(r"\.pyi?$", p) else (p + TREE_SEP + "*.py*", text) for p in paths]


def _find_writes(words: list[str], bodies: list[str], names: tuple[str, ...]) -> tuple[list[tuple[str, str]], bool]:
    """``find DIR... [-name GLOB] -exec PROG ARGS {} ;`` (or ``-delete``): the files under each DIR that match the
    globs, when PROG writes the file it is given (``{}``)."""
    text = " ".join(words)
    roots: list[str] = []
    k = 1
    while k < len(words) and not words[k].startswith(("-", "(", "!")):
        roots.append(words[k])
        k += 1
    globs = [words[j + 1] for j in range(k, len(words) - 1) if words[j] in _FIND_NAME][:16]
    writes = "-delete" in words[k:]
    execs = [j for j in range(k, len(words)) if words[j] in _FIND_EXEC][:8]  # a hostile chain of them: bounded
    for j, nxt in zip(execs, [*execs[1:], len(words)][:len(execs)], strict=True):
        end = next((e for e in range(j + 1, nxt) if words[e] in (";", "+", "\\;")), nxt)
        cmd = [w if w != "{}" else "\x01" for w in words[j + 1:end]]  # the file find gives it
        got, _ = _program_writes(cmd, bodies, names)
        writes |= any("\x01" in f for f, _ in got)
    if not writes:
        return [], False
    return [(r + TREE_SEP + g, text) for r in roots or ["."] for g in globs or ["*"]], False


def _diff_writes(bodies: list[str]) -> list[tuple[str, str]]:
    return [(next(g for g in m.groups() if g), body) for body in bodies for m in DIFF_TARGET.finditer(body)]


def python_writes(code: str) -> tuple[list[str], bool]:
    """Files Python code opens for writing, and whether it writes one whose path it computes (then unknown)."""
    if not PY_WRITE.search(code):
        return [], False
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        lits = [m.group(2) for m in _LITERAL_OPEN.finditer(code) if set(m.group(4)) & set("wax+")]
        # code that does not parse: its literal ``open(F, "w")`` paths; unknown if it writes any other way
        return lits, len(lits) < len(OPEN_WRITE.findall(code)) or FILE_OP_CALL.search(code) is not None
    names: dict[str, list[ast.expr]] = {}
    calls: list[ast.Call] = []
    for node in ast.walk(tree):  # one walk: the names' bindings, and the calls to read once they are known
        if isinstance(node, ast.Call):
            calls.append(node)
        elif isinstance(node, ast.Assign):
            for tgt in node.targets:
                if isinstance(tgt, ast.Name):
                    names.setdefault(tgt.id, []).append(node.value)
        elif isinstance(node, ast.For) and isinstance(node.target, ast.Name) and \
                isinstance(node.iter, ast.List | ast.Tuple):
            names.setdefault(node.target.id, []).extend(node.iter.elts)
    files: list[str] = []
    unknown = False
    for node in calls:
        target: ast.expr | None = None
        f = node.func
        if isinstance(f, ast.Name | ast.Attribute) and getattr(f, "id", getattr(f, "attr", "")) == "open":
            # open(F, MODE), io.open(F, MODE); a path object's F.open(MODE)
            method = isinstance(f, ast.Attribute) and not (isinstance(f.value, ast.Name) and f.value.id in _MODULES)
            given = node.args if method else node.args[1:]
            mode = given[0] if given else next((k.value for k in node.keywords if k.arg == "mode"), None)
            if isinstance(mode, ast.Constant) and isinstance(mode.value, str) and set(mode.value) & set("wax+"):
                target = f.value if method else node.args[0] if node.args else None
            elif mode is not None and not isinstance(mode, ast.Constant):
                unknown = True
        elif isinstance(f, ast.Attribute) and f.attr in ("write_text", "write_bytes"):
            target = f.value
        elif any(k.arg == "inplace" for k in node.keywords) and node.args:  # fileinput.input(F, inplace=True)
            target = node.args[0]
        else:
            moved = _file_op(node)
            if moved is not None:
                for e in moved:
                    paths = _resolve(e, names, [200])
                    files += paths
                    unknown |= not paths
                continue
        if target is None:
            continue
        paths = _resolve(target, names, [200])
        if paths:
            files += paths
        else:
            unknown = True
    return files, unknown


def _file_op(node: ast.Call) -> list[ast.expr] | None:
    """The paths a ``shutil`` / ``os`` file operation writes (its destination; a move's source too), None for other
    calls. A destination folder (a literal ending in ``/``) is written as the source's base name in it."""
    f = node.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in _FILE_OPS:
        takes_source = _FILE_OPS[f.value.id].get(f.attr)
    elif isinstance(f, ast.Name) and f.id in _BY_NAME:
        takes_source = False
    else:
        return None
    if takes_source is None:
        return None
    args = list(node.args[:2]) + [k.value for k in node.keywords if k.arg in ("src", "dst")]
    if len(args) < 2:
        return None
    src, dst = args[0], args[1]
    if isinstance(dst, ast.Constant) and isinstance(dst.value, str) and dst.value.endswith("/") \
            and isinstance(src, ast.Constant) and isinstance(src.value, str):
        dst = ast.Constant(posixpath.join(dst.value, posixpath.basename(src.value)))
    return [dst, src] if takes_source else [dst]


def _resolve(e: ast.expr, names: dict[str, list[ast.expr]], budget: list[int]) -> list[str]:
    """The literal paths an expression may be ([] when it is computed); at most ``budget[0]`` sub-expressions are
    looked at (names bound to each other must not make it exponential)."""
    budget[0] -= 1
    if budget[0] < 0:
        return []
    if isinstance(e, ast.Constant) and isinstance(e.value, str):
        return [e.value]
    if isinstance(e, ast.Name):
        return [p for v in names.get(e.id, ())[:8] for p in _resolve(v, names, budget)]
    if isinstance(e, ast.List | ast.Tuple):
        return [p for v in e.elts[:16] for p in _resolve(v, names, budget)]
    if isinstance(e, ast.Call):
        f = e.func
        fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if fname in ("Path", "PurePath", "PosixPath", "join") and e.args:
            parts = [_resolve(a, names, budget) for a in e.args]
            if all(len(p) == 1 for p in parts):
                return [posixpath.join(*(p[0] for p in parts))]
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Div):
        left, right = _resolve(e.left, names, budget), _resolve(e.right, names, budget)
        if len(left) == 1 and len(right) == 1:
            return [posixpath.join(left[0], right[0])]
    return []


# sed's s/OLD/NEW/ (any of five delimiters; an escaped character or any other but the delimiter and a backslash),
# Python's .replace('OLD', 'NEW') on one line, an editor's old_str / new_str (as _edit_text writes them)
_SED_PART = r"((?:\\.|(?!\1)[^\\\n]){0,2000})"
SED_SUBSTITUTION = re.compile(r"(?<![A-Za-z])s([/|#,@])" + _SED_PART + r"\1" + _SED_PART + r"\1")
_PY_STR = r"r?['\"]{1,3}([^'\"\n]{0,2000})['\"]{1,3}"
PY_REPLACE = re.compile(r"\.replace\(\s*" + _PY_STR + r"\s*,\s*" + _PY_STR + r"\s*[,)]")
OLD_NEW = re.compile(r'"old_str":"((?:\\.|[^"\\]){0,20000})","new_str":"((?:\\.|[^"\\]){0,20000})"')


def change_words(edit: str) -> frozenset[str]:
    """The words an edit adds: those of its new text its old text lacks, where it says both (``sed``'s
    ``s/OLD/NEW/``, ``.replace(OLD, NEW)``, an editor's ``old_str`` / ``new_str``), else the words of its whole text
    (a heredoc, an ``edit N:M`` block); Python keywords and ``self`` left out."""
    edit = edit[:20_000]  # the patterns below are linear in it (no two ways to match a character)
    old_new = [(a, b) for _, a, b in SED_SUBSTITUTION.findall(edit)]
    old_new += PY_REPLACE.findall(edit)
    old_new += OLD_NEW.findall(edit)
    if old_new:
        added: set[str] = set()
        for old, new in old_new:
            added |= set(_WORD.findall(new)) - set(_WORD.findall(old))
        return frozenset(added - _NOT_A_CHANGE)
    # the whole text less what says how and where it is written: the command's words, paths and file names, options
    kept = [tok for tok in edit.split() if "/" not in tok and not tok.startswith("-") and not _FILE_NAME.fullmatch(tok)]
    return frozenset(set(_WORD.findall(" ".join(kept))) - _NOT_A_CHANGE - _COMMAND_WORDS)


def same_change(a: frozenset[str], b: frozenset[str]) -> bool:
    """Two edits make the same change: the words they add are the same, or share at least half of the smaller set
    (a re-sent edit, its address or form corrected); two edits that add nothing (deletions) count as the same."""
    if not a and not b:
        return True
    return bool(a & b) and 2 * len(a & b) >= min(len(a), len(b))
