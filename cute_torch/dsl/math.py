"""`cute.math`: elementwise math on DSL scalars (Python numbers fold at compile time).

Float16/BFloat16/Float8 arguments are computed in Float32 and rounded back (Float8 results
stay Float32); integer arguments are converted to Float32 (Float64 for 64-bit integers).
"""

from __future__ import annotations

import builtins
import math as _py

from .numeric import Float32, Float64, Numeric, as_numeric, convert, where


def _float_type(t):
    if t.is_float:
        return t
    return Float64 if t.width == 64 else Float32


def _compute(t):
    return t if t in (Float32, Float64) else Float32


def _elementwise(fn):
    """Lets a scalar function take TensorSSAs (applied element by element, position by
    position). Arguments are told apart by position, never compared: `==` on a TensorSSA
    emits code, and the same TensorSSA may come twice (`max(v, v)`)."""
    def wrapper(*args):
        from .tensor_ssa import TensorSSA
        lead = next((i for i, a in enumerate(args) if isinstance(a, TensorSSA)), None)
        if lead is None:
            return fn(*args)
        others = args[:lead] + args[lead + 1:]

        def element(x, *rest):
            return fn(*rest[:lead], x, *rest[lead:])
        return args[lead]._map(element, *others)
    wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
    return wrapper


def _unary(op: str, python):
    @_elementwise
    def fn(x):
        if not isinstance(x, Numeric):
            return python(x)
        out_t = _float_type(type(x))
        ct = _compute(out_t)
        v = convert(x, ct)
        r = ct.wrap_op(f"math.{op} {v.ir.name} : {ct.mlir}")
        return r if out_t.storage_only else convert(r, out_t)
    fn.__name__ = op
    fn.__doc__ = f"Elementwise {op} (math.{op})."
    return fn


exp = _unary("exp", _py.exp)
log = _unary("log", _py.log)
log2 = _unary("log2", _py.log2)
sqrt = _unary("sqrt", _py.sqrt)
rsqrt = _unary("rsqrt", lambda x: 1.0 / _py.sqrt(x))
_tanh = _unary("tanh", _py.tanh)
_exp2 = _unary("exp2", lambda x: 2.0 ** x)


def _approx(ptx: str, accurate):
    """The hardware's approximate form of `accurate` (one MUFU instruction, PTX `ptx`) for
    Float32 and narrower; Float64 and Python numbers stay accurate."""
    @_elementwise
    def fn(x):
        out_t = _float_type(type(x)) if isinstance(x, Numeric) else None
        if out_t in (None, Float64):
            return accurate(x)
        v = convert(x, Float32)
        r = Float32.wrap_op(f'llvm.inline_asm "{ptx} $0, $1;", "=f,f" {v.ir.name} : (f32) -> f32')
        return r if out_t.storage_only else convert(r, out_t)
    return fn


_tanh_approx = _approx("tanh.approx.f32", _tanh)
_exp2_approx = _approx("ex2.approx.ftz.f32", _exp2)


def tanh(x, fastmath: bool = False):
    """Elementwise tanh (math.tanh: libdevice's, within 2 ulp). `fastmath` (CuTe DSL's name):
    the hardware's tanh.approx.f32 instead, one MUFU instruction where the accurate form
    takes about 20, with a relative error of at most 2^-10.99 (PTX ISA): enough for a result
    rounded to 16 bits, though not for 1 + tanh(x) where tanh(x) is near -1 (cancellation).
    Float64 is always computed accurately."""
    return _tanh_approx(x) if fastmath else _tanh(x)


def exp2(x, fastmath: bool = False):
    """Elementwise 2^x (math.exp2: libdevice's, which scales denormal results, about six SASS
    instructions). `fastmath`: the hardware's ex2.approx.ftz.f32 alone, one MUFU instruction,
    within 2 ulp of 2^x (PTX ISA) but flushing subnormal arguments and results to zero (2^x
    below 2^-126 gives 0): right for exponentials about a row's max, which lie in [0, 1].
    Float64 is always computed accurately."""
    return _exp2_approx(x) if fastmath else _exp2(x)


expm1 = _unary("expm1", _py.expm1)
log1p = _unary("log1p", _py.log1p)
erf = _unary("erf", _py.erf)
sin = _unary("sin", _py.sin)
cos = _unary("cos", _py.cos)
floor = _unary("floor", _py.floor)
ceil = _unary("ceil", _py.ceil)


# The NVVM lowering has no cosh and sinh: they are built on exp and expm1 (libdevice's).
@_elementwise
def cosh(x):
    """Elementwise cosh: (e + 1/e) / 2 with e = exp(|x|), no cancellation (both terms are
    positive); inf from |x| > 88.7, where exp(|x|) overflows (float32's cosh does at 89.4)."""
    if not isinstance(x, Numeric):
        return _py.cosh(x)
    e = exp(builtins.abs(x))
    return 0.5 * e + 0.5 / e


@_elementwise
def sinh(x):
    """Elementwise sinh: sign(x) (u + u / (u + 1)) / 2 with u = expm1(|x|), accurate near 0
    where e - 1/e would cancel; inf from |x| > 88.7."""
    if not isinstance(x, Numeric):
        return _py.sinh(x)
    u = expm1(builtins.abs(x))
    s = 0.5 * (u + where(u < 1e30, u / (u + 1.0), 1.0))       # u = inf: no inf / inf
    return where(x < 0, -s, s)


@_elementwise
def fma(a, b, c):
    """a * b + c with one rounding."""
    if not any(isinstance(v, Numeric) for v in (a, b, c)):
        return a * b + c
    t = _float_type(type(next(v for v in (a, b, c) if isinstance(v, Numeric))))
    ct = _compute(t)
    x, y, z = (convert(as_numeric(v, ct), ct) for v in (a, b, c))
    r = ct.wrap_op(f"math.fma {x.ir.name}, {y.ir.name}, {z.ir.name} : {ct.mlir}")
    return r if t.storage_only else convert(r, t)


@_elementwise
def abs(x):  # noqa: A001 - CuTe DSL's name
    return builtins.abs(x)


@_elementwise
def min(a, b):  # noqa: A001
    if not isinstance(a, Numeric) and not isinstance(b, Numeric):
        return builtins.min(a, b)
    return where(b < a, b, a)


@_elementwise
def max(a, b):  # noqa: A001
    if not isinstance(a, Numeric) and not isinstance(b, Numeric):
        return builtins.max(a, b)
    return where(b > a, b, a)


def _minmax(op: str, a, b):
    v, w = convert(as_numeric(a, Float32), Float32), convert(as_numeric(b, Float32), Float32)
    return Float32.wrap_op(f"arith.{op} {v.ir.name}, {w.ir.name} : f32")


def fmax(a, b):
    """max of two Float32 (max.f32: a NaN operand yields the other one); cute.arch.fmax."""
    return _minmax("maxnumf", a, b)


def fmin(a, b):
    """min of two Float32 (min.f32: a NaN operand yields the other one); cute.arch.fmin."""
    return _minmax("minnumf", a, b)
