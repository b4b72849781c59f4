"""Numeric types of the DSL: dynamic scalars whose operators emit arith ops.

Promotion rules (docs/language.md):
- A Python literal adapts to the DSL operand: `Int32 + 1 -> Int32`, `Int32 + 1.5 -> Float32`,
  `Float16 * 2 -> Float16`.
- Two DSL integers: the wider wins; at equal width, unsigned wins (C's rule). Boolean counts as
  the narrowest unsigned integer for arithmetic, and stays Boolean for `& | ^`.
- An integer and a float: the float. Two floats: the wider; Float16 with BFloat16 gives Float32.
- Float8 types are storage types: arithmetic on them happens in Float32 (the result is Float32).
  BFloat16 arithmetic is done in Float32 and rounded back (exact for + - * /).
- `/` is true division (integers become Float32, or Float64 for 64-bit ones); `//` and `%`
  follow Python (floor) semantics for signed integers and floats.
"""

from __future__ import annotations

import math
import struct
from typing import Any

from . import ir
from .diagnostics import (NOT_CONSTEXPR, UNREWRITTEN_CONTROL_FLOW, UNSUPPORTED_BUILTIN, UNSUPPORTED_TYPE,
                          DSLError, user_location)


class NumericMeta(type):
    def __repr__(cls) -> str:
        return f"cute.{cls.__name__}"


class Numeric(metaclass=NumericMeta):
    """A run-time scalar. Inside DSL code it is an SSA value; built outside one (e.g.
    `cute.Int32(5)` passed to a @cute.jit function) it holds the Python value to pass."""

    __slots__ = ("_value", "_const", "_divby")   # _divby: set by assume() only
    mlir: str = ""  # storage type in IR
    width: int = 0
    is_float = False
    storage_only = False
    signed = True
    torch_name = ""

    def __init__(self, value: Any = 0):
        self._value: ir.Value | None = None
        self._const = None
        if isinstance(value, ir.Value):
            self._value = value
        elif isinstance(value, Numeric):
            converted = value.to(type(self))
            self._value, self._const = converted._value, converted._const
        elif isinstance(value, (bool, int, float)):
            if ir.current() is None:
                self._const = _check_literal(type(self), value)
            else:
                self._value = constant(type(self), value)
        else:
            _fail_if_undefined(value)
            raise DSLError(UNSUPPORTED_TYPE, f"cannot make a {type(self).__name__} from {type(value).__name__}")

    @classmethod
    def _wrap(cls, value: ir.Value) -> "Numeric":
        obj = cls.__new__(cls)
        obj._value, obj._const = value, None
        return obj

    @property
    def ir(self) -> ir.Value:
        if self._value is None:
            ir.require(what="a DSL scalar")
            return constant(type(self), self._const)
        return self._value

    # -- Python protocol: dynamic values have no Python value ---------------------------------
    def __repr__(self) -> str:
        return "?" if self._value is not None or self._const is None else f"{type(self).__name__}({self._const})"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return str(self)

    def __bool__(self) -> bool:
        frame = user_location()
        raise DSLError(
            UNREWRITTEN_CONTROL_FLOW,
            f"a dynamic {type(self).__name__} is used as a Python bool, in code the preprocessor did not rewrite "
            "(a plain Python helper, a @cute.jit(preprocess=False) function, or an `assert`)",
            frame,
            "decorate the helper with @cute.jit so its if/while become IR, use cute.where(c, a, b), "
            "or make the value compile-time (cute.Constexpr)")

    def _not_constexpr(self, what: str):
        raise DSLError(NOT_CONSTEXPR, f"{what} needs a compile-time value, got a dynamic {type(self).__name__}",
                       user_location(),
                       "pass it as a Python value annotated cute.Constexpr, or use the dynamic value in DSL ops")

    def __index__(self) -> int:
        self._not_constexpr("this Python operation (an index, range() or a size)")

    def __int__(self) -> int:
        raise DSLError(UNSUPPORTED_BUILTIN, f"int() of a dynamic {type(self).__name__} is not supported",
                       user_location(), "use x.to(cute.Int32) for a run-time conversion")

    def __float__(self) -> float:
        raise DSLError(UNSUPPORTED_BUILTIN, f"float() of a dynamic {type(self).__name__} is not supported",
                       user_location(), "use x.to(cute.Float32) for a run-time conversion")

    def __hash__(self) -> int:
        raise DSLError(UNSUPPORTED_BUILTIN, f"a dynamic {type(self).__name__} cannot be hashed (dict key, set)",
                       user_location(), "key Python containers by compile-time values")

    def __round__(self, ndigits=None):
        raise DSLError(UNSUPPORTED_BUILTIN, "round() of a dynamic value is not supported", user_location(),
                       "use cute.math.floor / cute.math.ceil")

    def __len__(self) -> int:
        raise DSLError(UNSUPPORTED_BUILTIN, "len() of a dynamic value is not supported", user_location())

    # -- conversions ----------------------------------------------------------------------------
    def to(self, dtype: type["Numeric"]) -> "Numeric":
        return convert(self, dtype)

    # -- operators ------------------------------------------------------------------------------
    def __add__(self, o): return _arith(self, o, "add")
    def __radd__(self, o): return _arith(o, self, "add")
    def __sub__(self, o): return _arith(self, o, "sub")
    def __rsub__(self, o): return _arith(o, self, "sub")
    def __mul__(self, o): return _arith(self, o, "mul")
    def __rmul__(self, o): return _arith(o, self, "mul")
    def __truediv__(self, o): return _truediv(self, o)
    def __rtruediv__(self, o): return _truediv(o, self)
    def __floordiv__(self, o): return _arith(self, o, "floordiv")
    def __rfloordiv__(self, o): return _arith(o, self, "floordiv")
    def __mod__(self, o): return _arith(self, o, "mod")
    def __rmod__(self, o): return _arith(o, self, "mod")
    def __pow__(self, o): return _pow(self, o)
    def __and__(self, o): return _bitwise(self, o, "andi")
    def __rand__(self, o): return _bitwise(o, self, "andi")
    def __or__(self, o): return _bitwise(self, o, "ori")
    def __ror__(self, o): return _bitwise(o, self, "ori")
    def __xor__(self, o): return _bitwise(self, o, "xori")
    def __rxor__(self, o): return _bitwise(o, self, "xori")
    def __lshift__(self, o): return _shift(self, o, "shli")
    def __rlshift__(self, o): return _shift(o, self, "shli")
    def __rshift__(self, o): return _shift(self, o, "shr")
    def __rrshift__(self, o): return _shift(o, self, "shr")
    def __lt__(self, o): return _compare(self, o, "lt")
    def __le__(self, o): return _compare(self, o, "le")
    def __gt__(self, o): return _compare(self, o, "gt")
    def __ge__(self, o): return _compare(self, o, "ge")
    def __eq__(self, o): return _compare(self, o, "eq")
    def __ne__(self, o): return _compare(self, o, "ne")

    def __neg__(self):
        t = type(self)
        if t.is_float:
            a, ct = _compute_operand(self)
            return _result(ct.wrap_op(f"arith.negf {a.name} : {ct.mlir}"), t)
        return _arith(0, self, "sub")

    def __pos__(self):
        return self

    def __abs__(self):
        t = type(self)
        if t.is_float:
            a, ct = _compute_operand(self)
            return _result(ct.wrap_op(f"math.absf {a.name} : {ct.mlir}"), t)
        if not t.signed:
            return self
        return where(self < 0, -self, self)

    def __invert__(self):
        t = type(self)
        if t.is_float:
            raise DSLError(UNSUPPORTED_TYPE, f"~ is not defined for {t.__name__}", user_location())
        ones = "true" if t is Boolean else "-1"
        b = ir.require()
        c = b.op(f"arith.constant {ones} : {t.mlir}", t.mlir)
        return t._wrap(b.op(f"arith.xori {self.ir.name}, {c.name} : {t.mlir}", t.mlir))

    @classmethod
    def wrap_op(cls, text: str) -> "Numeric":
        return cls._wrap(ir.require().op(text, cls.mlir))


class Integer(Numeric):
    __slots__ = ()


class Float(Numeric):
    __slots__ = ()
    is_float = True


def _int_type(name, width, signed, torch_name):
    return type(name, (Integer,), {"__slots__": (), "mlir": f"i{width}", "width": width, "signed": signed,
                                   "torch_name": torch_name})


Boolean = type("Boolean", (Integer,), {"__slots__": (), "mlir": "i1", "width": 1, "signed": False,
                                       "torch_name": "bool"})
Int8 = _int_type("Int8", 8, True, "int8")
Int16 = _int_type("Int16", 16, True, "int16")
Int32 = _int_type("Int32", 32, True, "int32")
Int64 = _int_type("Int64", 64, True, "int64")
Uint8 = _int_type("Uint8", 8, False, "uint8")
Uint16 = _int_type("Uint16", 16, False, "uint16")
Uint32 = _int_type("Uint32", 32, False, "uint32")
Uint64 = _int_type("Uint64", 64, False, "uint64")


def _float_type(name, mlir, width, torch_name, storage_only=False):
    return type(name, (Float,), {"__slots__": (), "mlir": mlir, "width": width, "torch_name": torch_name,
                                 "storage_only": storage_only})


Float16 = _float_type("Float16", "f16", 16, "float16")
# BFloat16 is MLIR's bf16 (LLVM's bfloat): loads, stores, vectors and, on the GPU, cvt to and from
# f32 come from LLVM; its arithmetic happens in Float32 (_compute_type), as torch's does.
BFloat16 = _float_type("BFloat16", "bf16", 16, "bfloat16")
Float32 = _float_type("Float32", "f32", 32, "float32")
Float64 = _float_type("Float64", "f64", 64, "float64")
# Float8 values live in IR as i8 bit patterns; conversions use PTX cvt (sm_89+).
Float8E4M3FN = _float_type("Float8E4M3FN", "i8", 8, "float8_e4m3fn", storage_only=True)
Float8E5M2 = _float_type("Float8E5M2", "i8", 8, "float8_e5m2", storage_only=True)

ALL_TYPES = (Boolean, Int8, Int16, Int32, Int64, Uint8, Uint16, Uint32, Uint64, Float16, BFloat16, Float32,
             Float64, Float8E4M3FN, Float8E5M2)
BY_TORCH_NAME = {t.torch_name: t for t in ALL_TYPES}


# -- literals -----------------------------------------------------------------------------------

def _check_literal(t: type[Numeric], value):
    if t.is_float:
        return float(value)
    if t is Boolean:
        return bool(value)
    value = int(value)
    lo, hi = (-(1 << (t.width - 1)), (1 << (t.width - 1)) - 1) if t.signed else (0, (1 << t.width) - 1)
    if not lo <= value <= hi:
        raise DSLError(UNSUPPORTED_TYPE, f"the literal {value} does not fit in {t.__name__} ({lo}..{hi})",
                       user_location(), f"use a wider type, e.g. cute.Int64({value})")
    return value


def _bf16_bits(value: float) -> int:
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    if math.isnan(value):
        return 0x7FC0
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF  # round to nearest even


def float_literal(t: type[Numeric], value: float) -> str:
    """An exact MLIR spelling of `value` rounded to `t`: the hexadecimal bit pattern."""
    if t is Float32:
        return "0x%08X" % struct.unpack("<I", struct.pack("<f", value))[0]
    if t is Float64:
        return "0x%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]
    if t is Float16:
        return "0x%04X" % struct.unpack("<H", struct.pack("<e", value))[0]
    if t is BFloat16:
        return "0x%04X" % _bf16_bits(value)
    raise AssertionError(t)


def constant(t: type[Numeric], value) -> ir.Value:
    b = ir.require(what="a DSL constant")
    value = _check_literal(t, value)
    if t.storage_only:
        return convert(Float32._wrap(constant(Float32, value)), t).ir
    if t.is_float:
        return b.constant(f"arith.constant {float_literal(t, value)} : {t.mlir}", t.mlir)
    if t is Boolean:
        return b.constant(f"arith.constant {'true' if value else 'false'}", "i1")
    if not t.signed and value >= 1 << (t.width - 1):
        value -= 1 << t.width
    return b.constant(f"arith.constant {value} : {t.mlir}", t.mlir)


def as_numeric(value, like: type[Numeric] | None = None) -> Numeric:
    """A DSL value for `value`: Numerics pass through; Python scalars become `like` (or the
    default type of their kind: bool -> Boolean, int -> Int32, float -> Float32)."""
    if isinstance(value, Numeric):
        return value
    t = like or python_type(value)
    if isinstance(value, float) and not t.is_float:
        t = Float32
    return t(value)


def _fail_if_undefined(value) -> None:
    if type(value).__name__ == "Undefined":
        type(value)._fail(value)  # a variable with no value here: CUTE-E103


def python_type(value) -> type[Numeric]:
    _fail_if_undefined(value)
    if isinstance(value, bool):
        return Boolean
    if isinstance(value, int):
        return Int32 if -(1 << 31) <= value < (1 << 31) else Int64
    if isinstance(value, float):
        return Float32
    raise DSLError(UNSUPPORTED_TYPE, f"{type(value).__name__} is not a DSL scalar", user_location(),
                   "use a cute numeric type (cute.Int32, cute.Float32, ...) or a tensor")


# -- promotion ----------------------------------------------------------------------------------

def promote(a: type[Numeric], b: type[Numeric]) -> type[Numeric]:
    if a is b:
        return a
    if a.is_float or b.is_float:
        floats = [t if not t.storage_only else Float32 for t in (a, b) if t.is_float]
        if len(floats) == 1:
            return floats[0]
        x, y = floats
        if x is y:
            return x
        if {x, y} == {Float16, BFloat16}:
            return Float32
        return x if x.width > y.width else y
    if a.width != b.width:
        return a if a.width > b.width else b
    return a if not a.signed else b


def _operands(x, y) -> tuple[Numeric, Numeric, type[Numeric]]:
    """Both operands as DSL values of their common type."""
    if not isinstance(x, Numeric):
        t = type(y)
        if isinstance(x, float) and not t.is_float:
            t = Float32
        x = as_numeric(x, t)
    if not isinstance(y, Numeric):
        t = type(x)
        if isinstance(y, float) and not t.is_float:
            t = Float32
        y = as_numeric(y, t)
    t = promote(type(x), type(y))
    return convert(x, t), convert(y, t), t


def _compute_type(t: type[Numeric]) -> type[Numeric]:
    """Where arithmetic on `t` happens: BFloat16 and Float8 in Float32, Boolean as itself."""
    if t is BFloat16 or t.storage_only:
        return Float32
    return t


def _compute_operand(x: Numeric) -> tuple[ir.Value, type[Numeric]]:
    ct = _compute_type(type(x))
    return convert(x, ct).ir, ct


def _result(value: Numeric, t: type[Numeric]) -> Numeric:
    if t.storage_only:
        return value  # Float8 arithmetic gives Float32
    return convert(value, t)


_INT_OPS = {"add": "arith.addi", "sub": "arith.subi", "mul": "arith.muli"}
_FLOAT_OPS = {"add": "arith.addf", "sub": "arith.subf", "mul": "arith.mulf"}


def _arith(x, y, op: str) -> Numeric:
    x, y, t = _operands(x, y)
    if t is Boolean:
        x, y, t = convert(x, Int32), convert(y, Int32), Int32
    ct = _compute_type(t)
    a, c = convert(x, ct), convert(y, ct)
    if op in _INT_OPS and not ct.is_float:
        return ct.wrap_op(f"{_INT_OPS[op]} {a.ir.name}, {c.ir.name} : {ct.mlir}")
    if op in _FLOAT_OPS:
        return _result(ct.wrap_op(f"{_FLOAT_OPS[op]} {a.ir.name}, {c.ir.name} : {ct.mlir}"), t)
    if op == "floordiv":
        if ct.is_float:
            q = ct.wrap_op(f"arith.divf {a.ir.name}, {c.ir.name} : {ct.mlir}")
            return _result(ct.wrap_op(f"math.floor {q.ir.name} : {ct.mlir}"), t)
        if not ct.signed:
            return ct.wrap_op(f"arith.divui {a.ir.name}, {c.ir.name} : {ct.mlir}")
        q = ct.wrap_op(f"arith.divsi {a.ir.name}, {c.ir.name} : {ct.mlir}")
        r = ct.wrap_op(f"arith.remsi {a.ir.name}, {c.ir.name} : {ct.mlir}")
        adjust = (r != 0) & ((r < 0) ^ (c < 0))
        return where(adjust, q - 1, q)
    if op == "mod":
        if ct.is_float:
            r = ct.wrap_op(f"arith.remf {a.ir.name}, {c.ir.name} : {ct.mlir}")
        elif not ct.signed:
            return ct.wrap_op(f"arith.remui {a.ir.name}, {c.ir.name} : {ct.mlir}")
        else:
            r = ct.wrap_op(f"arith.remsi {a.ir.name}, {c.ir.name} : {ct.mlir}")
        adjust = (r != 0) & ((r < 0) ^ (c < 0))
        return _result(where(adjust, r + c, r), t)
    raise AssertionError(op)


def _truediv(x, y) -> Numeric:
    x, y, t = _operands(x, y)
    if not t.is_float:
        t = Float64 if t.width == 64 else Float32
    ct = _compute_type(t)
    a, c = convert(x, ct), convert(y, ct)
    return _result(ct.wrap_op(f"arith.divf {a.ir.name}, {c.ir.name} : {ct.mlir}"), t)


def _pow(x, y) -> Numeric:
    if isinstance(y, int) and not isinstance(y, bool) and 0 <= y <= 64 and not type(x).is_float:
        result = as_numeric(1, type(x))
        for _ in range(y):
            result = result * x
        return result
    x, y, t = _operands(x, y)
    if not t.is_float:
        raise DSLError(UNSUPPORTED_TYPE, "integer ** needs a small non-negative Python exponent", user_location(),
                       "convert to a float type first")
    ct = _compute_type(t)
    a, c = convert(x, ct), convert(y, ct)
    return _result(ct.wrap_op(f"math.powf {a.ir.name}, {c.ir.name} : {ct.mlir}"), t)


def _bitwise(x, y, op: str) -> Numeric:
    x, y, t = _operands(x, y)
    if t.is_float:
        raise DSLError(UNSUPPORTED_TYPE, f"bitwise operators are not defined for {t.__name__}", user_location())
    return t.wrap_op(f"arith.{op} {x.ir.name}, {y.ir.name} : {t.mlir}")


def _shift(x, y, op: str) -> Numeric:
    if not isinstance(x, Numeric):
        x = as_numeric(x, type(y) if not type(y).is_float else None)
    if type(x).is_float or (isinstance(y, Numeric) and type(y).is_float):
        raise DSLError(UNSUPPORTED_TYPE, "shifts are defined for integers only", user_location())
    t = type(x)
    y = convert(as_numeric(y, t), t)
    if op == "shr":
        op = "shrsi" if t.signed else "shrui"
    return t.wrap_op(f"arith.{op} {x.ir.name}, {y.ir.name} : {t.mlir}")


_CMPI = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq", "ne": "ne"}
_CMPF = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}


def _compare(x, y, op: str) -> Numeric:
    if not isinstance(y, (Numeric, int, float)):
        return NotImplemented
    x, y, t = _operands(x, y)
    ct = _compute_type(t)
    a, c = convert(x, ct), convert(y, ct)
    if ct.is_float:
        pred = _CMPF[op]
        text = f"arith.cmpf {pred}, {a.ir.name}, {c.ir.name} : {ct.mlir}"
    else:
        pred = _CMPI[op]
        if not ct.signed and pred[0] == "s":
            pred = "u" + pred[1:]
        text = f"arith.cmpi {pred}, {a.ir.name}, {c.ir.name} : {ct.mlir}"
    return Boolean.wrap_op(text)


def where(cond, a, b):
    """`a` where `cond` else `b`: both sides are evaluated (arith.select). Python values give
    Python results; two cute.Pointers give a pointer (a kernel that picks its operands at run
    time, as the segmented pointwise kernel picks its segment's tensors)."""
    if not isinstance(cond, Numeric):
        return a if cond else b
    cond = convert(cond, Boolean)
    from .pointer import Pointer, select_pointer   # pointer.py imports this module
    if isinstance(a, Pointer) or isinstance(b, Pointer):
        return select_pointer(cond, a, b)
    if not isinstance(a, Numeric) and not isinstance(b, Numeric):
        a = as_numeric(a)  # two literals: the first sets the type, _operands adapts the second
    a, b, t = _operands(a, b)
    return t.wrap_op(f"arith.select {cond.ir.name}, {a.ir.name}, {b.ir.name} : {t.mlir}")


# -- conversions --------------------------------------------------------------------------------

_FP8_FROM_F16X2 = {Float8E4M3FN: "e4m3x2", Float8E5M2: "e5m2x2"}


def _fp8_to_f32(x: Numeric) -> Numeric:
    b = ir.require("device", "Float8 conversion")
    kind = _FP8_FROM_F16X2[type(x)]
    wide = b.op(f"arith.extui {x.ir.name} : i8 to i16", "i16")
    half2 = b.op(f'llvm.inline_asm has_side_effects "cvt.rn.f16x2.{kind} $0, $1;", "=r,h" {wide.name} '
                 f": (i16) -> i32", "i32")
    low = b.op(f"arith.trunci {half2.name} : i32 to i16", "i16")
    f16 = b.op(f"arith.bitcast {low.name} : i16 to f16", "f16")
    return Float32._wrap(b.op(f"arith.extf {f16.name} : f16 to f32", "f32"))


def _f32_to_fp8(x: Numeric, t: type[Numeric]) -> Numeric:
    b = ir.require("device", "Float8 conversion")
    kind = _FP8_FROM_F16X2[t]
    zero = constant(Float32, 0.0)
    packed = b.op(f'llvm.inline_asm has_side_effects "cvt.rn.satfinite.{kind}.f32 $0, $2, $1;", "=h,f,f" '
                  f"{x.ir.name}, {zero.name} : (f32, f32) -> i16", "i16")
    return t._wrap(b.op(f"arith.trunci {packed.name} : i16 to i8", "i8"))


def _bf16_to_f32(x: Numeric) -> Numeric:
    """Exact. On the GPU LLVM selects cvt.f32.bf16; the host JIT gets the bits shifted into place
    (x86 without AVX512-BF16 has no instruction for it)."""
    b = ir.require()
    if b.kind == "device":
        return Float32._wrap(b.op(f"arith.extf {x.ir.name} : bf16 to f32", "f32"))
    bits = b.op(f"arith.bitcast {x.ir.name} : bf16 to i16", "i16")
    wide = b.op(f"arith.extui {bits.name} : i16 to i32", "i32")
    sixteen = b.op("arith.constant 16 : i32", "i32")
    shifted = b.op(f"arith.shli {wide.name}, {sixteen.name} : i32", "i32")
    return Float32._wrap(b.op(f"arith.bitcast {shifted.name} : i32 to f32", "f32"))


def _f32_to_bf16(x: Numeric) -> Numeric:
    """Round to nearest even: cvt.rn.bf16.f32 on the GPU (LLVM selects it), integer arithmetic on
    the host (LLVM's x86 lowering would call __truncsfbf2, which the JIT cannot resolve)."""
    b = ir.require()
    if b.kind == "device":
        return BFloat16._wrap(b.op(f"arith.truncf {x.ir.name} : f32 to bf16", "bf16"))
    bits = Uint32._wrap(b.op(f"arith.bitcast {x.ir.name} : f32 to i32", "i32"))
    rounded = (bits + (0x7FFF + ((bits >> 16) & 1))) >> 16
    nan = x != x
    result = where(nan, Uint32(0x7FC0), rounded)
    narrow = b.op(f"arith.trunci {result.ir.name} : i32 to i16", "i16")
    return BFloat16._wrap(b.op(f"arith.bitcast {narrow.name} : i16 to bf16", "bf16"))


def convert(x, t: type[Numeric]) -> Numeric:
    """`x` as a `t`, with C's conversion semantics (float->int truncates toward zero)."""
    if not isinstance(x, Numeric):
        return as_numeric(x, t) if not (isinstance(x, float) and not t.is_float) else convert(Float32(x), t)
    s = type(x)
    if s is t:
        return x
    if x._value is None:  # a Python-held literal: convert in Python
        return t(x._const if t.is_float or not s.is_float else math.trunc(x._const))
    if s.storage_only:
        return convert(_fp8_to_f32(x), t)
    if t.storage_only:
        return _f32_to_fp8(convert(x, Float32), t)
    if s is BFloat16:
        return convert(_bf16_to_f32(x), t)
    if t is BFloat16:
        return _f32_to_bf16(convert(x, Float32))
    b = ir.require()
    v = x.ir
    if t is Boolean:
        return x != 0
    if s.is_float and t.is_float:
        op = "arith.extf" if t.width > s.width else "arith.truncf"
        return t._wrap(b.op(f"{op} {v.name} : {s.mlir} to {t.mlir}", t.mlir))
    if s.is_float:
        op = "arith.fptosi" if t.signed else "arith.fptoui"
        return t._wrap(b.op(f"{op} {v.name} : {s.mlir} to {t.mlir}", t.mlir))
    if t.is_float:
        op = "arith.sitofp" if s.signed and s is not Boolean else "arith.uitofp"
        return t._wrap(b.op(f"{op} {v.name} : {s.mlir} to {t.mlir}", t.mlir))
    if s.width == t.width:
        return t._wrap(v)
    if t.width < s.width:
        return t._wrap(b.op(f"arith.trunci {v.name} : {s.mlir} to {t.mlir}", t.mlir))
    op = "arith.extsi" if s.signed and s is not Boolean else "arith.extui"
    return t._wrap(b.op(f"{op} {v.name} : {s.mlir} to {t.mlir}", t.mlir))


def index_of(x) -> ir.Value:
    """An `index` value (launch dims, loop bounds) from a Python int or a DSL integer."""
    b = ir.require()
    if not isinstance(x, Numeric):
        return b.op(f"arith.constant {int(x)} : index", "index")
    if type(x).is_float:
        raise DSLError(UNSUPPORTED_TYPE, f"expected an integer, got {type(x).__name__}", user_location())
    v = convert(x, Int64) if type(x).width < 64 or not type(x).signed else x
    return b.op(f"arith.index_cast {v.ir.name} : i64 to index", "index")


def assume(src, divby: int | None = None):
    """`src` (a run-time integer) with the promise that it is a multiple of `divby` (CuTe DSL's
    cute.assume). The layout algebra uses it where a run-time stride scales an offset: a row
    stride assumed even lets a pair of 16-bit elements at an even column load as one 32-bit
    vector. Nothing checks the promise at run time; the caller (the host code that saw the
    value) must."""
    if divby is None or divby == 1:
        return src
    if not isinstance(divby, int) or divby < 1:
        raise DSLError(UNSUPPORTED_TYPE, f"assume(divby=) is a positive Python int, got {divby!r}")
    if isinstance(src, int):
        if src % divby:
            raise DSLError(UNSUPPORTED_TYPE, f"assume: {src} is not a multiple of {divby}")
        return src
    if not isinstance(src, Integer) or src._value is None:
        raise DSLError(UNSUPPORTED_TYPE, f"assume takes a run-time integer inside DSL code, got {src!r}")
    out = type(src)._wrap(src._value)
    out._divby = divby
    return out


def known_divisor(x) -> int:
    """What an integer (a Python int or a run-time one) is known to be a multiple of (0 for 0)."""
    return abs(x) if isinstance(x, int) else getattr(x, "_divby", 1)


def full_like(x, value):
    """`value` with the type of `x` (a DSL scalar), or `value` itself for Python `x`."""
    return convert(as_numeric(value, type(x)), type(x)) if isinstance(x, Numeric) else value
