"""A generator of random, valid DSL programs (issue 19's differential fuzzing, CPU tier first).

Each program is one kernel over a thread's scalars: Int32 and Float32 variables, arithmetic,
casts, comparisons, `cute.where`, math functions, dynamic `if`/`elif`/`else`, `for` over dynamic
and constant ranges (negative steps, `unroll=`), data-dependent `while`, `const_expr` branches,
`range_constexpr`, and a helper function, with variables carried through all of them. The
program is also plain Python over scalars (the DSL names map to Python ones in `PYTHON_PRELUDE`),
which is what a GPU tier compares against.
"""

from __future__ import annotations

import random

HEADER = '''import cute_torch as cute


def helper(a, b):
    return a * 2 + b


@cute.kernel
def fuzz_kernel(out: cute.Tensor, x: cute.Tensor, n: cute.Int32):
    t = cute.arch.thread_idx()[0]
    i0 = t + 1
    i1 = n - t
    f0 = x[t]
    f1 = cute.Float32(t) * 0.5
'''

FOOTER = '''    out[t] = {result}


@cute.jit
def fuzz_host(out: cute.Tensor, x: cute.Tensor, n: cute.Int32):
    fuzz_kernel(out, x, n).launch(grid=(1, 1, 1), block=(32, 1, 1))
'''


class Program:
    """`floats=False` makes integer-only programs (exact on both sides: the GPU tier's kind)."""

    def __init__(self, seed: int, statements: int = 8, floats: bool = True):
        self.rng = random.Random(seed)
        self.use_floats = floats
        self.ints, self.floats = ["i0", "i1"], ["f0", "f1"]
        self.fixed: set = set()   # loop counters and loop variables: read, never assigned
        self.lines: list[str] = []
        self.depth = 0
        self.fresh = 0
        for _ in range(statements):
            self.statement(1)

    # -- expressions ------------------------------------------------------------------------------
    def int_expr(self, depth: int = 0) -> str:
        r = self.rng.random()
        if depth > 2 or r < 0.3:
            return self.rng.choice(self.ints + [str(self.rng.randint(-5, 9))])
        if r < 0.6:
            op = self.rng.choice(["+", "-", "*"])
            return f"({self.int_expr(depth + 1)} {op} {self.int_expr(depth + 1)})"
        if r < 0.7:
            return f"({self.int_expr(depth + 1)} % {self.rng.randint(2, 7)})"
        if r < 0.8 and self.use_floats:
            return f"cute.Int32({self.float_expr(depth + 1)})"
        if r < 0.9:
            return f"cute.where({self.cond(depth + 1)}, {self.int_expr(depth + 1)}, {self.int_expr(depth + 1)})"
        return f"helper({self.int_expr(depth + 1)}, {self.int_expr(depth + 1)})"

    def float_expr(self, depth: int = 0) -> str:
        r = self.rng.random()
        if depth > 2 or r < 0.3:
            return self.rng.choice(self.floats + [repr(round(self.rng.uniform(-3, 3), 2))])
        if r < 0.55:
            op = self.rng.choice(["+", "-", "*"])
            return f"({self.float_expr(depth + 1)} {op} {self.float_expr(depth + 1)})"
        if r < 0.65:
            return f"cute.Float32({self.int_expr(depth + 1)})"
        if r < 0.8:
            fn = self.rng.choice(["cute.math.exp", "cute.math.sqrt", "cute.math.tanh", "cute.math.log"])
            inner = self.float_expr(depth + 1)
            if fn in ("cute.math.sqrt", "cute.math.log"):
                inner = f"(abs({inner}) + 1.0)"
            if fn == "cute.math.exp":
                inner = f"cute.math.tanh({inner})"          # bounded: no overflow to compare
            return f"{fn}({inner})"
        if r < 0.9:
            return f"cute.where({self.cond(depth + 1)}, {self.float_expr(depth + 1)}, {self.float_expr(depth + 1)})"
        return f"helper({self.float_expr(depth + 1)}, {self.float_expr(depth + 1)})"

    def cond(self, depth: int = 0) -> str:
        if self.rng.random() < 0.5 or not self.use_floats:
            return f"{self.int_expr(depth + 1)} {self.rng.choice(['<', '>', '<=', '>=', '==', '!='])} " \
                   f"{self.int_expr(depth + 1)}"
        return f"{self.float_expr(depth + 1)} {self.rng.choice(['<', '>'])} {self.float_expr(depth + 1)}"

    # -- statements -------------------------------------------------------------------------------
    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def assign(self, indent: int) -> None:
        if self.rng.random() < 0.5 or not self.use_floats:
            target = self.rng.choice([v for v in self.ints if v not in self.fixed])
            self.emit(indent, f"{target} = {self.int_expr()}")
        else:
            target = self.rng.choice(self.floats)
            self.emit(indent, f"{target} = {self.float_expr()}")

    def statement(self, indent: int) -> None:
        r = self.rng.random()
        if indent > 3 or r < 0.35:
            self.assign(indent)
        elif r < 0.5:
            self.emit(indent, f"if {self.cond()}:")
            self.block(indent + 1)
            if self.rng.random() < 0.4:
                self.emit(indent, f"elif {self.cond()}:")
                self.block(indent + 1)
            if self.rng.random() < 0.6:
                self.emit(indent, "else:")
                self.block(indent + 1)
        elif r < 0.65:
            var = f"k{self.fresh}"
            self.fresh += 1
            kind = self.rng.random()
            if kind < 0.4:
                self.emit(indent, f"for {var} in range(n % 5):")
            elif kind < 0.6:
                self.emit(indent, f"for {var} in range(6, -1, -2):")
            elif kind < 0.8:
                self.emit(indent, f"for {var} in cute.range(0, n % 7, 1, unroll=2):")
            else:
                self.emit(indent, f"for {var} in cute.range_constexpr(3):")
            self.ints.append(var)
            self.fixed.add(var)
            self.block(indent + 1)
            self.ints.remove(var)
        elif r < 0.75:
            counter = f"w{self.fresh}"
            self.fresh += 1
            self.emit(indent, f"{counter} = 0")
            self.emit(indent, f"while {counter} < n % 4 + 1:")
            self.emit(indent + 1, f"{counter} = {counter} + 1")
            self.ints.append(counter)
            self.fixed.add(counter)
            self.block(indent + 1)
            self.ints.remove(counter)
        elif r < 0.85:
            self.emit(indent, f"if cute.const_expr({self.rng.choice(['True', 'False'])}):")
            self.block(indent + 1)
            self.emit(indent, "else:")
            self.block(indent + 1)
        elif indent == 1 and self.use_floats:  # a new variable (only at the top: one made in a branch ends with it)
            fresh = f"f{len(self.floats)}"
            self.emit(indent, f"{fresh} = {self.float_expr()}")
            self.floats.append(fresh)
        else:
            self.assign(indent)

    def block(self, indent: int) -> None:
        for _ in range(self.rng.randint(1, 3)):
            self.statement(indent)

    def source(self) -> str:
        if self.use_floats:
            result = f"{self.rng.choice(self.floats)} + cute.Float32({self.rng.choice(self.ints)})"
        else:
            result = f"cute.Float32({self.rng.choice(self.ints)} % 1000)"   # exact in fp32
        return HEADER + "\n".join(self.lines) + "\n" + FOOTER.format(result=result)


# -- the reference: the same source run as Python, per thread, with the DSL's integer semantics --

def _wrap(value: int) -> "I32":
    return I32(((int(value) + (1 << 31)) % (1 << 32)) - (1 << 31))


class I32(int):
    """An Int32 as the DSL computes it: arithmetic wraps around, % and // floor like Python's."""

    def __add__(self, o): return _wrap(int(self) + int(o))
    def __radd__(self, o): return _wrap(int(o) + int(self))
    def __sub__(self, o): return _wrap(int(self) - int(o))
    def __rsub__(self, o): return _wrap(int(o) - int(self))
    def __mul__(self, o): return _wrap(int(self) * int(o))
    def __rmul__(self, o): return _wrap(int(o) * int(self))
    def __mod__(self, o): return _wrap(int(self) % int(o))
    def __rmod__(self, o): return _wrap(int(o) % int(self))
    def __neg__(self): return _wrap(-int(self))


class _Arch:
    thread = 0

    def thread_idx(self):
        return (I32(self.thread), I32(0), I32(0))


class _Cute:
    """The names a generated integer program uses, as plain Python."""

    Tensor = Int32 = Float32 = Constexpr = object
    arch = _Arch()

    @staticmethod
    def kernel(fn):
        return fn

    @staticmethod
    def jit(fn):
        return fn

    @staticmethod
    def where(cond, a, b):
        return a if cond else b

    @staticmethod
    def const_expr(value):
        return value

    @staticmethod
    def range(*args, unroll=1, unroll_full=False):
        return range(*(int(a) for a in args))

    @staticmethod
    def range_constexpr(*args):
        return range(*args)


def reference(source: str, n: int, threads: int = 32) -> list:
    """out[t] for t < threads of an integer-only program, run as Python."""
    fake = _Cute()
    fake.Int32 = _wrap
    fake.Float32 = float
    namespace: dict = {}
    exec(compile(source.replace("import cute_torch as cute", ""), "<fuzz>", "exec"), {"cute": fake}, namespace)
    kernel, out = namespace["fuzz_kernel"], [None] * threads
    for t in range(threads):
        fake.arch.thread = t
        kernel.__globals__["helper"] = namespace["helper"]
        kernel(out, [0.0] * threads, I32(n))
    return out
