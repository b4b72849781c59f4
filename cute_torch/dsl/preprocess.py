"""The AST rewrite (preprocessor mode): control flow becomes calls into `control`, which emit
`scf` ops when conditions or bounds are dynamic and run plain Python when they are not.

    for i in range(a, b):        def __cute_for_1(__cute_item, acc):
        acc = acc + x[i]   ==>       i = __cute_item
                                     acc = acc + x[i]
                                     return (acc,)
                                 (acc,) = __cute_rt.for_loop(__cute_rt.range(a, b), __cute_for_1,
                                              __cute_rt.capture(locals(), ('acc',), ...), ('acc',), loc,
                                              (loc of the body's last `acc =`,))

`if`/`elif`/`else`, `while`, ternaries, `and`/`or`/`not` and comparison chains get the same
treatment. `cute.range_constexpr` loops and `cute.const_expr(...)` conditions stay Python.
Statements holding `return`/`break`/`continue` (or a loop `else`) stay Python too, guarded by a
check that raises CUTE-E101/E102 if their condition turns out to be dynamic. Rewritten code is
compiled under the original file name and line numbers, so tracebacks and locations point at
the user's source.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import marshal
import os
import tempfile
import textwrap
import types
from typing import Callable

from ..env import knobs
from . import control
from .control import IN_PLACE
from .diagnostics import UNSUPPORTED_SYNTAX, DSLError, Location

RT = "__cute_rt"
FILE = "__cute_file"


def _rt(attr: str) -> ast.expr:
    return ast.Attribute(value=ast.Name(id=RT, ctx=ast.Load()), attr=attr, ctx=ast.Load())


def _call(func: ast.expr, *args: ast.expr, **kwargs: ast.expr) -> ast.Call:
    return ast.Call(func=func, args=list(args), keywords=[ast.keyword(arg=k, value=v) for k, v in kwargs.items()])


def _names_tuple(names: list[str]) -> ast.Tuple:
    return ast.Tuple(elts=[ast.Constant(n) for n in names], ctx=ast.Load())


def _is_call_to(node: ast.expr, name: str) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == name) or (isinstance(func, ast.Attribute) and func.attr == name)


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp,
           ast.DictComp, ast.GeneratorExp)


def _walk_scope(nodes, stop=_SCOPES):
    """Nodes of these statements, not entering nested scopes (or `stop` node types)."""
    stack = list(reversed(nodes))  # pre-order, in source order
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, stop):
            continue  # a nested scope among the statements themselves: only its name binds here
        for child in reversed(list(ast.iter_child_nodes(node))):
            if not isinstance(child, stop):
                stack.append(child)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield child  # the def binds its name here


def assigned_names(stmts: list[ast.stmt]) -> list[str]:
    names: dict[str, None] = {}
    for node in _walk_scope(stmts):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names[node.id] = None
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = None
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = None
    return [n for n in names if not n.startswith("__cute")]


def mutated_names(stmts: list[ast.stmt], local: set[str]) -> list[str]:
    """Local variables whose attributes the statements set or whose methods they call. An
    object changed in place inside a dynamic region (`state.advance()` of a pipeline state) is
    carried like a reassigned variable: if it holds DSL values they become iter_args."""
    names: dict[str, None] = {}
    for node in _walk_scope(stmts):
        changed = _changed_name(node)
        if changed and changed[1] and changed[0] in local:
            names[changed[0]] = None
    return list(names)


def _changed_name(node: ast.AST) -> tuple[str, bool] | None:
    """(the variable `node` gives a value, whether in place): a name assigned, or the name whose
    attribute `node` sets or whose method it calls."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        return node.id, False
    base = None
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
        base = node.value
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        base = node.func.value
    return (base.id, True) if isinstance(base, ast.Name) else None


def _early_exit(stmts: list[ast.stmt]) -> str | None:
    """'return', 'break' or 'continue' if these statements leave the enclosing region early."""
    for node in _walk_scope(stmts):
        if isinstance(node, ast.Return):
            return "return"
    for node in _walk_scope(stmts, stop=_SCOPES + (ast.For, ast.While, ast.AsyncFor)):
        if isinstance(node, ast.Break):
            return "break"
        if isinstance(node, ast.Continue):
            return "continue"
    return None


def _target_names(target: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


class _Rewriter(ast.NodeTransformer):
    def __init__(self):
        self.counter = 0
        self.scopes: list[set[str]] = []  # the local variables of each function being rewritten

    def visit_FunctionDef(self, node: ast.FunctionDef):
        a = node.args
        params = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs] + [x.arg for x in (a.vararg, a.kwarg) if x]
        self.scopes.append(set(params) | set(assigned_names(node.body)))
        try:
            return self.generic_visit(node)
        finally:
            self.scopes.pop()

    def _carried(self, stmts: list[ast.stmt], exclude=()) -> tuple[list[str], ast.Tuple]:
        """What a dynamic region carries: the variables it assigns, then locals it changes in place;
        and the names as the runtime sees them, a local only changed in place marked, so that only
        a structure of DSL values is carried for it (a Python scalar whose method it calls stays a
        Python scalar)."""
        names = [n for n in assigned_names(stmts) if n not in exclude]
        local = self.scopes[-1] if self.scopes else set()
        in_place = [n for n in mutated_names(stmts, local) if n not in names and n not in exclude]
        return names + in_place, _names_tuple(names + [n + IN_PLACE for n in in_place])

    def _fresh(self, kind: str) -> str:
        self.counter += 1
        return f"__cute_{kind}_{self.counter}"

    @staticmethod
    def _loc(node: ast.AST) -> ast.expr:
        return _call(_rt("Location"), ast.Name(id=FILE, ctx=ast.Load()), ast.Constant(node.lineno),
                     ast.Constant(node.col_offset))

    def _assigned_at(self, stmts: list[ast.stmt], names: list[str]) -> ast.Tuple:
        """Per carried name, where `stmts` last assign (or change in place) it in source order: a
        Location for errors about the value the region leaves it (None where not found)."""
        last: dict[str, ast.AST] = {}
        for node in _walk_scope(stmts):
            name = (_changed_name(node) or (None,))[0]
            if name in names and (name not in last or (node.lineno, node.col_offset) >
                                  (last[name].lineno, last[name].col_offset)):
                last[name] = node
        return ast.Tuple(elts=[self._loc(last[n]) if n in last else ast.Constant(None) for n in names],
                         ctx=ast.Load())

    def _capture(self, names: list[str], kind: str, node: ast.AST) -> ast.expr:
        return _call(_rt("capture"), _call(ast.Name(id="locals", ctx=ast.Load())), _names_tuple(names),
                     ast.Constant(kind), self._loc(node))

    @staticmethod
    def _region_def(name: str, params: list[str], body: list[ast.stmt], names: list[str]) -> ast.FunctionDef:
        ret = ast.Return(value=ast.Tuple(elts=[ast.Name(id=n, ctx=ast.Load()) for n in names], ctx=ast.Load()))
        return ast.FunctionDef(name=name, args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params],
                                                             kwonlyargs=[], kw_defaults=[], defaults=[]),
                               body=(body or [ast.Pass()]) + [ret], decorator_list=[], returns=None, type_comment=None)

    @staticmethod
    def _assign(names: list[str], value: ast.expr) -> ast.stmt:
        if not names:
            return ast.Expr(value=value)
        return ast.Assign(targets=[ast.Tuple(elts=[ast.Name(id=n, ctx=ast.Store()) for n in names], ctx=ast.Store())],
                          value=value)

    def _place(self, original: ast.AST, stmts: list[ast.stmt]) -> list[ast.stmt]:
        for s in stmts:
            ast.copy_location(s, original)
            for child in ast.walk(s):
                if not hasattr(child, "lineno") or getattr(child, "lineno", None) is None:
                    ast.copy_location(child, original)
        return stmts

    # -- statements ------------------------------------------------------------------------------
    def visit_For(self, node: ast.For):
        self.generic_visit(node)
        if _is_call_to(node.iter, "range_constexpr"):
            return node
        if isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Name) and node.iter.func.id == "range":
            node.iter.func = _rt("range")
        reason = "else" if node.orelse else _early_exit(node.body)
        if reason:
            node.iter = _call(_rt("static_iter"), node.iter, self._loc(node), ast.Constant(reason))
            return node
        targets = _target_names(node.target)
        names, runtime_names = self._carried(node.body, targets)
        fn = self._fresh("for")
        bind = ast.Assign(targets=[node.target], value=ast.Name(id="__cute_item", ctx=ast.Load()))
        ast.copy_location(bind, node)
        body_def = self._region_def(fn, ["__cute_item"] + names, [bind] + node.body, names)
        call = _call(_rt("for_loop"), node.iter, ast.Name(id=fn, ctx=ast.Load()),
                     self._capture(names, "for loop", node), runtime_names, self._loc(node),
                     self._assigned_at(node.body, names))
        return self._place(node, [body_def, self._assign(names, call)])

    def visit_If(self, node: ast.If):
        self.generic_visit(node)
        if _is_call_to(node.test, "const_expr"):
            return node
        reason = _early_exit(node.body + node.orelse)
        if reason:
            node.test = _call(_rt("static_cond"), node.test, self._loc(node), ast.Constant(reason))
            return node
        names, runtime_names = self._carried(node.body + node.orelse)
        then_fn, else_fn = self._fresh("then"), self._fresh("else")
        call = _call(_rt("if_"), node.test, ast.Name(id=then_fn, ctx=ast.Load()), ast.Name(id=else_fn, ctx=ast.Load()),
                     self._capture(names, "if", node), runtime_names, self._loc(node),
                     self._assigned_at(node.body, names), self._assigned_at(node.orelse, names))
        return self._place(node, [self._region_def(then_fn, names, node.body, names),
                                  self._region_def(else_fn, names, node.orelse, names), self._assign(names, call)])

    def visit_While(self, node: ast.While):
        self.generic_visit(node)
        if _is_call_to(node.test, "const_expr"):
            return node
        reason = "else" if node.orelse else _early_exit(node.body)
        if reason:
            node.test = _call(_rt("static_cond"), node.test, self._loc(node), ast.Constant(reason))
            return node
        names, runtime_names = self._carried(node.body)
        cond_fn, body_fn = self._fresh("cond"), self._fresh("while")
        cond_def = self._region_def(cond_fn, names, [], [])
        cond_def.body = [ast.Return(value=node.test)]
        call = _call(_rt("while_loop"), ast.Name(id=cond_fn, ctx=ast.Load()), ast.Name(id=body_fn, ctx=ast.Load()),
                     self._capture(names, "while loop", node), runtime_names, self._loc(node),
                     self._assigned_at(node.body, names))
        return self._place(node, [cond_def, self._region_def(body_fn, names, node.body, names),
                                  self._assign(names, call)])

    def visit_AsyncFunctionDef(self, node):
        raise DSLError(UNSUPPORTED_SYNTAX, "async functions are not supported in DSL code",
                       Location(self.filename, node.lineno, node.col_offset))

    # -- expressions ---------------------------------------------------------------------------
    @staticmethod
    def _thunk(expr: ast.expr) -> ast.Lambda:
        return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
                          body=expr)

    def visit_IfExp(self, node: ast.IfExp):
        self.generic_visit(node)
        return ast.copy_location(_call(_rt("ifexp"), node.test, self._thunk(node.body), self._thunk(node.orelse),
                                       self._loc(node)), node)

    def visit_BoolOp(self, node: ast.BoolOp):
        self.generic_visit(node)
        fn = "and_" if isinstance(node.op, ast.And) else "or_"
        return ast.copy_location(_call(_rt(fn), *[self._thunk(v) for v in node.values], loc=self._loc(node)), node)

    def visit_UnaryOp(self, node: ast.UnaryOp):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(_call(_rt("not_"), node.operand), node)
        return node

    _OPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is",
            ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}

    def visit_Compare(self, node: ast.Compare):
        self.generic_visit(node)
        if len(node.ops) == 1:
            return node
        operands = ast.Tuple(elts=[self._thunk(e) for e in [node.left] + node.comparators], ctx=ast.Load())
        ops = ast.Tuple(elts=[ast.Constant(self._OPS[type(op)]) for op in node.ops], ctx=ast.Load())
        return ast.copy_location(_call(_rt("compare_chain"), operands, ops, self._loc(node)), node)

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
            node.func = _rt(node.func.id)
        elif _is_call_to(node, "printf") and node.args and isinstance(node.args[0], ast.JoinedStr):
            fmt, args = _split_fstring(node.args[0])
            node.args = [ast.Constant(fmt)] + args + node.args[1:]
        return node


def _split_fstring(node: ast.JoinedStr) -> tuple[str, list[ast.expr]]:
    """f"x={x:.3f}" -> ("x={:.3f}", [x]) for cute.printf."""
    fmt, args = "", []
    for part in node.values:
        if isinstance(part, ast.Constant):
            fmt += str(part.value).replace("{", "{{").replace("}", "}}")
        else:
            spec = ""
            if part.format_spec is not None:
                spec = ":" + "".join(str(p.value) for p in part.format_spec.values if isinstance(p, ast.Constant))
            fmt += "{" + spec + "}"
            args.append(part.value)
    return fmt, args


class Preprocessed:
    """A function's rewritten code; `instantiate()` binds it to the current closure values."""

    def __init__(self, fn: Callable, factory: Callable, fndef: ast.FunctionDef | None):
        self.fn = fn
        self.factory = factory
        self._fndef = fndef  # None where the code came from the disk cache

    @property
    def source(self) -> str:
        """The rewritten function as Python (CUTE_TORCH_PRINT_AFTER_PREPROCESS)."""
        if self._fndef is None:
            self._fndef = _rewrite(self.fn, *inspect.getsourcelines(self.fn))[1]
        return ast.unparse(self._fndef)

    def instantiate(self, runtime: types.ModuleType) -> Callable:
        cells = [c.cell_contents for c in (self.fn.__closure__ or ())]
        new = self.factory(runtime, self.fn.__code__.co_filename, *cells)
        new.__defaults__ = self.fn.__defaults__
        new.__kwdefaults__ = self.fn.__kwdefaults__
        new.__wrapped__ = self.fn
        return new


def preprocess(fn: Callable) -> Preprocessed:
    """`fn` rewritten. The rewrite depends only on the function's source, its place and the
    preprocessor itself, so a new process reads it back from the disk cache (as Python does its
    bytecode) instead of rewriting: a GEMM kernel's rewrite took 0.34 s of its first call on the
    build machine."""
    filename = fn.__code__.co_filename
    try:
        lines, first_line = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise DSLError(UNSUPPORTED_SYNTAX, f"the source of {fn.__qualname__} is not available, so the preprocessor "
                       f"cannot rewrite it ({e})", Location(filename, fn.__code__.co_firstlineno),
                       "define DSL functions in a file, or use @cute.jit(preprocess=False)") from None
    path = _cache_path(fn, "".join(lines), first_line)
    code = _load(path)
    fndef = None
    if code is None:
        code, fndef = _rewrite(fn, lines, first_line)
        _store(path, code)
    namespace: dict = {}
    exec(code, fn.__globals__, namespace)  # noqa: S102 - the user's own function, rewritten
    return Preprocessed(fn, namespace["__cute_factory"], fndef)


def _rewrite(fn: Callable, lines: list[str], first_line: int) -> tuple[types.CodeType, ast.FunctionDef]:
    """The code object of a factory that defines the rewritten `fn` (and the rewritten def)."""
    filename = fn.__code__.co_filename
    raw = "".join(lines)
    source = textwrap.dedent(raw)
    first = source.splitlines()[0]
    shift = len(lines[0]) - len(lines[0].lstrip()) - (len(first) - len(first.lstrip()))
    tree = ast.parse(source)
    ast.increment_lineno(tree, first_line - 1)
    if shift:
        for node in ast.walk(tree):
            if hasattr(node, "col_offset"):
                node.col_offset += shift
                if getattr(node, "end_col_offset", None) is not None:
                    node.end_col_offset += shift
    fndef = tree.body[0]
    if not isinstance(fndef, ast.FunctionDef):
        raise DSLError(UNSUPPORTED_SYNTAX, "only plain `def` functions can be DSL functions",
                       Location(filename, first_line))
    fndef.decorator_list = []
    rewriter = _Rewriter()
    rewriter.filename = filename
    fndef = rewriter.visit(fndef)
    params = [RT, FILE] + list(fn.__code__.co_freevars)
    factory = ast.FunctionDef(
        name="__cute_factory",
        args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params], kwonlyargs=[], kw_defaults=[],
                           defaults=[]),
        body=[fndef, ast.Return(value=ast.Name(id=fndef.name, ctx=ast.Load()))], decorator_list=[], returns=None)
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    return compile(module, filename, "exec"), fndef


_PREPROCESSOR: str | None = None  # a hash of this file and of control.py, whose calls the rewrite emits


def _cache_path(fn: Callable, raw: str, first_line: int) -> str | None:
    """Where `fn`'s rewrite is cached, or None where the cache is off (or the rewritten source
    is to be printed, which needs the rewrite itself)."""
    global _PREPROCESSOR
    k = knobs()
    if k.no_cache or k.print_after_preprocess:
        return None
    if _PREPROCESSOR is None:
        h = hashlib.sha256()
        for module_file in (__file__, control.__file__):
            with open(module_file, "rb") as f:
                h.update(f.read())
        _PREPROCESSOR = h.hexdigest()
    h = hashlib.sha256()
    for part in (_PREPROCESSOR, importlib.util.MAGIC_NUMBER.hex(), fn.__code__.co_filename, str(first_line),
                 ",".join(fn.__code__.co_freevars), raw):
        h.update(part.encode() + b"\0")
    digest = h.hexdigest()
    return os.path.join(k.cache_dir, "preprocess", digest[:2], digest + ".code")


def _load(path: str | None) -> types.CodeType | None:
    """A cached rewrite; None on a miss or an unreadable entry (which is then rewritten again)."""
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            code = marshal.loads(f.read())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    return code if isinstance(code, types.CodeType) else None


def _store(path: str | None, code: types.CodeType) -> None:
    """Writes a rewrite atomically (a temporary file renamed into place); a read-only or full
    disk only costs the next process the rewrite."""
    if path is None:
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(marshal.dumps(code))
        os.replace(tmp, path)
    except OSError:
        pass
