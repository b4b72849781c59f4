"""The low-level entry: MLIR text in, a callable compiled module out.

    mod = cute_torch.compile_mlir(text, arch="sm_90a")
    mod.vector_add(a, b, c, n)          # launches on the tensors' current torch stream
    mod.__ptx__, mod.__cubin__, mod.metadata["kernels"]

The DSL front end (dsl/jit.py) compiles through this; tests also call it directly.
"""

from __future__ import annotations

import json
import zlib
from typing import Any, Iterable

from . import _C
from .env import knobs
from .errors import CompileError
from .launch import resolve_device_and_stream
from .toolkit import nvdisasm_path, nvjitlink_path, target_arch

STAGES = tuple(_C.compiler_stages().split(","))  # what keep= accepts, in pipeline order


class HostFunction:
    """A host `func.func` of a compiled module, callable from Python."""

    def __init__(self, module: "CompiledModule", name: str, arg_types: list[str]):
        self._module = module
        self.name = name
        self.arg_types = arg_types

    def __call__(self, *args: Any, stream: Any = None, device: int | None = None) -> None:
        device, stream = resolve_device_and_stream(args, stream, device)
        self._module._artifact.call(self.name, args, device, stream)

    def __repr__(self) -> str:
        return f"<host function {self.name}({', '.join(self.arg_types)})>"


class CompiledModule:
    """CUBINs, JIT-compiled host entries and metadata of one compiled MLIR module."""

    def __init__(self, artifact: Any, stages: dict[str, bytes] | None = None, source: bytes | None = None):
        self._artifact = artifact
        self._stages = stages or {}  # stages restored from the disk cache
        # The input text, zlib-compressed, where "mlir" was not kept: printed when first asked for.
        self.source = source
        self.metadata: dict = json.loads(artifact.metadata)
        self.functions = {
            fn["name"]: HostFunction(self, fn["name"], fn["args"]) for fn in self.metadata["host_functions"]
        }

    @property
    def kernels(self) -> list[dict]:
        return self.metadata["kernels"]

    @property
    def cubins(self) -> dict[str, bytes]:
        return dict(self._artifact.cubins())

    @property
    def host_object(self) -> bytes | None:
        """The host code's object (ELF), what a disk-cache entry keeps: loading it links it,
        nothing is compiled. None without host functions."""
        return self._artifact.stage("host_object")

    def stage(self, name: str) -> bytes | None:
        """A kept stage (see `keep=`), or None if it was not kept."""
        if name not in STAGES:
            raise ValueError(f"unknown stage {name!r}; stages: {', '.join(STAGES)}")
        found = self._artifact.stage(name)
        found = found if found is not None else self._stages.get(name)
        if found is None and name == "mlir" and self.source is not None:
            found = self._stages["mlir"] = print_mlir(zlib.decompress(self.source).decode()).encode()
        return found

    def _text(self, name: str) -> str | None:
        data = self.stage(name)
        return None if data is None else data.decode()

    # The CuTe DSL spelling of the kept stages.
    __mlir__ = property(lambda self: self._text("mlir"))
    __ptx__ = property(lambda self: self._text("ptx"))
    __sass__ = property(lambda self: self._text("sass"))
    __cubin__ = property(lambda self: next(iter(self.cubins.values()), None))

    def __getattr__(self, name: str) -> HostFunction:
        functions = self.__dict__.get("functions", {})
        if name in functions:
            return functions[name]
        raise AttributeError(f"no host function {name!r}; this module has: {', '.join(functions) or 'none'}")


def compile_mlir(
    text: str,
    *,
    arch: str | None = None,
    opt_level: int | None = None,
    fmad: bool | None = None,
    ptxas_options: Iterable[str] | None = None,
    line_info: bool | None = None,
    keep: Iterable[str] | None = None,
    dump_dir: str | None = None,
    cubin_backend: str | None = None,
    name: str = "module",
    source_name: str = "<mlir>",
    lazy_mlir: bool = False,
) -> CompiledModule:
    """Compile a module of host `func.func`s and `gpu.module`s. Unset options come from the
    CUTE_TORCH_* knobs (cute_torch.env). With `lazy_mlir`, the "mlir" stage, unless kept, is
    printed when first asked for (from the input, held compressed) instead of during the compile:
    a GEMM's is a megabyte that took each first call 50 ms to print. Raises CompileError
    (ToolkitError, PtxasError)."""
    k = knobs()
    unknown = [stage for stage in k.keep if stage not in STAGES]
    if unknown:
        raise ValueError(f"CUTE_TORCH_KEEP names unknown stages {unknown}; stages: {', '.join(STAGES)}")
    options = {
        "arch": target_arch(arch),
        "opt_level": k.opt_level if opt_level is None else opt_level,
        "fmad": k.fmad if fmad is None else fmad,
        "ptxas_options": list(k.ptxas_options if ptxas_options is None else ptxas_options),
        "line_info": k.line_info if line_info is None else line_info,
        # PTX is always kept: it is cheap and what a failing launch is debugged with.
        "keep": sorted(set(k.keep if keep is None else keep) | {"ptx"}),
        "cuda_home": k.cuda_home,
        "cubin_backend": cubin_backend or k.cubin_backend,
        "name": name,
        "source_name": source_name,
    }
    if dump_dir or k.dump_dir:
        options["dump_dir"] = dump_dir or k.dump_dir
    disassembler = nvdisasm_path()
    if disassembler and "sass" in options["keep"]:
        options["nvdisasm_path"] = disassembler
    library = nvjitlink_path()
    if library:
        options["nvjitlink_path"] = library
    artifact, error = _C.compile(text, json.dumps(options))
    if error is not None:
        raise CompileError.from_json(error)
    lazy = lazy_mlir and "mlir" not in options["keep"]
    return CompiledModule(artifact, source=zlib.compress(text.encode(), 1) if lazy else None)


def print_mlir(text: str) -> str:
    """The module `text` parsed and printed again (the "mlir" stage), nothing compiled."""
    artifact, error = _C.compile(text, json.dumps({"keep": ["mlir"], "parse_only": True}))
    if error is not None:
        raise CompileError.from_json(error)
    return artifact.stage("mlir").decode()
