"""DSL errors with a stable code, the user's file:line:col, the source line and a suggestion.

Locations come from the user's own frames: the preprocessor compiles rewritten functions under
their original file name and line numbers, so the innermost frame outside this package is the
line the user wrote.
"""

from __future__ import annotations

import contextlib
import functools
import linecache
import os
import sys
from dataclasses import dataclass

from ..errors import CompileError

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The error catalogue (docs/language.md lists the same codes).
EARLY_EXIT = "CUTE-E101"  # return/break/continue inside dynamic control flow
LOOP_ELSE = "CUTE-E102"  # for/while ... else on a dynamic loop
UNDEFINED_AFTER_REGION = "CUTE-E103"  # first defined inside a dynamic region, read after it
TYPE_CHANGE = "CUTE-E104"  # a carried variable changes type
NOT_CONSTEXPR = "CUTE-E105"  # a dynamic value where a compile-time one is needed
UNSUPPORTED_BUILTIN = "CUTE-E106"  # int()/float()/len()/hash()... of a dynamic value
UNREWRITTEN_CONTROL_FLOW = "CUTE-E107"  # dynamic value in Python control flow nobody rewrote
PYTHON_CALLS_KERNEL = "CUTE-E108"
KERNEL_CALLS_KERNEL = "CUTE-E109"
ARGUMENT_MISMATCH = "CUTE-E110"  # wrong device, dtype, rank or type at call time
MLIR_ERROR = "CUTE-E111"  # verifier/lowering error mapped back to the user's line
WRONG_CONTEXT = "CUTE-E112"  # device-only operation on the host or the reverse
INVALID_LAUNCH = "CUTE-E113"  # bad grid/block/cluster/smem
UNSUPPORTED_TYPE = "CUTE-E114"  # an operation a type does not support
UNSUPPORTED_SYNTAX = "CUTE-E115"  # Python syntax the preprocessor cannot turn into IR
LAYOUT_ALGEBRA = "CUTE-E116"  # a layout operation outside its domain (incompatible shapes, run-time leaves)


@dataclass(frozen=True)
class Location:
    file: str
    line: int
    col: int = 0  # 0-based, as Python's AST counts

    def mlir(self) -> str:
        escaped = self.file.replace("\\", "\\\\").replace('"', '\\"')
        return f'loc("{escaped}":{self.line}:{self.col + 1})'

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"


@functools.lru_cache(maxsize=1024)
def _columns(code) -> tuple:
    """The start column of each instruction of `code` (every emitted op asks for its user's
    column: materializing a large kernel's positions each time cost a third of its trace)."""
    return tuple(position[2] for position in code.co_positions())


def _frame_column(frame) -> int:
    try:
        return _columns(frame.f_code)[frame.f_lasti // 2] or 0
    except (AttributeError, IndexError):
        return 0


_CONTEXTLIB = os.path.abspath(contextlib.__file__)


def is_internal(filename: str) -> bool:
    """cute_torch's own code, or contextlib's (the DSL's context managers, such as
    cute.arch.elect_one, run their code through it on the user's `with` line)."""
    return filename.startswith(_PACKAGE_DIR) or filename == _CONTEXTLIB


_USERS: dict = {}  # code object -> whether it is the user's (not cute_torch's, not "<...>")
_MLIR_LOCS: dict = {}  # (user code, instruction offset) -> its loc(...) text


def _user_frame(frame):
    """The innermost frame from `frame` out that is not cute_torch's own code (every traced op
    asks: a dict lookup per frame instead of two string tests)."""
    users = _USERS
    while frame is not None:
        code = frame.f_code
        mine = users.get(code)
        if mine is None:
            name = code.co_filename
            mine = users[code] = not (is_internal(name) or name.startswith("<"))
        if mine:
            return frame
        frame = frame.f_back
    return None


def user_location(skip: int = 1) -> Location | None:
    """The innermost frame that is not cute_torch's own code."""
    frame = _user_frame(sys._getframe(skip))
    if frame is None:
        return None
    return Location(frame.f_code.co_filename, frame.f_lineno, _frame_column(frame))


def user_location_mlir(depth: int = 1) -> str:
    """user_location's `loc(...)` text for an op emitted by the frame `depth` above this one,
    "loc(unknown)" without one; a call site's text is made once (a trace asks for every op)."""
    frame = _user_frame(sys._getframe(depth + 1))
    if frame is None:
        return "loc(unknown)"
    key = (frame.f_code, frame.f_lasti)
    text = _MLIR_LOCS.get(key)
    if text is None:
        if len(_MLIR_LOCS) > 1 << 16:                   # (call sites of code since freed: start over)
            _MLIR_LOCS.clear()
            _USERS.clear()
        text = _MLIR_LOCS[key] = Location(frame.f_code.co_filename, frame.f_lineno, _frame_column(frame)).mlir()
    return text


class DSLError(CompileError):
    """An error in user DSL code: `code` (stable, e.g. CUTE-E101), `location` (file:line:col of
    the user's line), `source_line`, `suggestion`."""

    def __init__(self, code: str, message: str, location: Location | None = None, suggestion: str = "",
                 diagnostics=()):
        self.code = code
        self.user_location = location if location is not None else user_location()
        self.suggestion = suggestion
        loc = self.user_location
        self.source_line = linecache.getline(loc.file, loc.line).rstrip("\n") if loc else ""
        super().__init__("dsl", message, diagnostics)
        self.args = (self._render(),)

    @property
    def file(self) -> str | None:
        return self.user_location.file if self.user_location else None

    @property
    def line(self) -> int | None:
        return self.user_location.line if self.user_location else None

    def _render(self) -> str:
        text = f"error[{self.code}]: {self.message}"
        loc = self.user_location
        if loc is not None:
            text += f"\n  --> {loc}"
            if self.source_line:
                number = str(loc.line)
                pad = " " * len(number)
                stripped = self.source_line.expandtabs()
                text += f"\n{pad} |\n{number} | {stripped}\n{pad} | {' ' * loc.col}^"
        if self.suggestion:
            text += f"\n  = help: {self.suggestion}"
        return text

    def __str__(self) -> str:
        return self.args[0]


class SpillWarning(UserWarning):
    """A kernel spills registers to local memory (ptxas's report): usually a tile, a stage count
    or an unrolled loop too large for the registers the launch bounds leave each thread."""
