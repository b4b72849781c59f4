"""Structured errors: what failed, where (file:line:col), and how to reproduce it."""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Diagnostic:
    file: str
    line: int
    col: int
    severity: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.severity}: {self.message}"


class CompileError(Exception):
    """Compilation failed. `kind` is one of parse, pass, codegen, ptxas, toolkit, jit, options,
    internal (dsl for a DSLError); `diagnostics` carry MLIR's messages with their locations."""

    def __init__(self, kind: str, message: str, diagnostics=(), ptx_path: str = "", command: str = ""):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.diagnostics = list(diagnostics)
        self.ptx_path = ptx_path
        self.command = command

    @property
    def location(self) -> Diagnostic | None:
        """The first error's location, if MLIR gave one."""
        return next((d for d in self.diagnostics if d.severity == "error"), None)

    @staticmethod
    def from_json(text: str) -> "CompileError":
        data = json.loads(text)
        diagnostics = [Diagnostic(**d) for d in data.get("diagnostics", [])]
        cls = {"toolkit": ToolkitError, "ptxas": PtxasError}.get(data.get("kind"), CompileError)
        return cls(data.get("kind", "internal"), data.get("message", ""), diagnostics,
                   data.get("ptx_path", ""), data.get("command", ""))


class ToolkitError(CompileError):
    """The CUDA toolkit (ptxas, libdevice, nvJitLink) is missing; the message names CUDA_HOME."""


class PtxasError(CompileError):
    """ptxas (or nvJitLink) rejected the PTX; `ptx_path` is the kept PTX, `command` reproduces it."""
