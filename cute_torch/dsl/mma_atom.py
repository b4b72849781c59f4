"""What every MMA atom is (the tensor-core op one warp or warpgroup issues), and the emission
helpers the atoms share. The atoms themselves live in nvgpu/warp.py and nvgpu/warpgroup.py;
tiling them over threads and operands is mma.py's business."""

from __future__ import annotations

from . import ir
from .diagnostics import ARGUMENT_MISMATCH, UNSUPPORTED_TYPE, DSLError, user_location
from .layout import Layout, make_layout, size
from .numeric import Float32, Int32, Numeric, where
from .tensor import make_rmem_tensor


class MmaAtom:
    """One tensor-core instruction: `threads` threads compute a shape_mnk = (M, N, K) product.

    layout_a/b/c map (thread, value) to the column-major index of an element in the (M, K),
    (N, K) and (M, N) tiles: which element of each operand a thread holds as which value.
    `a_source` says where A comes from: "rmem" (registers) or "smem" (a shared-memory
    descriptor, wgmma); B likewise (`b_source`).
    """

    threads: int
    shape_mnk: tuple
    layout_a: Layout
    layout_b: Layout
    layout_c: Layout
    a_dtype: type[Numeric]
    b_dtype: type[Numeric]
    acc_dtype: type[Numeric]
    a_source = "rmem"
    b_source = "rmem"

    def call(self, d, a, b, c, accumulate=True) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return str(self)


def check_types(what: str, ab_dtype, acc_dtype, allowed: dict) -> None:
    """`allowed` maps an input type to the accumulator types the instruction has."""
    if ab_dtype not in allowed or acc_dtype not in allowed[ab_dtype]:
        pairs = ", ".join(f"{a.__name__} -> {'/'.join(c.__name__ for c in cs)}" for a, cs in allowed.items())
        raise DSLError(UNSUPPORTED_TYPE, f"{what} has no {getattr(ab_dtype, '__name__', ab_dtype)} inputs with "
                       f"{getattr(acc_dtype, '__name__', acc_dtype)} accumulators", user_location(),
                       f"supported: {pairs}")


def packed_registers(fragment, what: str, as_bits: bool = False) -> list[ir.Value]:
    """A fragment's values as the 32-bit registers PTX takes: 32-bit elements one each (as i32
    with `as_bits`, for operands PTX types .b32, such as tf32), 16-bit elements in pairs and
    8-bit ones in fours (value i of a register in its i-th lowest bits)."""
    count = size(fragment.shape)
    values = [fragment[i] for i in range(count)]
    width = fragment.dtype.width
    if width == 32:
        if as_bits and fragment.dtype.is_float:
            b = ir.current()
            return [b.op(f"llvm.bitcast {v.ir.name} : {v.ir.type} to i32", "i32") for v in values]
        return [v.ir for v in values]
    per = 32 // width if width in (8, 16) else 0
    if not per or count % per:
        raise DSLError(ARGUMENT_MISMATCH, f"{what}: {count} {fragment.dtype.__name__} values do not pack into "
                       "32-bit registers", user_location())
    b = ir.current()
    vec_t = f"vector<{per}x{fragment.dtype.mlir}>"
    registers = []
    for i in range(0, count, per):
        vec = b.op(f"llvm.mlir.undef : {vec_t}", vec_t)
        for j in range(per):
            vec = b.op(f"llvm.insertelement {values[i + j].ir.name}, {vec.name}[{Int32(j).ir.name} : i32] : "
                       f"{vec_t}", vec_t)
        registers.append(b.op(f"llvm.bitcast {vec.name} : {vec_t} to i32", "i32"))
    return registers


def unpack_registers(registers: list[ir.Value], dtype) -> list[Numeric]:
    """The inverse of packed_registers: 32-bit registers back into `dtype` values."""
    if dtype.width == 32:
        return [dtype._wrap(r) for r in registers]
    b = ir.current()
    per = 32 // dtype.width
    vec_t = f"vector<{per}x{dtype.mlir}>"
    values = []
    for r in registers:
        vec = b.op(f"llvm.bitcast {r.name} : i32 to {vec_t}", vec_t)
        for j in range(per):
            values.append(dtype._wrap(b.op(f"llvm.extractelement {vec.name}[{Int32(j).ir.name} : i32] : {vec_t}",
                                           dtype.mlir)))
    return values


def register_constraint(dtype) -> str:
    return "f" if dtype is Float32 else "r"


def inline_asm(text: str, outputs: list[str], inputs: list[ir.Value], output_type: str, side_effects: bool = True,
               input_constraints: list[str] | None = None):
    """One llvm.inline_asm op: `outputs` are the output constraints ("=f"; a read-write
    register is an output plus an input tied to it by number), `inputs` the operands, their
    constraints from their types unless given."""
    b = ir.current()
    constraints = ",".join(outputs + (input_constraints or [_constraint(v) for v in inputs]))
    operands = ", ".join(v.name for v in inputs)
    types = ", ".join(v.type for v in inputs)
    effects = "has_side_effects " if side_effects else ""
    return b.op(f'llvm.inline_asm {effects}"{text}", "{constraints}" {operands} : ({types}) -> {output_type}',
                output_type)


def _constraint(value: ir.Value) -> str:
    return {"f32": "f", "i64": "l", "i1": "b"}.get(value.type, "r")


def struct_fields(result: ir.Value, count: int, field_type: str) -> list[ir.Value]:
    b = ir.current()
    struct_t = b.module.type_alias(result.type) if count > 8 else result.type
    return [b.op(f"llvm.extractvalue {result.name}[{i}] : {struct_t}", field_type) for i in range(count)]


def emit_inline_mma(instruction: str, d, a, b, c, acc_dtype) -> None:
    """`instruction` {d}, {a}, {b}, {c}; over fragments: reads A, B and C's registers and
    writes D's (no side effects: an MMA is a pure function of its registers). A and B go as
    .b32 registers."""
    a_regs = packed_registers(a, "the A fragment", as_bits=True)
    b_regs = packed_registers(b, "the B fragment", as_bits=True)
    c_regs = packed_registers(c, "the C fragment")
    n_out = len(c_regs)
    reg_t = "f32" if acc_dtype is Float32 else "i32"
    groups, at = [], 0
    for count in (n_out, len(a_regs), len(b_regs), len(c_regs)):
        groups.append("{" + ", ".join(f"${at + i}" for i in range(count)) + "}")
        at += count
    out = register_constraint(acc_dtype)
    struct_t = f"!llvm.struct<({', '.join([reg_t] * n_out)})>"
    result = inline_asm(f"{instruction} {', '.join(groups)};", [f"={out}"] * n_out, a_regs + b_regs + c_regs,
                        struct_t, side_effects=False)
    values = unpack_registers(struct_fields(result, n_out, reg_t), acc_dtype)
    for i, v in enumerate(values):
        d[i] = v


def zero_unless(fragment, flag):
    """A register copy of `fragment` that is zero where `flag` (a bool or Boolean) is false."""
    copy = make_rmem_tensor(make_layout(fragment.shape), fragment.dtype)
    for i in range(size(fragment.shape)):
        copy[i] = fragment[i] if flag is True else (0 if flag is False else where(flag, fragment[i], 0))
    return copy
