"""`cute.printf`: run-time printing from device code (PTX vprintf), with `{}` placeholders
(Python format specs such as `{:.3f}` and `{:5d}`), C `%` formats, or f-strings (the
preprocessor splits them into a format and arguments). Python values are formatted at compile
time; DSL values at run time."""

from __future__ import annotations

import string

from . import ir
from .diagnostics import UNSUPPORTED_TYPE, DSLError, user_location
from .numeric import Boolean, Float32, Float64, Int32, Int64, Numeric, Uint32, Uint64, as_numeric, convert


def _c_spec(t: type[Numeric], spec: str) -> tuple[str, type[Numeric]]:
    """The C conversion for a DSL value of type t given a Python format spec, and the type the
    value is passed as."""
    kind = spec[-1] if spec and spec[-1].isalpha() else ""
    flags = spec[:-1] if kind else spec
    if t.is_float:
        return f"%{flags}{kind if kind in 'eEfFgG' and kind else 'f'}", (Float64 if t is Float64 else Float32)
    if kind in ("x", "X", "o"):
        pass_t = Uint64 if t.width == 64 else Uint32
        return f"%{flags}{'ll' if t.width == 64 else ''}{kind}", pass_t
    if t.width == 64:
        return f"%{flags}{'lld' if t.signed else 'llu'}", (Int64 if t.signed else Uint64)
    if t is Boolean or t.signed:
        return f"%{flags}d", Int32
    return f"%{flags}u", Uint32


def _escape(text: str) -> str:
    out = []
    for ch in text:
        if ch in '"\\' or not 32 <= ord(ch) < 127:
            out.extend(f"\\{byte:02X}" for byte in ch.encode())
        else:
            out.append(ch)
    return "".join(out)


def printf(fmt: str, *args, end: str = "\n") -> None:
    """Print from device code at run time, e.g. cute.printf("tid {} x={:.3f}", tid, x); `end`
    follows the text (a newline, as in CuTe DSL 4.8 and Python's print)."""
    b = ir.require("device", "cute.printf (use print() for compile-time output)")
    values: list[Numeric] = []
    if "{" in fmt:
        c_fmt, auto = "", 0
        for literal, field, spec, _conv in string.Formatter().parse(fmt):
            c_fmt += literal.replace("%", "%%")
            if field is None:
                continue
            index = auto if field == "" else int(field)
            auto += 1
            if index >= len(args):
                raise DSLError(UNSUPPORTED_TYPE, f"printf format has more placeholders than arguments ({len(args)})",
                               user_location())
            arg = args[index]
            if not isinstance(arg, Numeric):
                c_fmt += format(arg, spec or "").replace("%", "%%")
                continue
            conversion, pass_t = _c_spec(type(arg), spec or "")
            c_fmt += conversion
            values.append(convert(arg, pass_t))
    else:
        c_fmt = fmt
        for arg in args:
            v = as_numeric(arg)
            values.append(convert(v, _c_spec(type(v), "")[1]))
    c_fmt += end.replace("%", "%%")
    if values:
        operands = ", ".join(v.ir.name for v in values)
        types = ", ".join(v.ir.type for v in values)
        b.emit(f'gpu.printf "{_escape(c_fmt)}" {operands} : {types}')
    else:
        b.emit(f'gpu.printf "{_escape(c_fmt)}"')
