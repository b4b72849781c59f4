"""The IR the tracer writes: MLIR text, one op per line, every op with the user's location.

Text is the boundary on purpose: the compiler library takes MLIR text through its C API (no MLIR
type crosses into Python), parsing costs well under a millisecond for a small kernel (70 ms for a
GEMM's megabyte), and `__mlir__` is exactly what was compiled. Names are unique per module;
regions are captured into their own line lists and spliced into the op that owns them; constants
are made once, at the top of the body.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

from .diagnostics import WRONG_CONTEXT, DSLError, Location, user_location_mlir


class Value:
    """An SSA value: its name (`%v3`, `%v4#1`) and MLIR type (`i32`, `!llvm.ptr<1>`)."""

    __slots__ = ("name", "type")

    def __init__(self, name: str, type: str):
        self.name = name
        self.type = type

    def __repr__(self) -> str:
        return f"{self.name} : {self.type}"


def indent(lines: list[str], by: str = "  ") -> str:
    return "\n".join(by + line.replace("\n", "\n" + by) for line in lines)


class FunctionBuilder:
    """Ops of one function body (a host func.func or a device gpu.func)."""

    def __init__(self, module: "ModuleBuilder", kind: str, name: str):
        self.module = module
        self.kind = kind  # "host" or "device"
        self.name = name
        self._blocks: list[list[str]] = [[]]
        self._entry: list[str] = []  # ops that belong at the top of the body (allocas, constants)
        self._constants: dict[str, Value] = {}  # an arith.constant's text -> its value at the top
        self.uses_dynamic_smem = False

    @property
    def lines(self) -> list[str]:
        return self._entry + self._blocks[0]

    def entry_op(self, text: str, result_type: str) -> Value:
        """An op at the start of the function body, wherever tracing is (allocas must not sit
        in loops)."""
        name = self.module.fresh()
        self._entry.append(f"{name} = {text} {self.loc()}")
        return Value(name, result_type)

    def constant(self, text: str, result_type: str) -> Value:
        """The value of `arith.constant ...` (`text`), made once at the top of the body, which
        every region in it sees (a GEMM's trace asked for 2,900 constants, most repeated)."""
        value = self._constants.get(text)
        if value is None:
            value = self._constants[text] = self.entry_op(text, result_type)
        return value

    def loc(self) -> str:
        """The `loc(...)` of the user's line for an op emitted by the caller of the method that
        calls loc."""
        return user_location_mlir(2)

    def emit(self, text: str, loc: str | None = None) -> None:
        self._blocks[-1].append(f"{text} {loc or self.loc()}")

    def op(self, text: str, result_type: str, loc: str | None = None) -> Value:
        name = self.module.fresh()
        self._blocks[-1].append(f"{name} = {text} {loc or self.loc()}")
        return Value(name, result_type)

    def op_results(self, text: str, result_types: list[str], loc: str | None = None) -> list[Value]:
        loc = loc or self.loc()
        if not result_types:
            self.emit(text, loc)
            return []
        if len(result_types) == 1:
            return [self.op(text, result_types[0], loc)]
        name = self.module.fresh()
        self.emit(f"{name}:{len(result_types)} = {text}", loc)
        return [Value(f"{name}#{i}", t) for i, t in enumerate(result_types)]

    def block_arg(self, type: str) -> Value:
        return Value(self.module.fresh("a"), type)

    @contextmanager
    def region(self) -> Iterator[list[str]]:
        """Ops emitted inside go to a new list (a region's single block)."""
        lines: list[str] = []
        self._blocks.append(lines)
        try:
            yield lines
        finally:
            self._blocks.pop()

    @contextmanager
    def reopen(self, lines: list[str]) -> Iterator[None]:
        """Append to a region captured earlier (its terminator is written last)."""
        self._blocks.append(lines)
        try:
            yield
        finally:
            self._blocks.pop()

    def mark(self) -> tuple[int, int]:
        return len(self._blocks), len(self._blocks[-1])

    def rollback(self, mark: tuple[int, int]) -> None:
        """Forget ops emitted since `mark` (a trial trace that turned out to be static)."""
        depth, length = mark
        del self._blocks[depth - 1][length:]


class ModuleBuilder:
    """Host functions, kernels and device globals of one compile."""

    def __init__(self, name: str):
        self.name = name
        self._counter = 0
        self._symbols: dict[str, int] = {}  # base -> how many symbols were made from it
        self.host_functions: list[str] = []
        self.device_functions: list[str] = []
        self.device_globals: list[str] = []
        self.host_declarations: set[str] = set()  # runtime functions host code calls (llvm.func)
        self.kernels: dict = {}  # specialization key -> kernel symbol
        self.kernel_dims: dict = {}
        self.kernel_smem: dict = {}  # kernel symbol -> dynamic shared memory its SmemAllocator took
        self.kernel_static_smem: dict = {}  # kernel symbol -> bytes of its alloc_smem buffers
        self.accepted_spills: dict = {}  # kernel symbol -> spill-store bytes its launch accepts
        self.arch: str | None = None  # the target, for checks that depend on it
        self.dynamic_smem_alignment = 0  # the declared alignment of the dynamic shared memory, once used
        self._type_aliases: dict[str, str] = {}  # type text -> its alias (!name), defined above the module

    def fresh(self, prefix: str = "v") -> str:
        self._counter += 1
        return f"%{prefix}{self._counter}"

    def unique_symbol(self, base: str) -> str:
        """`base_N`, numbered per base: a symbol's name does not depend on how many SSA values
        were traced before it, so generated code (and the PTX replay) stays comparable."""
        n = self._symbols.get(base, 0)
        self._symbols[base] = n + 1
        return f"{base}_{n}"

    def type_alias(self, type_text: str) -> str:
        """A short name for a long type, such as a wgmma's struct of 128 results: each of its 128
        extractvalues would print the whole struct, 38 % of a GEMM's text and of its parse."""
        if type_text not in self._type_aliases:
            self._type_aliases[type_text] = f"!cute_t{len(self._type_aliases)}"
        return self._type_aliases[type_text]

    def text(self) -> str:
        parts = [f"{alias} = {type_text}" for type_text, alias in self._type_aliases.items()]
        parts.append("module attributes {gpu.container_module} {")
        if self.device_functions or self.device_globals:
            body = self.device_globals + self.device_functions
            parts.append(f"  gpu.module @{self.name}_kernels {{\n{indent(body, '    ')}\n  }}")
        parts += [indent([d]) for d in sorted(self.host_declarations)]
        parts += [indent([f]) for f in self.host_functions]
        parts.append("}")
        return "\n".join(parts) + "\n"


class _TraceState(threading.local):
    def __init__(self):
        self.stack: list[FunctionBuilder] = []


_state = _TraceState()


def current() -> FunctionBuilder | None:
    return _state.stack[-1] if _state.stack else None


def require(kind: str | None = None, what: str = "this operation") -> FunctionBuilder:
    """The active builder; errors if there is none or it is the wrong side (host/device)."""
    builder = current()
    if builder is None:
        raise DSLError(WRONG_CONTEXT, f"{what} can only be used inside a @cute.jit or @cute.kernel function",
                       suggestion="call it from DSL code")
    if kind is not None and builder.kind != kind:
        where = "a @cute.kernel (device code)" if kind == "device" else "a @cute.jit function (host code)"
        raise DSLError(WRONG_CONTEXT, f"{what} is only available in {where}",
                       suggestion="move it into a @cute.kernel" if kind == "device" else "move it to the host")
    return builder


@contextmanager
def building(builder: FunctionBuilder) -> Iterator[FunctionBuilder]:
    _state.stack.append(builder)
    try:
        yield builder
    finally:
        _state.stack.pop()


def location_of(loc: Location | None) -> str:
    return loc.mlir() if loc else "loc(unknown)"
