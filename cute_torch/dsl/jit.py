"""`@cute.jit`, `@cute.kernel`, launches, `cute.compile`, and the specialization caches.

Calling convention (the seed talk): Python -> jit compiles (once per specialization) and runs;
Python -> kernel is an error; jit -> jit and jit/kernel -> plain Python function are inlined at
trace time; jit -> kernel is a launch; kernel -> kernel is an error.

A call computes its specialization key from the arguments alone (tensors: dtype, shape, strides
unless marked dynamic, 16-byte alignment, device; scalars: their DSL type; Constexpr values:
themselves). A hit in the in-memory cache goes straight to the compiled host entry; a miss
tries the disk cache, else traces and compiles, then stores.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import re
import sys
import types
import warnings
from typing import Any, Callable, NamedTuple

from .. import _C
from ..compiler import CompiledModule, compile_mlir
from ..env import knobs
from ..errors import CompileError
from ..launch import current_stream_handle, is_stream, loaded_torch, stream_handle
from ..toolkit import MAX_DYNAMIC_SMEM, target_arch
from . import cache, control, dispatch, ir, pytree
from .diagnostics import (ARGUMENT_MISMATCH, INVALID_LAUNCH, KERNEL_CALLS_KERNEL, MLIR_ERROR, PYTHON_CALLS_KERNEL,
                          DSLError, Location, SpillWarning, user_location)
from .numeric import Boolean, Float32, Float64, Int32, Numeric, as_numeric, convert, index_of, python_type
from .preprocess import preprocess
from .smem import needed_bytes as smem_needed
from .layout import ComposedLayout, Layout, Swizzle
from .tensor import Tensor, TensorArg, TensorKey, tensor_from_key, tensor_key, tensor_param_types


class Constexpr:
    """Annotation for compile-time parameters: `def f(x, n: cute.Constexpr)` (or
    `cute.Constexpr[int]`). Their values are part of the specialization key."""

    def __class_getitem__(cls, item):
        return cls


_TENSOR_TYPE = None


def _tensor_type():
    global _TENSOR_TYPE
    if _TENSOR_TYPE is None:
        torch = loaded_torch()
        _TENSOR_TYPE = torch.Tensor if torch is not None else type(None)
    return _TENSOR_TYPE


# -- argument kinds and keys ---------------------------------------------------------------------

TENSOR, TENSOR_ARG, SCALAR, CONSTEXPR, STREAM = range(5)


def _is_constexpr_annotation(annotation) -> bool:
    return annotation is Constexpr or (isinstance(annotation, str) and "Constexpr" in annotation)


_constexpr_key = pytree.static_key


def _stable(value) -> str | None:
    """A spelling of a compile-time value that is the same in every process, or None."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if isinstance(value, (tuple, list)):
        parts = [_stable(v) for v in value]
        return None if None in parts else f"{type(value).__name__}({','.join(parts)})"
    if isinstance(value, type) or inspect.isfunction(value):
        return f"{value.__module__}.{value.__qualname__}"
    if isinstance(value, (JitFunction, KernelFunction)):
        return f"{value.fn.__module__}.{value.fn.__qualname__}"
    if isinstance(value, (Layout, ComposedLayout, Swizzle)) and getattr(value, "is_static", True):
        return f"{type(value).__name__}({value})"
    return None


class _Signature:
    """Per-parameter annotations of a DSL function, read once."""

    def __init__(self, fn: Callable):
        self.signature = inspect.signature(fn)
        self.params = list(self.signature.parameters.values())
        kinds = [p.kind for p in self.params]
        if inspect.Parameter.KEYWORD_ONLY in kinds or inspect.Parameter.VAR_KEYWORD in kinds:
            raise DSLError(ARGUMENT_MISMATCH, f"{fn.__name__}: DSL functions take positional parameters (and "
                           "*args); keyword-only parameters and **kwargs are not supported",
                           Location(fn.__code__.co_filename, fn.__code__.co_firstlineno),
                           "make them positional parameters (Constexpr ones for options)")
        self.variadic = inspect.Parameter.VAR_POSITIONAL in kinds
        self.annotations = [p.annotation for p in self.params if p.kind is not inspect.Parameter.VAR_POSITIONAL]
        self._rest = self.params[-1].annotation if self.variadic else None

    def bind(self, args, kwargs) -> tuple:
        """The arguments in order, *args flattened into the positional ones."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise DSLError(ARGUMENT_MISMATCH, str(e), user_location()) from None
        bound.apply_defaults()
        flat = []
        for p in self.params:
            value = bound.arguments.get(p.name, ())
            flat.extend(value) if p.kind is inspect.Parameter.VAR_POSITIONAL else flat.append(value)
        return tuple(flat)

    def annotations_for(self, count: int) -> list:
        """The annotation of each of `count` flattened arguments."""
        if not self.variadic:
            return self.annotations
        return self.annotations + [self._rest] * (count - len(self.annotations))


# Keys of unannotated Python scalars on the hot path, as _arg_key gives them (an int outside
# Int32's range goes through _arg_key).
_INT32_KEY, _INT32_LIMIT = (SCALAR, Int32), 1 << 31
_SCALAR_KEYS = {float: (SCALAR, Float32), bool: (SCALAR, Boolean)}


def _arg_key(value, annotation) -> tuple:
    if _is_constexpr_annotation(annotation):
        return (CONSTEXPR, _constexpr_key(value))
    torch = loaded_torch()
    if torch is not None and isinstance(value, torch.Tensor):
        return tensor_key(value)
    if isinstance(value, TensorArg):
        return value.key(TENSOR_ARG)
    if isinstance(annotation, type) and issubclass(annotation, Numeric):
        if not isinstance(value, (Numeric, bool, int, float)):
            raise DSLError(ARGUMENT_MISMATCH, f"expected a {annotation.__name__} scalar, got {type(value).__name__}",
                           user_location())
        return (SCALAR, annotation)
    if isinstance(value, Numeric):
        return (SCALAR, type(value))
    if isinstance(value, (bool, int, float)):
        return (SCALAR, python_type(value))
    if is_stream(value):
        return (STREAM,)
    if hasattr(value, "__dlpack__") and torch is not None:
        raise DSLError(ARGUMENT_MISMATCH, "DLPack tensors other than torch's must go through cute.from_dlpack(t)",
                       user_location(), "wrap the argument: cute.from_dlpack(x)")
    return (CONSTEXPR, _constexpr_key(value))


# Host ABI of scalars: what the packed host entry reads (narrow floats travel as f32).
def _abi_type(t: type[Numeric]) -> str:
    if t.is_float:
        return "f64" if t is Float64 else "f32"
    return t.mlir


def _abi_value(value) -> Any:
    if isinstance(value, Numeric):
        if value._const is None:
            raise DSLError(ARGUMENT_MISMATCH, "a DSL value made inside one trace cannot be an argument of another call",
                           user_location())
        return value._const
    return value


# -- specializations ------------------------------------------------------------------------------

class Specialization:
    """One compiled variant of a @cute.jit function: its host entry and how to pass arguments."""

    def __init__(self, module: CompiledModule, entry: str, keys: tuple, source: Callable):
        self.module = module
        self._call = module._artifact.call
        self._entry = entry
        self.keys = keys
        self._kinds = tuple(k[0] for k in keys)
        # The hot path: tensors and Python scalars go to the host entry as they are; compile-time
        # arguments are dropped (they are in the key, not in the host ABI).
        self._simple = all(k in (TENSOR, SCALAR, CONSTEXPR) for k in self._kinds)
        self._runtime = None if all(k != CONSTEXPR for k in self._kinds) else \
            tuple(i for i, k in enumerate(self._kinds) if k != CONSTEXPR)
        devices = {k.device for k in _tensor_keys(keys)}
        self.device = next(iter(devices)) if devices else None
        self._source = source
        self._stream = current_stream_handle

    def fast_entry(self) -> tuple | None:
        """(host entry, runtime, argument kinds, device) for dispatch.Dispatch, where the
        arguments go to the host entry as they are and a CUDA device runs it; else None."""
        if not (self._simple and self._runtime is None and self.device is not None and self.device >= 0):
            return None
        artifact = self.module._artifact
        [fn] = [f for f in self.module.metadata["host_functions"] if f["name"] == self._entry]
        kinds = "".join("p" if t.startswith("!llvm.ptr") else {"f32": "f", "f64": "d"}.get(t, "i") for t in fn["args"])
        return artifact.host_entry_address(self._entry), artifact.runtime_address(), kinds, self.device

    def _check_device(self) -> int:
        device = self.device
        if device is None:
            torch = loaded_torch()
            return torch.cuda.current_device() if torch is not None and torch.cuda.is_available() else 0
        if device < 0:
            raise DSLError(ARGUMENT_MISMATCH, "tensor arguments must be CUDA tensors, got CPU tensors",
                           user_location(), "move them with .cuda(); CPU tensors can only be used to compile "
                           "(cute.compile) without running")
        return device

    def run(self, args: tuple) -> None:
        device = self.device
        if self._simple and device is not None and device >= 0 and len(args) == len(self._kinds):
            try:
                runtime = args if self._runtime is None else [args[i] for i in self._runtime]
                self._call(self._entry, runtime, device, self._stream(device))
                return
            except TypeError:
                pass  # a DSL scalar or a wrong argument: the careful path says which
        flat, stream = [], None
        if len(args) != len(self._kinds):
            raise DSLError(ARGUMENT_MISMATCH, f"{self._source.__name__} was compiled for {len(self._kinds)} arguments, "
                           f"got {len(args)}", user_location())
        for value, kind in zip(args, self._kinds):
            if kind == TENSOR:
                flat.append(value)
            elif kind == TENSOR_ARG:
                flat.append(value.tensor)
                flat.extend(value.dynamic_values())
            elif kind == SCALAR:
                flat.append(_abi_value(value))
            elif kind == STREAM:
                stream = stream_handle(value)
        device = self._check_device()
        if stream is None:
            stream = self._stream(device)
        try:
            self._call(self._entry, flat, device, stream)
        except TypeError as e:
            raise DSLError(ARGUMENT_MISMATCH, f"{self._source.__name__}: {e}", user_location()) from None


class CompiledFunction:
    """What `cute.compile` returns: call it like the function (no key, no tracing), and read
    `__mlir__`, `__ptx__`, `__cubin__`, `__sass__` (with keep=["sass"] and a disassembler)."""

    def __init__(self, spec: Specialization, name: str):
        self._spec = spec
        self._run = spec.run
        self.__name__ = name
        self.metadata = spec.module.metadata
        self._fast: dispatch.Dispatch | None | bool = None  # False: tried, not available

    def __call__(self, *args):
        fast = self._fast
        if fast and fast.call(args):  # the first call's argument types, launched in C++
            return
        self._run(args)
        if fast is None:
            self._fast = dispatch.make(_untouched) or False
            if self._fast and not self._fast.add(args, None, self._spec):
                self._fast = False

    def check_args(self, *args) -> None:
        """Raise CUTE-E110 if `args` do not match what this function was compiled for."""
        for i, (value, key) in enumerate(zip(args, self._spec.keys)):
            got = _arg_key(value, None)
            if key[0] in (TENSOR, TENSOR_ARG) and got[1:] != key[1:]:
                raise DSLError(ARGUMENT_MISMATCH, f"argument {i}: compiled for {_describe(key)}, got {_describe(got)}",
                               user_location(), "compile again for these arguments, or mark the layout dynamic")

    __mlir__ = property(lambda self: self._spec.module.__mlir__)
    __ptx__ = property(lambda self: self._spec.module.__ptx__)
    __sass__ = property(lambda self: self._spec.module.__sass__)
    __cubin__ = property(lambda self: self._spec.module.__cubin__)

    @property
    def kernels(self) -> list[dict]:
        return self._spec.module.kernels

    def max_active_clusters(self, smem: int, device: int, kernel: int = 0) -> int:
        """How many clusters of kernel #`kernel` (its compiled block and cluster shape, `smem`
        bytes of dynamic shared memory) run at once on `device`: the largest persistent grid,
        in clusters, whose CTAs all run together (a device's GPCs leave SMs over that a
        cluster cannot span, so it can be less than SMs / cluster size)."""
        k = self.kernels[kernel]
        return self._spec.module._artifact.max_active_clusters(kernel, k["block_dims"], k["cluster_dims"], smem,
                                                               device)

    def host_entry(self) -> "HostEntry":
        """The compiled host function for a C++ caller (a torch op's fast path): the address of
        its packed entry, `void entry(void **args)` (one pointer per host argument in the host
        ABI's order: each tensor's data pointer then its run-time layout leaves, each scalar),
        and the address of the runtime's `LoadedArtifact` (cute_torch/runtime.h), whose
        `call(entry, args, device, stream)` runs it with its launches on `stream`. Both stay
        valid while this object lives."""
        artifact = self._spec.module._artifact
        return HostEntry(artifact.host_entry_address(self._spec._entry), artifact.runtime_address())


def _untouched(key) -> None:
    """A compiled function's dispatch has one entry and no LRU order to keep."""


class HostEntry(NamedTuple):
    """See CompiledFunction.host_entry."""
    address: int
    runtime: int


def _tensor_keys(keys: tuple) -> list[TensorKey]:
    return [TensorKey._make(k) for k in keys if k[0] in (TENSOR, TENSOR_ARG)]


def _describe(key: tuple) -> str:
    if key[0] in (TENSOR, TENSOR_ARG):
        t = TensorKey._make(key)
        where = f"cuda:{t.device}" if t.device >= 0 else "cpu"
        return f"{t.dtype.__name__} tensor of shape {tuple(t.shape)}, strides {t.stride}, on {where}"
    return repr(key)


# -- tracing -------------------------------------------------------------------------------------------

def _symbol(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


class _DSLFunction:
    def __init__(self, fn: Callable, preprocess_mode: bool):
        self.fn = fn
        self.preprocess = preprocess_mode
        self._rewritten = None
        functools.update_wrapper(self, fn)

    def traced_callable(self) -> Callable:
        """The function the tracer runs: the preprocessed one, or the original (tracing mode)."""
        if not self.preprocess:
            return self.fn
        if self._rewritten is None:
            self._rewritten = preprocess(self.fn)
            if knobs().print_after_preprocess:
                print(f"# {self.fn.__qualname__} after preprocessing\n{self._rewritten.source}", file=sys.stderr)
        return self._rewritten.instantiate(control)


class JitFunction(_DSLFunction):
    """A host function (`@cute.jit`): called from Python it compiles and runs; called from DSL
    code it is inlined."""

    def __init__(self, fn: Callable, preprocess_mode: bool = True, options: dict | None = None):
        super().__init__(fn, preprocess_mode)
        self.options = dict(options or {})
        self._sig = _Signature(fn)
        self._annotations = self._sig.annotations
        self._plain = all(a is inspect.Parameter.empty for a in self._annotations)
        self._cache = cache.MemoryCache()
        self._fingerprint: str | None = None
        self.accepted_spills: dict = {}  # the last trace's: kernel symbol -> bytes (launch's accepted_spill_bytes)

    def __get__(self, obj, objtype=None):
        return self if obj is None else types.MethodType(self, obj)

    def __call__(self, *args, **kwargs):
        if ir.current() is not None:
            return self.traced_callable()(*args, **kwargs)
        if kwargs or len(args) != len(self._annotations) or self._sig.variadic:
            args = self._sig.bind(args, kwargs)
        if self._plain:  # no annotations: torch tensors and Python scalars take the short path
            fast = self._cache.fast
            if fast is not None and fast.call(args):  # found and launched in C++ (dispatch.py)
                return
            tensor_type = _tensor_type()
            key = tuple([tensor_key(a) if type(a) is tensor_type else
                         _INT32_KEY if type(a) is int and -_INT32_LIMIT <= a < _INT32_LIMIT else
                         _SCALAR_KEYS.get(type(a)) or _arg_key(a, None) for a in args])
        else:
            key = tuple(map(_arg_key, args, self._sig.annotations_for(len(args))))
        spec = self._cache.get(key)
        if spec is None:
            spec = self._specialize(args, key, self.options)
            self._cache.put(key, spec, knobs().memory_cache_size)
        elif self._plain:  # called again: worth the C++ path from now on
            self._cache.add_fast(args, key, spec)
        spec.run(args)

    def compile(self, *args, options: dict | None = None, **kwargs) -> CompiledFunction:
        args = self._sig.bind(args, kwargs)
        key = tuple(map(_arg_key, args, self._sig.annotations_for(len(args))))
        merged = {**self.options, **(options or {})}
        spec = self._cache.get(key) if not options else None
        if spec is None:
            spec = self._specialize(args, key, merged)
            if not options:
                self._cache.put(key, spec, knobs().memory_cache_size)
        return CompiledFunction(spec, self.fn.__name__)

    # -- a miss: disk cache, else trace and compile ---------------------------------------------
    def _specialize(self, args: tuple, key: tuple, options: dict) -> Specialization:
        k = knobs()
        devices = {k.device for k in _tensor_keys(key)}
        if len(devices) > 1:
            raise DSLError(ARGUMENT_MISMATCH, f"tensor arguments are on different devices: {sorted(devices)}",
                           user_location(), "move all tensors to one GPU")
        device = next(iter(devices), -1)
        arch = options.get("arch") or (_C.device_arch(device) if device >= 0 and _C.driver_available()[0] else None)
        arch = target_arch(arch)
        compile_options = {kk: v for kk, v in options.items() if kk != "arch"}
        name = _symbol(self.fn.__name__)
        digest = None
        stable = self._stable_key(key)
        if stable is not None and not k.no_cache:
            settings = (k.opt_level, k.fmad, k.ptxas_options, k.line_info, k.cubin_backend, k.cuda_home)
            digest = cache.digest("cute_torch-dsl-1", _C.compiler_version(), cache.compiler_build_id(),
                                  self._source_fingerprint(), stable,
                                  sorted(compile_options.items()), settings, arch, name)
            found = cache.load(k.cache_dir, digest)
            if found is not None:
                host, metadata, cubins, stages, source = found
                artifact, _error = _C.load(host, metadata, cubins)
                if artifact is not None:  # else recompile: the entry is stale for this build
                    stages = {s: text.encode() for s, text in stages.items()}
                    return Specialization(CompiledModule(artifact, stages, source or None), name, key, self.fn)
        text = self.trace(args, key, name, arch)
        module = _compile_traced(text, arch, name, compile_options)
        _warn_about_spills(module, self.fn, self.accepted_spills)
        if digest is not None:
            stages = {s: module.stage(s).decode() for s in ("mlir", "ptx", "sass") if s in module.metadata["stages"]}
            cache.store(k.cache_dir, digest, module.host_object or b"", json.dumps(module.metadata),
                        list(module.cubins.items()), stages, module.source or b"")
        return Specialization(module, name, key, self.fn)

    def trace(self, args: tuple, key: tuple, name: str, arch: str | None = None) -> str:
        """Run the function on DSL stand-ins for its arguments; the module's MLIR text."""
        module = ir.ModuleBuilder(name)
        module.arch = arch
        host = ir.FunctionBuilder(module, "host", name)
        params: list[ir.Value] = []
        dsl_args = []
        for value, kk in zip(args, key):
            kind = kk[0]
            if kind in (TENSOR, TENSOR_ARG):
                tensor = TensorKey._make(kk)
                values = [host.block_arg(t) for t in tensor_param_types(tensor)]
                params += values
                dsl_args.append(tensor_from_key(tensor, values))
            elif kind == SCALAR:
                _, t = kk
                v = host.block_arg(_abi_type(t))
                params.append(v)
                dsl_args.append((Float32 if v.type == "f32" else Float64 if v.type == "f64" else t)._wrap(v))
            elif kind == STREAM:
                dsl_args.append(value)
            else:
                dsl_args.append(value)
        fn = self.traced_callable()
        with ir.building(host):
            converted = []
            for value, kk in zip(dsl_args, key):
                if kk[0] == SCALAR and type(value) is not kk[1]:
                    value = convert(value, kk[1])  # Float16 etc. arrive as f32
                converted.append(value)
            result = fn(*converted)
        if result is not None:
            raise DSLError(ARGUMENT_MISMATCH, f"@cute.jit function {self.fn.__name__} returned a value; host functions "
                           "called from Python return nothing", _definition(self.fn),
                           "write results into tensor arguments")
        signature = ", ".join(f"{p.name}: {p.type}" for p in params)
        loc = _definition(self.fn).mlir()
        body = ir.indent(host.lines + [f"return {loc}"])
        module.host_functions.append(f"func.func @{name}({signature}) {{\n{body}\n}} {loc}")
        text = module.text()
        self.accepted_spills = module.accepted_spills       # (of this trace: _warn_about_spills)
        if knobs().print_ir:
            print(f"// {self.fn.__qualname__}\n{text}", file=sys.stderr)
        return text

    def _stable_key(self, key: tuple) -> list | None:
        out = []
        for kk in key:
            if kk[0] in (TENSOR, TENSOR_ARG):
                t = TensorKey._make(kk)
                out.append(["T", t.dtype.__name__, t.shape, t.stride, t.alignment, t.wide])
            elif kk[0] == SCALAR:
                out.append(["S", kk[1].__name__])
            elif kk[0] == STREAM:
                out.append(["stream"])
            else:
                _, (kind, value) = kk  # (CONSTEXPR, _constexpr_key(value))
                stable = _stable(value)
                if stable is None:
                    return None  # an object without a stable spelling: memory cache only
                out.append(["C", _stable(kind), stable])   # (a tuple and a list, or two dataclasses, alike inside)
        return out

    def _source_fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = _fingerprint(self.fn)
        return self._fingerprint


def _compile_traced(text: str, arch: str, name: str, options: dict) -> CompiledModule:
    known = {"opt_level", "fmad", "ptxas_options", "line_info", "keep", "dump_dir", "cubin_backend"}
    unknown = set(options) - known
    if unknown:
        raise DSLError(ARGUMENT_MISMATCH, f"unknown compile options {sorted(unknown)}", user_location(),
                       f"options are: arch, {', '.join(sorted(known))}")
    keep = set(options.get("keep") or knobs().keep)
    if options.get("dump_dir") or knobs().dump_dir:
        keep.add("mlir")                                  # a dump holds the module as traced
    try:
        return compile_mlir(text, arch=arch, name=name, keep=sorted(keep), source_name=f"<{name}>", lazy_mlir=True,
                            **{k: v for k, v in options.items() if k != "keep"})
    except CompileError as e:
        if isinstance(e, DSLError):
            raise
        if e.kind == "options":  # a bad value for a known option: the caller's line
            raise DSLError(ARGUMENT_MISMATCH, e.message, user_location(),
                           f"options are: arch, {', '.join(sorted(known))}") from None
        where = e.location
        if where is None:
            raise
        location = Location(where.file, where.line, max(0, where.col - 1))
        if where.file.startswith("<"):  # a parse error points into our text: use that op's loc
            location = _loc_of_text_line(text, where.line)
            if location is None:
                raise
        hint = "this is where the IR the compiler rejected came from; CUTE_TORCH_PRINT_IR=1 prints it"
        if "undeclared SSA value" in where.message or "dominate" in where.message:
            hint = ("a DSL value made inside a dynamic if/for/while is used outside it (kept in a list or an "
                    "attribute?); assign it to a variable defined before the region instead")
        raise DSLError(MLIR_ERROR, f"{e.kind} error: {where.message}", location, hint,
                       diagnostics=e.diagnostics) from None


_LOC = re.compile(r'loc\("((?:[^"\\]|\\.)*)":(\d+):(\d+)\)\s*$')


def _loc_of_text_line(text: str, line: int) -> Location | None:
    lines = text.splitlines()
    for candidate in lines[line - 1:]:  # an op spanning lines has its loc after its region
        found = _LOC.search(candidate)
        if found:
            file = found.group(1).replace('\\"', '"').replace("\\\\", "\\")
            return Location(file, int(found.group(2)), int(found.group(3)) - 1)
    return None


_DSL_SOURCES: str | None = None


def dsl_source_files() -> list[str]:
    """The DSL's own sources, subpackages (nvgpu/) included, in a fixed order: they decide what
    IR a trace produces, so the disk cache's fingerprint hashes them all."""
    here = os.path.dirname(os.path.abspath(__file__))
    found = [os.path.join(root, file) for root, _, names in os.walk(here) for file in names if file.endswith(".py")]
    return sorted(found, key=lambda path: os.path.relpath(path, here))


def _fingerprint(fn: Callable) -> str:
    """A hash of the files defining `fn` and the user functions/classes it reaches through its
    globals, plus the DSL's own sources (dsl_source_files)."""
    global _DSL_SOURCES
    if _DSL_SOURCES is None:
        h = hashlib.sha256()
        for path in dsl_source_files():
            with open(path, "rb") as f:
                h.update(f.read())
        _DSL_SOURCES = h.hexdigest()
    files: set[str] = set()
    sources: list[str] = []
    seen: set[int] = set()

    def visit(obj, depth: int):
        obj = getattr(obj, "fn", obj)
        if id(obj) in seen or depth > 8:
            return
        seen.add(id(obj))
        code = getattr(obj, "__code__", None)
        if code is None:
            return
        if "site-packages" in code.co_filename:
            return
        if not code.co_filename.startswith("<"):
            files.add(code.co_filename)                   # its source: in its file's, hashed below
            sources.append(f"{obj.__module__}.{obj.__qualname__}")   # (getsource on each cost a GEMM's hit 70 ms)
        else:
            try:                                          # a notebook cell's function: linecache has it
                sources.append(f"{obj.__module__}.{obj.__qualname__}\n{inspect.getsource(obj)}")
            except (OSError, TypeError, AttributeError):
                sources.append(repr((code.co_code, code.co_consts, code.co_names)))
        for cell in getattr(obj, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if getattr(getattr(value, "fn", value), "__code__", None) is not None:
                visit(value, depth + 1)
            else:
                # A captured value can change what the trace emits while the source stays the
                # same: its stable spelling goes into the key, or this process's identity.
                stable = _stable(value)
                sources.append(f"closure {stable}" if stable is not None else f"closure id {os.getpid()}:{id(value)}")
        names = set()
        stack = [code]
        while stack:
            c = stack.pop()
            names.update(c.co_names)
            stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
        for n in sorted(names):   # (a set's order changes with each process's string hashing)
            target = obj.__globals__.get(n)
            if isinstance(target, (JitFunction, KernelFunction)) or inspect.isfunction(target):
                visit(target, depth + 1)
            elif isinstance(target, type) and target.__module__ in sys.modules:
                module_file = getattr(sys.modules[target.__module__], "__file__", None)
                if module_file and "site-packages" not in module_file:
                    files.add(module_file)

    visit(fn, 0)
    h = hashlib.sha256(_DSL_SOURCES.encode())
    for source in sources:
        h.update(source.encode())
    for file in sorted(files):
        try:
            with open(file, "rb") as f:
                h.update(file.encode() + b"\0" + f.read())
        except OSError:
            h.update(file.encode())
    return h.hexdigest()


# -- kernels and launches -------------------------------------------------------------------------------

class KernelFunction(_DSLFunction):
    """A device function (`@cute.kernel`): `kernel(args).launch(grid=, block=, ...)` from a
    @cute.jit function."""

    def __init__(self, fn: Callable, preprocess_mode: bool = True):
        super().__init__(fn, preprocess_mode)
        self._sig = _Signature(fn)

    def __get__(self, obj, objtype=None):
        return self if obj is None else types.MethodType(self, obj)

    def __call__(self, *args, **kwargs):
        b = ir.current()
        if b is None:
            raise DSLError(PYTHON_CALLS_KERNEL, f"@cute.kernel {self.fn.__name__} cannot be called from Python",
                           user_location(), f"launch it from a @cute.jit function: "
                           f"{self.fn.__name__}(...).launch(grid=..., block=...)")
        if b.kind == "device":
            raise DSLError(KERNEL_CALLS_KERNEL, f"@cute.kernel {self.fn.__name__} is called from device code",
                           user_location(), "kernels are launched from @cute.jit host functions; to share device "
                           "code, make it a @cute.jit function or a plain Python function")
        return KernelLaunch(self, self._sig.bind(args, kwargs))


def _dims(value, what: str) -> list:
    dims = list(value) if isinstance(value, (tuple, list)) else [value]
    if not 1 <= len(dims) <= 3:
        raise DSLError(INVALID_LAUNCH, f"{what} must have 1 to 3 dimensions, got {len(dims)}", user_location())
    for d in dims:
        if isinstance(d, int) and d < 1:
            raise DSLError(INVALID_LAUNCH, f"{what} dimensions must be positive, got {tuple(dims)}", user_location())
        if not isinstance(d, (int, Numeric)) or (isinstance(d, Numeric) and type(d).is_float):
            raise DSLError(INVALID_LAUNCH, f"{what} dimensions must be integers, got {type(d).__name__}",
                           user_location())
    return dims + [1] * (3 - len(dims))


class KernelLaunch:
    def __init__(self, kernel: KernelFunction, args: tuple):
        self.kernel = kernel
        self.args = args
        self.bounds: tuple = ()

    def launch(self, *, grid=(1, 1, 1), block=(1, 1, 1), smem=None, stream=None, cluster=None,
               min_blocks_per_mp: int | None = None, accepted_spill_bytes: int = 0) -> None:
        """Launches the kernel. A compile-time block size becomes the kernel's required block
        size (PTX .reqntid), which lets ptxas budget registers for it (setmaxnreg needs it);
        `min_blocks_per_mp` asks for that many resident CTAs per SM (.minnctapersm). `smem`
        (bytes of dynamic shared memory) defaults to what the kernel's SmemAllocator took.
        `accepted_spill_bytes`: spill stores the kernel's author measured and accepts (a bound
        that spills a little and still runs faster); ptxas's spills up to that raise no
        SpillWarning."""
        host = ir.require("host", "a kernel launch")
        grid, block = _dims(grid, "grid"), _dims(block, "block")
        self.bounds = _launch_bounds(block, min_blocks_per_mp)
        if isinstance(accepted_spill_bytes, bool) or not isinstance(accepted_spill_bytes, int) or \
                accepted_spill_bytes < 0:
            raise DSLError(INVALID_LAUNCH, f"accepted_spill_bytes must be a compile-time int >= 0, got "
                           f"{accepted_spill_bytes!r}", user_location())
        if all(isinstance(d, int) for d in block):
            threads = block[0] * block[1] * block[2]
            if threads > 1024:
                raise DSLError(INVALID_LAUNCH, f"block {tuple(block)} has {threads} threads; the limit is 1024",
                               user_location())
        if stream is not None and not is_stream(stream):
            raise DSLError(INVALID_LAUNCH, "launch(stream=...) takes the stream (a torch.cuda.Stream or CUstream) "
                           "passed to the @cute.jit function", user_location(),
                           "pass the stream as an argument of the @cute.jit function")
        if isinstance(smem, int) and smem < 0:
            raise DSLError(INVALID_LAUNCH, f"smem must be >= 0 bytes, got {smem}", user_location())
        symbol, operands = self._specialize(host)
        if accepted_spill_bytes:
            accepted = host.module.accepted_spills
            accepted[symbol] = max(accepted.get(symbol, 0), accepted_spill_bytes)
        needed = host.module.kernel_smem.get(symbol, 0)
        static = host.module.kernel_static_smem.get(symbol, 0)
        if smem is None:
            smem = needed
        limit = MAX_DYNAMIC_SMEM.get(host.module.arch or "")
        if limit is not None and isinstance(smem, int) and smem + static > limit:
            also = f" plus {static} of static shared memory" if static else ""
            raise DSLError(INVALID_LAUNCH, f"{smem} bytes of dynamic shared memory{also}; {host.module.arch} allows at "
                           f"most {limit} per block", user_location(),
                           "use fewer pipeline stages or smaller tiles")
        elif isinstance(smem, int) and smem < needed:
            raise DSLError(INVALID_LAUNCH, f"the kernel allocates {needed} bytes of dynamic shared memory "
                           f"(SmemAllocator) but the launch gives smem={smem}", user_location(),
                           "leave smem out: it is computed from the kernel's allocations")
        g = [index_of(d) for d in grid]
        t = [index_of(d) for d in block]
        s = convert(as_numeric(smem, Int32), Int32)
        args = ", ".join(f"{v.name} : {v.type}" for v in operands)
        attrs = ""
        if cluster is not None:
            dims = _dims(cluster, "cluster")
            if not all(isinstance(d, int) for d in dims):
                raise DSLError(INVALID_LAUNCH, "cluster dimensions must be compile-time", user_location())
            attrs = f" {{cute.cluster = array<i32: {dims[0]}, {dims[1]}, {dims[2]}>}}"
        host.emit(f"gpu.launch_func @{host.module.name}_kernels::@{symbol} blocks in ({g[0].name}, {g[1].name}, "
                  f"{g[2].name}) threads in ({t[0].name}, {t[1].name}, {t[2].name}) dynamic_shared_memory_size "
                  f"{s.ir.name} args({args}){attrs}")

    def _specialize(self, host: ir.FunctionBuilder) -> tuple[str, list[ir.Value]]:
        """The kernel symbol for these arguments (traced on first use) and the launch operands.
        Arguments are flattened (pytree.py): tensors and DSL scalars anywhere in tuples,
        NamedTuples, dataclasses or layouts become parameters; the rest is compile-time and,
        with the structure, part of the key."""
        leaves, tree = pytree.flatten(self.args, _is_kernel_leaf)
        signature, operands, attrs = [tree], [], []
        for leaf in leaves:
            if isinstance(leaf, Numeric):
                signature.append(("S", type(leaf)))
                operands.append(leaf.ir)
                attrs.append("")
            else:  # tensors, TMA atoms: several parameters each
                signature.append(leaf.signature())
                flat = leaf.flatten()
                operands += flat
                attrs += getattr(leaf, "param_attrs", lambda: [""] * len(flat))()
        key = (self.kernel, tuple(signature), self.bounds)
        module = host.module
        symbol = module.kernels.get(key)
        if symbol is None:
            symbol = module.kernels[key] = module.unique_symbol(_symbol(self.kernel.fn.__name__))
            self._trace(module, symbol, [o.type for o in operands], attrs, leaves, tree)
        return symbol, operands

    def _trace(self, module: ir.ModuleBuilder, symbol: str, types_: list[str], attrs: list[str], leaves: list,
               tree: pytree.Tree) -> None:
        device = ir.FunctionBuilder(module, "device", symbol)
        params = [device.block_arg(t) for t in types_]
        remaining = list(params)
        inside = []
        for leaf in leaves:
            if not isinstance(leaf, Numeric):
                n = leaf.param_count()
                inside.append(leaf.rebuild(remaining[:n]))
                del remaining[:n]
            else:
                inside.append(type(leaf)._wrap(remaining.pop(0)))
        kargs = pytree.unflatten(tree, inside)
        fn = self.kernel.traced_callable()
        with ir.building(device):
            result = fn(*kargs)
        if result is not None:
            raise DSLError(ARGUMENT_MISMATCH, f"@cute.kernel {self.kernel.fn.__name__} returned a value; kernels write "
                           "results to tensors", _definition(self.kernel.fn))
        signature = ", ".join(f"{p.name}: {p.type}" for p in params)
        bounds = list(self.bounds)
        grid_constants = [str(i) for i, a in enumerate(attrs) if a == "grid_constant"]
        if grid_constants:  # by-value parameters read in place (TMA descriptors)
            bounds.append(f"cute.grid_constant = array<i32: {', '.join(grid_constants)}>")
        # The kernel's `def` line locates the function (its debug scope with line info on).
        loc = _definition(self.kernel.fn).mlir()
        body = ir.indent(device.lines + [f"gpu.return {loc}"])
        module.kernel_smem[symbol] = smem_needed(device)
        module.kernel_static_smem[symbol] = getattr(device, "static_smem_bytes", 0)
        attrs = f" attributes {{{', '.join(bounds)}}}" if bounds else ""
        module.device_functions.append(f"gpu.func @{symbol}({signature}) kernel{attrs} {{\n{body}\n}} {loc}")


def _is_kernel_leaf(value) -> bool:
    """Run-time kernel parameters: DSL scalars, tensors and objects that flatten themselves into
    parameters (`__kernel_leaf__`: TMA atoms)."""
    return isinstance(value, (Tensor, Numeric)) or getattr(value, "__kernel_leaf__", False)


def _launch_bounds(block: list, min_blocks_per_mp) -> tuple:
    """The kernel attributes of a launch's bounds: nvvm.reqntid for a compile-time block,
    nvvm.minctasm for min_blocks_per_mp."""
    bounds = []
    if all(isinstance(d, int) for d in block):
        bounds.append(f"nvvm.reqntid = array<i32: {block[0]}, {block[1]}, {block[2]}>")
    if min_blocks_per_mp is not None:
        if isinstance(min_blocks_per_mp, bool) or not isinstance(min_blocks_per_mp, int) or min_blocks_per_mp < 1:
            raise DSLError(INVALID_LAUNCH, f"min_blocks_per_mp must be a positive compile-time int, got "
                           f"{min_blocks_per_mp!r}", user_location())
        bounds.append(f"nvvm.minctasm = {min_blocks_per_mp} : i32")
    return tuple(bounds)


def _warn_about_spills(module: CompiledModule, fn, accepted: dict) -> None:
    """A SpillWarning per kernel ptxas made spill past what its launch accepted
    (`accepted`: kernel symbol -> bytes), at the @cute.jit function's line."""
    for kernel in module.metadata.get("kernels", []):
        stores = kernel.get("spill_stores")
        if isinstance(stores, int) and stores > accepted.get(kernel.get("name"), 0):
            where = _definition(fn)
            block = kernel.get("block_dims")
            warnings.warn_explicit(
                f"kernel {kernel['name']} spills registers to local memory: {stores} bytes stored, "
                f"{kernel.get('spill_loads')} loaded, {kernel.get('registers')} registers per thread for a block of "
                f"{block}; a smaller tile, fewer stages or a smaller block may fit", SpillWarning, where.file,
                where.line)


def _definition(fn) -> Location:
    """Where `fn` is defined (its first line: the decorator's)."""
    return Location(fn.__code__.co_filename, fn.__code__.co_firstlineno)


# -- decorators and cute.compile --------------------------------------------------------------------

def jit(fn: Callable | None = None, *, preprocess: bool = True, options: dict | None = None):
    """Decorate a host function. `preprocess=False` is tracing-only mode (branches not taken
    vanish, loops unroll); `options` are compile options (opt_level, arch, keep, ...)."""
    if fn is None:
        return lambda f: JitFunction(f, preprocess, options)
    return JitFunction(fn, preprocess, options)


def kernel(fn: Callable | None = None, *, preprocess: bool = True):
    """Decorate a device function, launched from @cute.jit code with `.launch(...)`."""
    if fn is None:
        return lambda f: KernelFunction(f, preprocess)
    return KernelFunction(fn, preprocess)


def compile(fn, *args, options: dict | None = None, **kwargs) -> CompiledFunction:  # noqa: A001
    """Compile `fn` for these arguments without running it; call the result like `fn`. Works
    without a GPU (CPU tensors describe shapes and dtypes)."""
    if isinstance(fn, KernelFunction):
        raise DSLError(PYTHON_CALLS_KERNEL, "cute.compile takes a @cute.jit function, not a @cute.kernel",
                       user_location(), "wrap the launch in a @cute.jit function")
    if not isinstance(fn, JitFunction):
        fn = JitFunction(fn)
    return fn.compile(*args, options=options, **kwargs)

