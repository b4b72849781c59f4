"""What the preprocessor's rewritten code calls: control flow that is Python when its condition
or bounds are compile-time and `scf` IR when they are dynamic.

Each rewritten region is a nested function taking the region's assigned variables and
returning them. Variables that hold DSL scalars (or Python scalars, which are promoted) are
carried as `iter_args`/results, and so are structures holding DSL scalars (as their leaves:
_Carry); other Python objects must come out of the region unchanged; a
variable first assigned inside a dynamic region becomes `Undefined` after it, and reading it
is error CUTE-E103.
"""

from __future__ import annotations

import builtins
from typing import Any, Callable, Sequence

from . import ir, pytree
from .diagnostics import (EARLY_EXIT, LOOP_ELSE, NOT_CONSTEXPR, TYPE_CHANGE, UNDEFINED_AFTER_REGION, DSLError,
                          Location, user_location)
from .numeric import Boolean, Int32, Numeric, as_numeric, convert, index_of, promote, python_type, where


class Undefined:
    """The value of a variable that has none here: assigned only inside a dynamic region (after
    it), or not yet assigned (inside it)."""

    __slots__ = ("_name", "_kind", "_loc", "_after")

    def __init__(self, name: str, kind: str, loc: Location | None, after: bool):
        self._name, self._kind, self._loc, self._after = name, kind, loc, after

    def _fail(self, *args, **kwargs):
        where_line = f" at line {self._loc.line}" if self._loc else ""
        if self._after:
            raise DSLError(
                UNDEFINED_AFTER_REGION,
                f"'{self._name}' is first defined inside the dynamic {self._kind}{where_line} and read after it",
                user_location(),
                f"define '{self._name}' before the {self._kind} with the type it has inside "
                f"(e.g. {self._name} = cute.Int32(0))")
        raise DSLError(UNDEFINED_AFTER_REGION, f"'{self._name}' is read before it is assigned", user_location(),
                       f"assign '{self._name}' before this line")

    __getattr__ = __call__ = __getitem__ = __iter__ = __bool__ = __repr__ = __str__ = __index__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __floordiv__ = _fail
    __mod__ = __lt__ = __le__ = __gt__ = __ge__ = __neg__ = __format__ = __int__ = __float__ = _fail

    def __eq__(self, other):
        self._fail()

    __ne__ = __eq__
    __hash__ = None


IN_PLACE = " (changed in place)"  # preprocess.py marks a carried name a region only changes in place


def capture(scope: dict, names: Sequence[str], kind: str, loc: Location) -> tuple:
    return tuple(scope[n] if n in scope else Undefined(n, kind, loc, after=False) for n in names)


# -- carried values ------------------------------------------------------------------------------

def _is_scalar(value) -> bool:
    return isinstance(value, (Numeric, bool, int, float))


def _carried_type(value) -> type[Numeric] | None:
    if isinstance(value, Numeric):
        return type(value)
    if isinstance(value, (bool, int, float)):
        return python_type(value)
    return None


def _coerce(name: str, value, t: type[Numeric], kind: str, where_: str, at: Location | None = None) -> Numeric:
    """A value yielded for a carried variable of type `t`; `at`: where the region last assigns
    it (errors point there; else at the innermost user line)."""
    at = at or user_location()
    if isinstance(value, Numeric):
        if type(value) is not t:
            raise DSLError(TYPE_CHANGE,
                           f"'{name}' is {t.__name__} when the dynamic {kind} starts but {type(value).__name__} "
                           f"{where_}",
                           at,
                           f"give '{name}' one type: initialize it as {type(value).__name__}(...) before the "
                           f"{kind}, or convert with .to({t.__name__})")
        return value
    if isinstance(value, (bool, int, float)):
        if isinstance(value, float) and not t.is_float:
            raise DSLError(TYPE_CHANGE, f"'{name}' is {t.__name__} in the dynamic {kind} but is assigned a float "
                           f"{where_}", at,
                           f"initialize '{name}' as a float (e.g. cute.Float32(0)) before the {kind}")
        return convert(value, t)
    if isinstance(value, Undefined):
        raise DSLError(UNDEFINED_AFTER_REGION, f"'{name}' has no value on every path through the dynamic {kind}",
                       at, f"assign '{name}' on every path, or before the {kind}")
    raise DSLError(TYPE_CHANGE, f"'{name}' holds a {type(value).__name__}, which cannot be carried out of a "
                   f"dynamic {kind}", at,
                   f"carry DSL scalars only; compute '{name}' outside the {kind}")


def _is_numeric(value) -> bool:
    return isinstance(value, Numeric)


class _Carry:
    """Which of a region's variables travel as IR values, and their types. A DSL scalar (or a
    Python scalar, promoted) is one value; a structure holding DSL scalars (a NamedTuple, a
    dataclass such as a pipeline state, a tuple, a layout with run-time leaves) travels as its leaves
    and is rebuilt around them (pytree.py); its static parts must stay as they were."""

    def __init__(self, names: Sequence[str], init: tuple, kind: str, assigned: Sequence = (),
                 assigned_else: Sequence = ()):
        self.names, self.init, self.kind = list(names), init, kind
        # Where the region (an if's then branch) last assigns each variable, and an if's else branch.
        self.assigned = list(assigned) or [None] * len(self.names)
        self.assigned_else = list(assigned_else) or [None] * len(self.names)
        self.carried: list[tuple[int, pytree.Tree | None, int]] = []  # (variable, tree or None, leaves)
        self.types: list[type[Numeric]] = []
        self._initial: list = []  # the carried values before the region (scalars not yet converted)
        for i, v in enumerate(init):
            if names[i].endswith(IN_PLACE):  # only changed in place: a scalar cannot be, a structure can
                self.names[i] = names[i][: -len(IN_PLACE)]
                if _is_scalar(v):
                    continue
            if _is_scalar(v):
                self.carried.append((i, None, 1))
                self.types.append(_carried_type(v))
                self._initial.append(v)
            elif not isinstance(v, Undefined):
                leaves, tree = pytree.flatten(v, _is_numeric)
                if leaves:
                    self.carried.append((i, tree, len(leaves)))
                    self.types += [type(leaf) for leaf in leaves]
                    self._initial += leaves
        self.slots = {i for i, _, _ in self.carried}

    def initial_values(self) -> list[Numeric]:
        return [convert(as_numeric(v, t), t) for v, t in zip(self._initial, self.types)]

    def _place(self, values: Sequence[Numeric]) -> list:
        """The variables with the carried ones rebuilt from `values`."""
        out, at = list(self.init), 0
        for i, tree, n in self.carried:
            out[i] = values[at] if tree is None else pytree.unflatten(tree, list(values[at:at + n]))
            at += n
        return out

    def copies(self) -> tuple:
        """The variables with each carried structure rebuilt over its own leaves: a branch that
        changes one in place (a pipeline state's advance()) must not change the other branch's."""
        out = list(self.init)
        for i, tree, _ in self.carried:
            if tree is not None:
                out[i] = pytree.unflatten(tree, pytree.flatten(self.init[i], _is_numeric)[0])
        return tuple(out)

    def inputs(self, values: Sequence[Numeric]) -> tuple:
        """The region function's arguments: block arguments for carried values."""
        return tuple(self._place(values))

    def outputs(self, returned: tuple, where_: str) -> list[Numeric]:
        """Check what a region returned; the carried values to yield (converted)."""
        for i, (name, before, after) in enumerate(zip(self.names, self.init, returned)):
            if i in self.slots or isinstance(before, Undefined):
                continue
            if after is not before:
                raise DSLError(TYPE_CHANGE, f"'{name}' ({type(before).__name__}) is reassigned inside a dynamic "
                               f"{self.kind}; only DSL scalars and structures of them can change there",
                               self.assigned[i] or user_location(),
                               f"compute '{name}' before the {self.kind}, or use a new name inside it")
        values, at = [], 0
        for i, tree, n in self.carried:
            name, types = self.names[i], self.types[at:at + n]
            if tree is None:
                values.append(_coerce(name, returned[i], types[0], self.kind, where_, self.assigned[i]))
            else:
                leaves, after = pytree.flatten(returned[i], _is_numeric)
                if after != tree:
                    raise DSLError(TYPE_CHANGE, f"'{name}' ({type(self.init[i]).__name__}) changes its structure or "
                                   f"a compile-time part {where_} of the dynamic {self.kind}",
                                   self.assigned[i] or user_location(),
                                   f"only the DSL values inside '{name}' can change; make the others DSL values "
                                   "(e.g. cute.Int32(0)) before the region")
                values += [_coerce(f"{name} (field {k})", leaf, t, self.kind, where_, self.assigned[i])
                           for k, (leaf, t) in enumerate(zip(leaves, types))]
            at += n
        return values

    def results(self, values: Sequence[Numeric], loc: Location | None) -> tuple:
        out = self._place(values)
        for i, v in enumerate(out):
            if isinstance(v, Undefined):
                out[i] = Undefined(self.names[i], self.kind, loc, after=True)
        return tuple(out)


def _block_args(b: ir.FunctionBuilder, types) -> list[Numeric]:
    return [t._wrap(b.block_arg(t.mlir)) for t in types]


def _yield(b: ir.FunctionBuilder, values: Sequence[Numeric], op: str = "scf.yield") -> None:
    if values:
        b.emit(f"{op} {', '.join(v.ir.name for v in values)} : {', '.join(v.ir.type for v in values)}")
    else:
        b.emit(op)


def _results_spec(types) -> str:
    return f" -> ({', '.join(t.mlir for t in types)})" if types else ""


# -- for ----------------------------------------------------------------------------------------

class range:  # noqa: A001 - the DSL's `range`, CuTe DSL's name
    """A dynamic loop: `for i in cute.range(start, stop, step, unroll=N)` gives `scf.for`, also
    with constant bounds. `unroll=N` traces the body N times per iteration (plus a remainder
    loop); `unroll_full=True` unrolls a loop with constant bounds completely."""

    def __init__(self, *args, unroll: int = 1, unroll_full: bool = False):
        if not 1 <= len(args) <= 3:
            raise TypeError(f"range expected 1 to 3 arguments, got {len(args)}")
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
        if isinstance(step, int) and step == 0:
            raise ValueError("range() step must not be zero")
        self.start, self.stop, self.step = start, stop, step
        self.unroll, self.unroll_full = int(unroll), bool(unroll_full)

    def __iter__(self):
        raise DSLError(EARLY_EXIT, "a dynamic range can only drive a `for` loop rewritten by the preprocessor",
                       user_location(), "use it directly in `for i in range(...)` inside a @cute.jit/@cute.kernel "
                       "function, or use cute.range_constexpr for a Python loop")


def range_constexpr(*args) -> builtins.range:
    """A loop unrolled at compile time (a Python `range`); its bounds must be compile-time."""
    for a in args:
        if isinstance(a, Numeric):
            raise DSLError(NOT_CONSTEXPR, "range_constexpr bounds must be compile-time values", user_location(),
                           "use cute.range (or range) for a loop with run-time bounds")
    return builtins.range(*args)


def const_expr(value):
    """Marks a condition as compile-time: `if cute.const_expr(flag):` stays a Python `if`."""
    if isinstance(value, Numeric):
        raise DSLError(NOT_CONSTEXPR, "const_expr needs a compile-time value, got a dynamic "
                       f"{type(value).__name__}", user_location(),
                       "drop const_expr to make the branch dynamic, or pass the value as cute.Constexpr")
    return value


def _emit_for(b, lb, ub, step, carry: _Carry, values: list[Numeric], body: Callable, loc: str) -> list[Numeric]:
    """scf.for over index bounds; `body(iv_index_value, carried) -> carried`."""
    iv = b.block_arg("index")
    args = _block_args(b, carry.types)
    with b.region() as lines:
        out = body(iv, args)
        _yield(b, out)
    iter_args = ""
    if values:
        iter_args = " iter_args(" + ", ".join(f"{a.ir.name} = {v.ir.name}" for a, v in zip(args, values)) + ")"
    text = (f"scf.for {iv.name} = {lb.name} to {ub.name} step {step.name}{iter_args}{_results_spec(carry.types)} "
            f"{{\n{ir.indent(lines)}\n}}")
    results = b.op_results(text, [t.mlir for t in carry.types], loc)
    return [t._wrap(r) for t, r in zip(carry.types, results)]


def for_loop(iterable, body: Callable, init: tuple, names: Sequence[str], loc: Location,
             assigned: Sequence = ()) -> tuple:
    """A `for` loop: a Python loop over a compile-time iterable, else scf.for carrying the
    variables `names` (from `init`); `assigned`: where the body last assigns each (errors)."""
    if not isinstance(iterable, range):
        values = init
        for item in iterable:  # a Python loop: range_constexpr, lists, tuples, ...
            values = body(item, *values)
        return values
    r = iterable
    b = ir.require(what="a dynamic for loop")
    bounds = (r.start, r.stop, r.step)
    if r.unroll_full:
        if any(isinstance(x, Numeric) for x in bounds):
            raise DSLError(NOT_CONSTEXPR, "unroll_full needs compile-time bounds", loc,
                           "give unroll=N for a loop with run-time bounds")
        values = init
        for item in builtins.range(*bounds):
            values = body(item, *values)
        return values
    t = Int32
    for x in bounds:
        t = promote(t, type(x) if isinstance(x, Numeric) else python_type(x))
    if t.is_float:
        raise DSLError(NOT_CONSTEXPR, "range bounds must be integers", loc)
    carry = _Carry(names, init, "for loop", assigned)
    values = carry.initial_values()
    mlir_loc = loc.mlir()

    def run_body(i: Numeric, carried: Sequence[Numeric]) -> list[Numeric]:
        return carry.outputs(body(i, *carry.inputs(carried)), "at the end of an iteration")

    def as_t(iv_index) -> Numeric:
        return t._wrap(b.op(f"arith.index_cast {iv_index.name} : index to {t.mlir}", t.mlir))

    simple = isinstance(r.step, int) and r.step > 0 and r.unroll <= 1
    if simple:
        lb, ub, st = index_of(convert(r.start, t)), index_of(convert(r.stop, t)), index_of(r.step)
        values = _emit_for(b, lb, ub, st, carry, values, lambda iv, c: run_body(as_t(iv), c), mlir_loc)
        return carry.results(values, loc)

    # General form: iterate k over [0, trip) with i = start + k * step (any sign, run-time step).
    start, stop, step = (convert(x, t) for x in bounds)
    if isinstance(r.step, int):
        trip = (stop - start + (r.step - 1)) // r.step if r.step > 0 else (start - stop + (-r.step - 1)) // -r.step
    else:
        trip = where(step > 0, (stop - start + step - 1) // step, (start - stop - step - 1) // (0 - step))
    trip = where(trip > 0, trip, 0)
    unroll = max(1, r.unroll)
    zero, one = index_of(0), index_of(1)
    if unroll == 1:
        values = _emit_for(b, zero, index_of(trip), one, carry, values,
                           lambda k, c: run_body(start + as_t(k) * step, c), mlir_loc)
        return carry.results(values, loc)

    main = trip // unroll

    def unrolled(k, c):
        base = as_t(k) * unroll
        for u in builtins.range(unroll):
            c = run_body(start + (base + u) * step, c)
        return c

    values = _emit_for(b, zero, index_of(main), one, carry, values, unrolled, mlir_loc)
    values = _emit_for(b, index_of(main * unroll), index_of(trip), one, carry, values,
                       lambda k, c: run_body(start + as_t(k) * step, c), mlir_loc)
    return carry.results(values, loc)


def static_iter(iterable, loc: Location, reason: str):
    """The iterable of a `for` that must stay a Python loop (it has break/continue/return or an
    else): a dynamic range there is an error."""
    if isinstance(iterable, range):
        if reason == "else":
            raise DSLError(LOOP_ELSE, "a dynamic `for` loop cannot have an `else` clause", loc,
                           "move the else code after the loop (use a flag), or use cute.range_constexpr")
        raise DSLError(EARLY_EXIT, f"`{reason}` inside a dynamic `for` loop: a loop in IR runs all its iterations",
                       loc, "carry a flag and guard the body with `if`, or use cute.range_constexpr for a "
                       "compile-time loop")
    return iterable


# -- if -----------------------------------------------------------------------------------------

def _dynamic_if(b, cond: Numeric, then_fn: Callable[[], tuple], else_fn: Callable[[], tuple], carry: _Carry,
                loc: Location) -> tuple:
    cond = convert(cond, Boolean)
    with b.region() as then_lines:
        then_out = then_fn()
    with b.region() as else_lines:
        else_out = else_fn()
    # Decide per variable: static (same Python value or object on both sides), undefined, carried
    # as one value (a scalar), or carried as the leaves of a structure with the same static parts.
    names, init = carry.names, carry.init
    out: list[Any] = list(init)
    entries = []  # (variable, tree or None, leaf types)
    for i, (name, x, y) in enumerate(zip(names, then_out, else_out)):
        if isinstance(x, Undefined) or isinstance(y, Undefined):
            out[i] = Undefined(name, "if", loc, after=True)
        elif x is y:
            out[i] = x
        elif not _is_scalar(x) or not _is_scalar(y):
            x_leaves, x_tree = pytree.flatten(x, _is_numeric)
            y_leaves, y_tree = pytree.flatten(y, _is_numeric)
            if x_tree != y_tree or not x_leaves:
                changed = type(x).__name__ if x is not init[i] else type(y).__name__
                raise DSLError(TYPE_CHANGE, f"'{name}' is assigned a {changed}"
                               " in one branch of a dynamic `if` and something else in the other; only DSL scalars "
                               "(and structures of them with the same compile-time parts) can differ between "
                               "branches", loc, f"compute '{name}' before the `if`, or use a new name inside each "
                               "branch")
            for k, (a, b_) in enumerate(zip(x_leaves, y_leaves)):
                if type(a) is not type(b_):
                    raise DSLError(TYPE_CHANGE, f"field {k} of '{name}' is {type(a).__name__} in one branch of a "
                                   f"dynamic `if` and {type(b_).__name__} in the other", loc,
                                   "convert one side so both branches agree")
            entries.append((i, x_tree, [type(a) for a in x_leaves]))
        elif not isinstance(x, Numeric) and not isinstance(y, Numeric) and type(x) is type(y) and x == y:
            out[i] = x
        else:
            tx, ty = _carried_type(x), _carried_type(y)
            if isinstance(x, Numeric) and isinstance(y, Numeric) and tx is not ty:
                # Where one branch keeps the value from before the `if`, point at the other's assignment.
                at = carry.assigned_else[i] if x is init[i] else carry.assigned[i] if y is init[i] else None
                raise DSLError(TYPE_CHANGE, f"'{name}' is {tx.__name__} in one branch of a dynamic `if` and "
                               f"{ty.__name__} in the other", at or loc,
                               f"convert one side, e.g. .to({tx.__name__}), so both branches agree")
            entries.append((i, None, [tx if isinstance(x, Numeric) else ty if isinstance(y, Numeric) else
                                      promote(tx, ty)]))
    types = [t for _, _, ts in entries for t in ts]
    where_ = "in a branch of the `if`"

    def finish(lines, side):
        with b.reopen(lines):
            vals = []
            for i, tree, ts in entries:
                if tree is None:
                    vals.append(_coerce(names[i], side[i], ts[0], "if", where_))
                else:
                    vals += pytree.flatten(side[i], _is_numeric)[0]
            _yield(b, vals)

    finish(then_lines, then_out)
    finish(else_lines, else_out)
    text = f"scf.if {cond.ir.name}{_results_spec(types)} {{\n{ir.indent(then_lines)}\n}}"
    text += f" else {{\n{ir.indent(else_lines)}\n}}"
    results = b.op_results(text, [t.mlir for t in types], loc.mlir())
    at = 0
    for i, tree, ts in entries:
        wrapped = [t._wrap(r) for t, r in zip(ts, results[at:at + len(ts)])]
        out[i] = wrapped[0] if tree is None else pytree.unflatten(tree, wrapped)
        at += len(ts)
    return tuple(out)


def if_(cond, then_fn: Callable, else_fn: Callable, init: tuple, names: Sequence[str], loc: Location,
        assigned: Sequence = (), assigned_else: Sequence = ()) -> tuple:
    """An `if`: Python on a compile-time condition, else scf.if carrying `names`; `assigned`,
    `assigned_else`: where each branch last assigns each (errors)."""
    if not isinstance(cond, Numeric):
        return then_fn(*init) if cond else else_fn(*init)
    b = ir.require(what="a dynamic if")
    carry = _Carry(names, init, "if", assigned, assigned_else)
    return _dynamic_if(b, cond, lambda: then_fn(*carry.copies()), lambda: else_fn(*carry.copies()), carry, loc)


def static_cond(cond, loc: Location, reason: str):
    """The condition of an `if`/`while` that must stay Python (it holds return/break/continue or
    a while-else)."""
    if isinstance(cond, Numeric):
        if reason == "else":
            raise DSLError(LOOP_ELSE, "a dynamic `while` loop cannot have an `else` clause", loc,
                           "move the else code after the loop")
        raise DSLError(EARLY_EXIT, f"`{reason}` inside dynamic control flow: IR regions cannot exit early", loc,
                       "assign a result variable and let the region end (a flag for loops), or make the condition "
                       "compile-time with cute.const_expr")
    return cond


def ifexp(cond, then_fn: Callable, else_fn: Callable, loc: Location):
    if not isinstance(cond, Numeric):
        return then_fn() if cond else else_fn()
    b = ir.require(what="a dynamic conditional expression")
    carry = _Carry(["<conditional expression>"], (0,), "conditional expression")
    return _dynamic_if(b, cond, lambda: (then_fn(),), lambda: (else_fn(),), carry, loc)[0]


# -- boolean operators --------------------------------------------------------------------------

def and_(*operands: Callable, loc: Location):
    value = operands[0]()
    for nxt in operands[1:]:
        if not isinstance(value, Numeric):
            if not value:
                return value
            value = nxt()
            continue
        rest = nxt
        value = ifexp(value, lambda: convert(as_numeric(rest()), Boolean), lambda: False, loc)
    return value


def or_(*operands: Callable, loc: Location):
    value = operands[0]()
    for nxt in operands[1:]:
        if not isinstance(value, Numeric):
            if value:
                return value
            value = nxt()
            continue
        rest = nxt
        value = ifexp(value, lambda: True, lambda: convert(as_numeric(rest()), Boolean), loc)
    return value


def not_(value):
    if isinstance(value, Numeric):
        return convert(value, Boolean) == False  # noqa: E712 - a DSL comparison
    return not value


_COMPARE = {
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "is": lambda a, b: a is b,
    "is not": lambda a, b: a is not b, "in": lambda a, b: a in b, "not in": lambda a, b: a not in b,
}


def compare_chain(operands: Sequence[Callable], ops: Sequence[str], loc: Location):
    """`a < b < c`: each operand evaluated once, later comparisons only if earlier ones hold."""
    left = operands[0]()
    checks = []
    for op, get in zip(ops, operands[1:]):
        def check(op=op, get=get):
            nonlocal left
            right = get()
            result = _COMPARE[op](left, right)
            left = right
            return result
        checks.append(check)
    return and_(*checks, loc=loc)


# -- while --------------------------------------------------------------------------------------

def while_loop(cond_fn: Callable, body: Callable, init: tuple, names: Sequence[str], loc: Location,
               assigned: Sequence = ()) -> tuple:
    b = ir.current()
    values = init
    mark = b.mark() if b else None
    first = cond_fn(*values)
    while not isinstance(first, Numeric):  # a compile-time loop, as in Python
        if not first:
            return values
        values = body(*values)
        mark = b.mark() if b else None
        first = cond_fn(*values)
        if isinstance(first, Numeric) and values is not init:
            raise DSLError(NOT_CONSTEXPR, "this `while` condition was compile-time but became dynamic after an "
                           "iteration", loc, "make the loop variables DSL values before the loop (e.g. "
                           "i = cute.Int32(0)) so the loop is dynamic from the start")
    b.rollback(mark)  # the condition is traced again inside the loop's `before` region
    carry = _Carry(names, values, "while loop", assigned)
    start = carry.initial_values()
    before = _block_args(b, carry.types)
    with b.region() as before_lines:
        c = cond_fn(*carry.inputs(before))
        if not isinstance(c, Numeric):
            c = as_numeric(bool(c))
        c = convert(c, Boolean)
        passed = ", ".join(a.ir.name for a in before)
        types = ", ".join(t.mlir for t in carry.types)
        b.emit(f"scf.condition({c.ir.name}) {passed} : {types}" if before else f"scf.condition({c.ir.name})")
    after = _block_args(b, carry.types)
    with b.region() as after_lines:
        out = carry.outputs(body(*carry.inputs(after)), "at the end of an iteration")
        _yield(b, out)
    header = ", ".join(f"{a.ir.name} = {v.ir.name}" for a, v in zip(before, start))
    sig = ", ".join(t.mlir for t in carry.types)
    block = ", ".join(f"{a.ir.name}: {a.ir.type}" for a in after)
    text = (f"scf.while ({header}) : ({sig}) -> ({sig}) {{\n{ir.indent(before_lines)}\n}} do {{\n"
            f"^bb0({block}):\n{ir.indent(after_lines)}\n}}")
    results = b.op_results(text, [t.mlir for t in carry.types], loc.mlir())
    return carry.results([t._wrap(r) for t, r in zip(carry.types, results)], loc)


# -- builtins that know DSL values ----------------------------------------------------------------

def _fold(builtin, op: str, args):
    values = args[0] if len(args) == 1 else args
    if not any(isinstance(v, Numeric) for v in (values if isinstance(values, (list, tuple)) else [])):
        return builtin(*args)
    values = list(values)
    result = values[0]
    for v in values[1:]:
        result = where(v < result, v, result) if op == "min" else where(v > result, v, result)
    return result


def min(*args, **kwargs):  # noqa: A001
    return builtins.min(*args, **kwargs) if kwargs else _fold(builtins.min, "min", args)


def max(*args, **kwargs):  # noqa: A001
    return builtins.max(*args, **kwargs) if kwargs else _fold(builtins.max, "max", args)
