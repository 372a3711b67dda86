"""The RestrictedPython policy layer for user graders: compile with helpful errors, and the
globals a grader runs with (safe builtins, guarded imports and attribute access).

This is a policy layer only; the OS isolation around the process is the security boundary.
"""

from __future__ import annotations

import ast
import builtins
import operator
import re
import types

from RestrictedPython import compile_restricted_exec, limited_builtins, safe_builtins, utility_builtins
from RestrictedPython.Guards import full_write_guard, guarded_iter_unpack_sequence, guarded_unpack_sequence, safer_getattr
from RestrictedPython.PrintCollector import PrintCollector

from .callio import end_with_grader_error

MAX_SOURCE_BYTES = 256 * 1024

ALLOWED_IMPORTS = frozenset({
    "math", "cmath", "re", "json", "sympy", "math_verify", "latex2sympy2_extended", "fractions", "decimal",
    "statistics", "collections", "itertools", "functools", "string", "difflib", "unicodedata", "numpy",
    "operator", "heapq", "bisect", "random", "textwrap", "datetime", "typing", "dataclasses", "enum",
    "copy", "mpmath", "ast",
})
# Forking cost grows with the zygote's memory (sympy+numpy roughly triple it), so graders that import
# none of HEAVY run in a light zygote and the others in one with HEAVY pre-imported.
HEAVY = frozenset({"sympy", "math_verify", "latex2sympy2_extended", "numpy", "mpmath", "agentrl"})
LIGHT_PREIMPORT = ("json", "re", "math", "cmath", "fractions", "decimal", "statistics", "collections", "itertools",
                   "functools", "string", "difflib", "unicodedata", "heapq", "bisect", "textwrap", "random",
                   "datetime", "operator", "copy", "typing", "dataclasses", "enum", "ast")
HEAVY_PREIMPORT = ("sympy", "math_verify", "numpy", "agentrl.rewards", "agentrl.rewards.mathcheck",
                   "agentrl.rewards.codecheck", "agentrl.rewards.toolcheck", "agentrl.rewards.judge")


def imported_modules(source: str) -> set[str]:
    """Top-level names a grader imports (RestrictedPython forbids __import__, so this is exact)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names

# What to write instead, keyed by a regex over RestrictedPython's message.
_ADVICE = [
    (r'"(\w+)" is an invalid (variable|attribute) name because it starts with "_"',
     "names starting with '_' are reserved by the sandbox; rename it (e.g. '{0}' -> '{1}')"),
    (r"Match statement", "`match` is not supported; write if/elif/else with == or isinstance()"),
    (r"Nonlocal statements", "`nonlocal` is not supported; keep the state in a dict or list, e.g. state['n'] += 1"),
    (r"Async\w* statements|Await statements", "async code is not supported; write a plain (synchronous) function"),
    (r"TryStar statements", "`except*` is not supported; use a plain `except SomeError:`"),
    (r"Augmented assignment of attributes", "write `obj.x = obj.x + 1` instead of `obj.x += 1`"),
    (r"Exec calls|Eval calls", "exec()/eval() are not available; parse text with json.loads, ast.literal_eval or sympy"),
    (r'"\*" imports', "import the names you need explicitly: `from math import sqrt, pi`"),
    (r"Lazy import", "use a plain `import` at the top of the file"),
    (r"metaclass", "metaclasses are not supported; use a plain class"),
    (r"Unpacking in comprehensions", "build the list with a loop, or use itertools.chain"),
    (r"format", "use f-strings or % formatting instead of str.format"),
]


class GraderSourceError(Exception):
    """The grader source cannot run: the message says where, what, and what to write instead."""


def _advise(message: str) -> str:
    for pattern, advice in _ADVICE:
        m = re.search(pattern, message)
        if m:
            if "{0}" in advice:
                name = m.group(1)
                return advice.format(name, name.lstrip("_") or "value")
            return advice
    return "rewrite this construct in plain Python without it"


class _Desugar(ast.NodeTransformer):
    """Rewrite ordinary Python that RestrictedPython rejects but that is safe to support."""

    def visit_AnnAssign(self, node: ast.AnnAssign):  # x: int = 1  ->  x = 1 ; bare `x: int` is dropped
        if node.value is None:
            return ast.copy_location(ast.Pass(), node)
        return ast.copy_location(ast.Assign(targets=[node.target], value=self.visit(node.value)), node)

    def visit_AugAssign(self, node: ast.AugAssign):  # d[k] += 1  ->  d[k] = d[k] + 1 (same for obj.x)
        node = self.generic_visit(node)
        if isinstance(node.target, (ast.Subscript, ast.Attribute)):
            if isinstance(node.target, ast.Subscript):
                load = ast.Subscript(value=node.target.value, slice=node.target.slice, ctx=ast.Load())
            else:
                load = ast.Attribute(value=node.target.value, attr=node.target.attr, ctx=ast.Load())
            value = ast.BinOp(left=load, op=node.op, right=node.value)
            return ast.fix_missing_locations(ast.copy_location(ast.Assign(targets=[node.target], value=value), node))
        return node


def compile_grader(source: str, filename: str):
    """Return the code object of the grader module; raise GraderSourceError with line and advice."""
    if not isinstance(source, str):
        raise GraderSourceError(f"{filename}: grader source must be str, got {type(source).__name__}")
    if len(source.encode("utf-8", "replace")) > MAX_SOURCE_BYTES:
        raise GraderSourceError(f"{filename}: grader source is larger than {MAX_SOURCE_BYTES // 1024} kB; "
                                "move data into the dataset item or a declared read_path")
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as e:
        raise GraderSourceError(f"{filename}, line {e.lineno}: syntax error: {e.msg}: {(e.text or '').strip()!r}") from None
    except (RecursionError, MemoryError, ValueError) as e:
        raise GraderSourceError(f"{filename}: source is too deeply nested or invalid ({type(e).__name__}); "
                                "simplify the expression") from None
    lines = source.splitlines()
    try:
        tree = ast.fix_missing_locations(_Desugar().visit(tree))
        result = compile_restricted_exec(tree, filename)
    except RecursionError:
        raise GraderSourceError(f"{filename}: source is too deeply nested; simplify the expression") from None
    if result.errors:
        out = []
        for err in result.errors:
            m = re.match(r"Line (\d+): (.*)", err)
            lineno, what = (int(m.group(1)), m.group(2)) if m else (None, err)
            text = lines[lineno - 1].strip() if lineno and 0 < lineno <= len(lines) else ""
            where = f"{filename}, line {lineno}" if lineno else filename
            out.append(f"{where}: {what} `{text}` -> {_advise(what)}")
        raise GraderSourceError("\n".join(out))
    if result.code is None:
        raise GraderSourceError(f"{filename}: could not compile the grader")
    return result.code


# ---------------------------------------------------------------- runtime globals (used in the child)
# Only for graders run with network=True (e.g. calling a judge model over HTTP).
NETWORK_IMPORTS = frozenset({"urllib", "http", "socket", "ssl", "email", "base64", "hashlib", "time", "litellm"})
_allowed = set(ALLOWED_IMPORTS)
# The project's own reward helpers (agentrl.rewards.SANDBOX_IMPORTS); nothing else of agentrl.
AGENTRL_MODULES = ("agentrl.rewards", "agentrl.trajectory")


def _module_ok(name: str, fromlist=()) -> bool:
    top = name.split(".")[0]
    if top != "agentrl":
        return top in _allowed
    if name == "agentrl":
        return bool(fromlist) and all(f"agentrl.{f}" in AGENTRL_MODULES for f in fromlist)
    return any(name == m or name.startswith(m + ".") for m in AGENTRL_MODULES)


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    top = name.split(".")[0]
    if level != 0 or not isinstance(name, str) or not _module_ok(name, fromlist or ()):
        hint = "" if top not in NETWORK_IMPORTS else " (it is allowed when the grader is run with network=True)"
        raise ImportError(f"import of {name!r} is not allowed in a grader{hint}; allowed: "
                          f"{', '.join(sorted(_allowed) + list(AGENTRL_MODULES))}")
    module = builtins.__import__(name, globals, locals, fromlist, level)
    return _GUARDED.get(id(module), module)


def _getattr(obj, name, default=None):
    value = safer_getattr(obj, name, default)
    if isinstance(value, types.ModuleType) and not (_module_ok(value.__name__) or value.__name__ == "agentrl"):
        raise AttributeError(f"module {value.__name__!r} is not available to graders")
    return _GUARDED.get(id(value), value)


_MISSING = object()


class GuardedAttrGetter:
    """`operator.attrgetter` for graders: every step goes through the guarded getattr, so names starting
    with '_', `str.format` and modules graders may not import stay out of reach (the real one would read
    any attribute: a way around every guard)."""

    def __init__(self, attr, *attrs):
        names = (attr, *attrs)
        if not all(isinstance(n, str) for n in names):
            raise TypeError("attribute name must be a string")
        self.paths = [n.split(".") for n in names]

    def __call__(self, obj):
        out = []
        for parts in self.paths:
            value = obj
            for part in parts:
                value = _getattr(value, part, _MISSING)
                if value is _MISSING:
                    raise AttributeError(f"{type(obj).__name__!r} object has no attribute {part!r}")
            out.append(value)
        return out[0] if len(out) == 1 else tuple(out)


class GuardedMethodCaller:
    """`operator.methodcaller` for graders, through the guarded getattr."""

    def __init__(self, name, *args, **kwargs):
        if not isinstance(name, str):
            raise TypeError("method name must be a string")
        self.getter, self.args, self.kwargs = GuardedAttrGetter(name), args, kwargs

    def __call__(self, obj):
        return self.getter(obj)(*self.args, **self.kwargs)


# What graders get instead, wherever they reach it: `import operator`, `from operator import attrgetter`,
# or an attribute of another module (typing.operator).
SAFE_OPERATOR = types.ModuleType("operator", operator.__doc__)
SAFE_OPERATOR.__dict__.update({k: v for k, v in vars(operator).items() if not k.startswith("__")})
SAFE_OPERATOR.attrgetter, SAFE_OPERATOR.methodcaller = GuardedAttrGetter, GuardedMethodCaller
_GUARDED = {id(operator): SAFE_OPERATOR, id(operator.attrgetter): GuardedAttrGetter,
            id(operator.methodcaller): GuardedMethodCaller}


_INPLACE = {"+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
            "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "<<=": operator.ilshift,
            ">>=": operator.irshift, "&=": operator.iand, "|=": operator.ior, "^=": operator.ixor,
            "@=": operator.imatmul}


def _inplacevar(op, target, value):
    return _INPLACE[op](target, value)


def _write(ob):
    """Graders may mutate their own dicts, lists and instances of their own classes (the sample/item
    Records included: the process is private); anything else (modules, library classes) goes through
    RestrictedPython's guard."""
    if isinstance(ob, (dict, list)) or getattr(type(ob), "__module__", None) == "grader":
        return ob
    return full_write_guard(ob)


PRINT_MAX = 1 << 20  # characters a grader may print in one call; nobody reads them


class _BoundedPrint(PrintCollector):
    """print() in a grader: output is dropped, and past PRINT_MAX characters the call ends at once with a
    grader error. A count, not a clock: the same grader gets the same outcome on a busy machine."""

    printed = 0

    def write(self, text):
        _BoundedPrint.printed += len(text)
        if _BoundedPrint.printed > PRINT_MAX:
            end_with_grader_error(f"grade() printed more than {PRINT_MAX} characters; print less (the output "
                                  "of print() in a grader is not shown anywhere)")


def _apply(f, *args, **kwargs):
    return f(*args, **kwargs)


def _read_only_open(file, mode="r", *args, **kwargs):
    if not isinstance(mode, str) or set(mode) - set("rbt"):
        raise PermissionError("graders may only open files for reading ('r' or 'rb'); the path must be declared "
                              "in read_paths")
    return builtins.open(file, mode, *args, **kwargs)


def _make_builtins() -> dict:
    b = dict(safe_builtins)
    b.update(limited_builtins)
    b.update(utility_builtins)
    for name in ("sorted", "zip", "reversed", "min", "max", "sum", "set", "frozenset", "enumerate", "map",
                 "filter", "any", "all", "list", "dict", "tuple", "iter", "next", "abs", "round", "len",
                 "range", "isinstance", "bytes", "print"):
        b[name] = getattr(builtins, name)
    b["__import__"] = _guarded_import
    b["open"] = _read_only_open
    return b


_BUILTINS = _make_builtins()  # built once in the zygote; each child copies it


def grader_globals(filename: str, getenv, network: bool = False) -> dict:
    if network:
        _allowed.update(NETWORK_IMPORTS)  # this process is a private fork: the change dies with it
    b = dict(_BUILTINS)
    b["getenv"] = getenv
    return {
        "__builtins__": b, "__name__": "grader", "__file__": filename, "__metaclass__": type,
        "_getattr_": _getattr, "_getitem_": operator.getitem, "_getiter_": iter, "_write_": _write,
        "_iter_unpack_sequence_": guarded_iter_unpack_sequence, "_unpack_sequence_": guarded_unpack_sequence,
        "_inplacevar_": _inplacevar, "_apply_": _apply, "_print_": _BoundedPrint,
    }


def preimport(heavy: bool) -> list[str]:
    """Import the modules graders use, once, in the zygote. Returns the ones present."""
    done = []
    for name in LIGHT_PREIMPORT + (HEAVY_PREIMPORT if heavy else ()):
        try:
            __import__(name)
            done.append(name)
        except Exception:  # noqa: BLE001 - an optional module missing is fine
            pass
    if heavy:
        try:
            import math_verify.grader  # noqa: F401  (lazy submodules of the verifier)
            import math_verify.parser  # noqa: F401
        except Exception:  # noqa: BLE001
            pass
    return done


def user_traceback(exc: BaseException, filename: str, source: str) -> str:
    """`Type: message` plus the frames of the user's file with their source lines."""
    lines = source.splitlines()
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename == filename:
            n = tb.tb_lineno
            text = lines[n - 1].strip() if 0 < n <= len(lines) else ""
            frames.append(f'  File "{filename}", line {n}, in {code.co_name}: {text}')
        tb = tb.tb_next
    if len(frames) > 8:
        frames = frames[:4] + [f"  ... {len(frames) - 8} more frames ..."] + frames[-4:]
    try:
        msg = f"{type(exc).__name__}: {exc}"
    except Exception:  # noqa: BLE001 - hostile __str__
        msg = type(exc).__name__
    return "\n".join(frames + [msg[:2000]])

