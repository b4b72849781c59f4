"""Specialization keys, the in-memory cache and the disk cache (no GPU: cute.compile traces and
compiles for CPU tensors, and cached artifacts reload without a device)."""

import os
import subprocess
import sys
import warnings

import pytest
import torch

import cute_torch as cute
from cute_torch.dsl import cache
from cute_torch.dsl.jit import _arg_key

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

traces = []


@cute.kernel
def scale_kernel(x, y, factor: cute.Float32):
    i = cute.arch.thread_idx()[0]
    if i < cute.size(x):
        y[i] = x[i] * factor


@cute.jit
def scale(x, y, factor):
    traces.append(1)
    scale_kernel(x, y, factor).launch(grid=1, block=128)


def test_key_is_computed_without_tracing_and_separates_specializations():
    a, b = torch.zeros(100), torch.zeros(100)
    key = tuple(_arg_key(v, None) for v in (a, b, 2.0))
    assert key == tuple(_arg_key(v, None) for v in (torch.ones(100), torch.ones(100), 3.0))  # values don't matter
    assert key != tuple(_arg_key(v, None) for v in (torch.zeros(101), b, 2.0))  # static shape does
    assert key != tuple(_arg_key(v, None) for v in (a.half(), b, 2.0))  # dtype does
    assert key != tuple(_arg_key(v, None) for v in (a, b, 2))  # Float32 vs Int32 scalar
    unaligned = torch.zeros(101)[1:]
    assert _arg_key(unaligned, None) != _arg_key(torch.zeros(100), None)  # 16-byte alignment does
    dyn = cute.from_dlpack(torch.zeros(100)).mark_layout_dynamic()
    assert _arg_key(dyn, None) == _arg_key(cute.from_dlpack(torch.zeros(7)).mark_layout_dynamic(), None)
    # keep_broadcast: a stride-0 (expanded) mode stays static, so broadcasting is a specialization.
    bias = cute.from_dlpack(torch.zeros(64).expand(32, 64)).mark_layout_dynamic(keep_broadcast=True)
    assert bias.dynamic_values() == [32, 64] and bias.key(0).stride == (0, 1)
    plain = cute.from_dlpack(torch.zeros(32, 64)).mark_layout_dynamic(keep_broadcast=True)
    assert _arg_key(bias, None) != _arg_key(plain, None) and plain.dynamic_values() == [32, 64, 64]


def test_compile_time_values_key_by_type_and_value_inside_containers():
    """A Constexpr tuple of 1, 1.0 or True, or of 0.0 or -0.0, is a different kernel (Python's ==
    would merge them); an unhashable value is keyed by identity and kept alive by its key, so a
    freed object's address reused by another cannot hit the first one's kernel."""
    import dataclasses
    const = cute.Constexpr

    def key(v):
        return _arg_key(v, const)
    assert len({key((1,)), key((1.0,)), key((True,))}) == 3
    assert key((0.0,)) != key((-0.0,)) and key(0.0) != key(-0.0)
    assert key([1, [2.0]]) == key([1, [2.0]]) and key([1, [2.0]]) != key([1, [2]])
    assert key(float("nan")) == key(float("nan"))

    @dataclasses.dataclass
    class Tile:                      # not frozen: unhashable, keyed field by field
        m: int
        scale: float
    assert key(Tile(128, 1.0)) == key(Tile(128, 1.0)) and key(Tile(128, 1.0)) != key(Tile(128, 1))

    class Opaque:
        __hash__ = None              # unhashable and no structure: identity
    first = Opaque()
    k = key(first)
    del first                        # the key still holds the object: its address is not reused
    assert k != key(Opaque()) and k == k


def test_the_disk_key_spells_a_compile_time_values_type():
    """The disk cache's key (a stable spelling of the memory key) names a Constexpr's type, as the
    memory key does: a tuple and a list, or two dataclasses, with equal contents are different
    kernels on disk too (their spellings once dropped the outer type and matched)."""
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Wide:
        n: int

    @dataclasses.dataclass(frozen=True)
    class Narrow:
        n: int
    args = [torch.zeros(8), torch.zeros(8)]
    spelled = [scale._stable_key(tuple(_arg_key(v, a) for v, a in zip(args + [c], [None, None, cute.Constexpr])))
               for c in ((4,), [4], Wide(4), Narrow(4))]
    assert None not in spelled and len({str(s) for s in spelled}) == 4


def test_the_short_paths_keys_are_arg_keys():
    """A jit call without annotations keys Python scalars by type (ints in Int32's range at
    once): the same keys _arg_key gives, edges of the range included."""
    from cute_torch.dsl.jit import _INT32_KEY, _INT32_LIMIT, _SCALAR_KEYS
    for value in (0, -_INT32_LIMIT, _INT32_LIMIT - 1):
        assert _arg_key(value, None) == _INT32_KEY
    assert _arg_key(_INT32_LIMIT, None) != _INT32_KEY and _arg_key(-_INT32_LIMIT - 1, None) != _INT32_KEY
    assert all(_arg_key(t(1), None) == key for t, key in _SCALAR_KEYS.items())


def test_the_memory_caches_repeat_shortcut_keeps_lru_order():
    """The most recent (key, spec) answers a repeated call without hashing or reordering; the
    order of eviction stays least recently used."""
    memory = cache.MemoryCache()
    memory.put("a", 1, 2)
    memory.put("b", 2, 2)
    assert memory.get("a") == 1 and memory.get("a") == 1      # the second from the shortcut
    memory.put("c", 3, 2)                                    # evicts b, used before a
    assert "b" not in memory and memory.get("a") == 1 and memory.get("c") == 3 and memory.get("b") is None


def test_memory_cache_compiles_each_specialization_once(monkeypatch):
    monkeypatch.setenv("CUTE_TORCH_NO_CACHE", "1")
    traces.clear()
    first = scale.compile(torch.zeros(64), torch.zeros(64), 2.0)
    again = scale.compile(torch.ones(64), torch.ones(64), 5.0)
    assert len(traces) == 1 and first._spec is again._spec
    scale.compile(torch.zeros(65), torch.zeros(65), 2.0)
    assert len(traces) == 2


def test_the_memory_cache_keeps_the_most_recent_specializations(monkeypatch, tmp_path):
    """CUTE_TORCH_MEMORY_CACHE_SIZE bounds each function's in-memory specializations (least
    recently used out); an evicted one is freed and comes back from the disk cache, untraced."""
    import gc
    import weakref
    monkeypatch.setenv("CUTE_TORCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CUTE_TORCH_MEMORY_CACHE_SIZE", "3")
    traces.clear()
    specs = [weakref.ref(scale.compile(torch.zeros(n), torch.zeros(n), 2.0)._spec) for n in range(70, 75)]
    assert len(scale._cache) == 3 and len(traces) == 5
    gc.collect()
    assert specs[0]() is None and specs[1]() is None and specs[4]() is not None   # the evicted are freed
    scale.compile(torch.zeros(72), torch.zeros(72), 2.0)                            # a hit: now most recent
    scale.compile(torch.zeros(75), torch.zeros(75), 2.0)                            # evicts 73, not 72
    assert len(traces) == 6
    scale.compile(torch.zeros(72), torch.zeros(72), 2.0)
    scale.compile(torch.zeros(70), torch.zeros(70), 2.0)                            # back from disk
    assert len(traces) == 6
    monkeypatch.setenv("CUTE_TORCH_MEMORY_CACHE_SIZE", "0")
    with pytest.raises(ValueError, match="CUTE_TORCH_MEMORY_CACHE_SIZE must be a positive integer"):
        scale.compile(torch.zeros(76), torch.zeros(76), 2.0)


MEMORY_SCRIPT = """
import gc, os, sys, torch
sys.path.insert(0, {root!r})
import cute_torch as cute

@cute.kernel
def k(x, n: cute.Int32):
    i = cute.arch.thread_idx()[0]
    if i < n:
        x[i] = x[i] * 2.0 + 1.0

@cute.jit
def host(x, n):
    k(x, n).launch(grid=1, block=64)

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

for n in range(64, 104):          # past the limit, and the allocator and caches warm
    host.compile(torch.zeros(n), n)
gc.collect()
before = rss()
for n in range(200, 440):         # (240: a heap's growth steps spread over enough of them)
    host.compile(torch.zeros(n), n)
gc.collect()
print((rss() - before) / 240)
"""


def test_memory_stays_flat_past_the_limit(tmp_path):
    """240 more specializations past a limit of 4 grow the process by well under what keeping
    them costs (about 0.6 MB each measured: modules and host code). What they do grow it by
    is native (Python's heap: about 240 bytes each, tracemalloc): 8-17 KB each with the
    process-wide host JIT, 90-120 KB with an ExecutionEngine per artifact before it."""
    script = tmp_path / "memory.py"
    script.write_text(MEMORY_SCRIPT.format(root=ROOT))
    env = dict(os.environ, CUTE_TORCH_NO_CACHE="1", CUTE_TORCH_ARCH="sm_90a", CUTE_TORCH_MEMORY_CACHE_SIZE="4")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    per_specialization = float(result.stdout.strip().splitlines()[-1])
    assert per_specialization < 150_000, per_specialization


SCRIPT = """
import sys, torch
sys.path.insert(0, {root!r})
import cute_torch as cute

@cute.kernel
def k(x, n: cute.Int32):
    i = cute.arch.thread_idx()[0]
    if i < n:
        x[i] = x[i] + 1.0

@cute.jit
def host(x, n):
    print("tracing", file=sys.stderr)
    k(x, n).launch(grid=1, block=64)

f = cute.compile(host, torch.zeros(64), 64)
assert f.__ptx__ and ".entry" in f.__ptx__
print(len(f.__cubin__))
print(len(f.__mlir__))          # printed from the traced module: compiled now, or the entry's copy
"""


def _run(tmp_path, cache_dir):
    script = tmp_path / "cached.py"
    script.write_text(SCRIPT.format(root=ROOT))
    env = dict(os.environ, CUTE_TORCH_CACHE_DIR=str(cache_dir))
    env.pop("CUTE_TORCH_NO_CACHE", None)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)


def test_disk_cache_serves_a_fresh_process_without_tracing(tmp_path):
    cache_dir = tmp_path / "cache"
    cold = _run(tmp_path, cache_dir)
    assert cold.returncode == 0, cold.stderr
    assert "tracing" in cold.stderr
    entries = [os.path.join(d, f) for d, _, files in os.walk(cache_dir) for f in files]
    kernels = [e for e in entries if e.endswith(".bin")]    # beside them the two functions' rewrites
    assert len(kernels) == 1 and len(entries) == 3 and not any(".tmp-" in e for e in entries)
    warm = _run(tmp_path, cache_dir)
    assert warm.returncode == 0, warm.stderr
    assert "tracing" not in warm.stderr  # loaded: no trace, no compile
    assert warm.stdout == cold.stdout  # same CUBIN size, same printed module


def test_a_rebuilt_compiler_does_not_reuse_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("CUTE_TORCH_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("CUTE_TORCH_NO_CACHE", raising=False)
    assert cache.compiler_build_id() != "unknown"  # the library's size and mtime
    x = torch.empty(100)

    def compile_fresh():  # a new JitFunction: no in-memory cache, only the disk one
        traces.clear()
        cute.compile(cute.jit(scale.fn), x, x, 2.0)
        return len(traces)

    assert compile_fresh() == 1
    assert compile_fresh() == 0  # loaded from disk
    monkeypatch.setattr(cache, "_BUILD_ID", "another-build")
    assert compile_fresh() == 1  # another compiler build: traced and compiled again


def test_corrupt_entry_is_recompiled_not_trusted(tmp_path):
    cache_dir = tmp_path / "cache"
    assert _run(tmp_path, cache_dir).returncode == 0
    [entry] = [os.path.join(d, f) for d, _, files in os.walk(cache_dir) for f in files if f.endswith(".bin")]
    data = bytearray(open(entry, "rb").read())
    data[-10] ^= 0xFF  # flip a byte inside a CUBIN
    open(entry, "wb").write(bytes(data))
    again = _run(tmp_path, cache_dir)
    assert again.returncode == 0, again.stderr
    assert "corrupt cache entry" in again.stderr and "tracing" in again.stderr


def test_cache_store_and_load_round_trip(tmp_path):
    digest = cache.digest("x", 1)
    cache.store(str(tmp_path), digest, b"\x7fELF host", "{}", [("m", b"\x00\x01cubin")], {"ptx": "text"}, b"src")
    assert cache.load(str(tmp_path), digest) == (b"\x7fELF host", "{}", [("m", b"\x00\x01cubin")], {"ptx": "text"},
                                                 b"src")
    with open(cache._path(str(tmp_path), digest), "r+b") as f:
        f.write(b"garbage")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert cache.load(str(tmp_path), digest) is None
    assert not os.path.exists(cache._path(str(tmp_path), digest))


def test_examples_compile_without_a_gpu(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, CUTE_TORCH_CACHE_DIR=str(tmp_path))
    for example in ("hello_world.py", "vector_add.py", "stages.py", "epilogue_metaprogramming.py"):
        result = subprocess.run([sys.executable, os.path.join(ROOT, "examples", example)], capture_output=True,
                                text=True, env=env)
        assert result.returncode == 0, f"{example}: {result.stderr}"
        if example == "stages.py":
            assert result.stdout.splitlines() == ["[add_dynamicexpr] result = ?", "[add_constexpr] result = 7.0",
                                                  "[add_hybrid] result = ?"]


def test_host_entry_is_public_and_stable():
    """What a C++ fast path needs (the pointwise op uses it): the packed entry's address and the
    runtime object's, the same for the same compiled function, distinct across functions."""
    x = torch.randn(64)
    compiled = cute.compile(scale, x, torch.empty_like(x), 2.0)
    entry = compiled.host_entry()
    assert entry.address > 0 and entry.runtime > 0 and entry == compiled.host_entry()
    other = cute.compile(scale, torch.randn(32), torch.empty(32), 2.0).host_entry()
    assert other.address != entry.address and other.runtime != entry.runtime


def _scaler(factor):
    """The same source for every factor: only the captured value differs."""
    @cute.kernel
    def scale_by(x: cute.Tensor):
        i = cute.arch.thread_idx()[0]
        x[i] = x[i] * factor

    @cute.jit
    def host(x: cute.Tensor):
        scale_by(x).launch(grid=1, block=32)
    return host


def test_captured_values_are_part_of_the_disk_cache_key():
    # A disk-cache hit once served the first factor's kernel for every factor.
    x = torch.randn(32)
    assert "0f40400000" in cute.compile(_scaler(3.0), x).__ptx__  # 3.0
    assert "0f40A00000" in cute.compile(_scaler(5.0), x).__ptx__  # 5.0


def test_the_disk_cache_fingerprint_hashes_every_dsl_source():
    """jit.dsl_source_files: the DSL's sources that the disk cache's fingerprint hashes include
    its subpackages (nvgpu/: the warp and warpgroup MMA atoms, cp.async), whose edits change
    the IR a trace produces; they were once left out, so such an edit kept serving old kernels."""
    from cute_torch.dsl import jit
    here = os.path.dirname(os.path.abspath(jit.__file__))
    files = [os.path.relpath(path, here) for path in jit.dsl_source_files()]
    nvgpu = {os.path.join("nvgpu", name) for name in ("warp.py", "warpgroup.py", "cpasync.py")}
    assert nvgpu | {"jit.py", "tensor.py"} <= set(files), files
    assert files == sorted(files) and len(files) == len(set(files))


def test_the_cpp_dispatch_keys_like_the_python_key():
    """dispatch.py's C++ side (csrc/torch/JitDispatch.cpp), without a GPU: a specialization
    registered for some arguments is hit (its launch is attempted: no driver here, so the
    Python path's CudaError) by arguments the Python key does not tell apart, and missed by any
    the Python key does; a hit touches the memory cache's entry once per change of key, and a
    removed entry is missed."""
    from cute_torch.dsl import dispatch
    touched = []
    fast = dispatch.make(touched.append)
    if fast is None:
        pytest.skip("the torch extension is not built")
    x = torch.randn(64, generator=torch.Generator().manual_seed(0))
    host = cute.compile(scale, x, torch.empty(64), 2.0).host_entry()
    args = (x, torch.empty(64), 2.0)
    assert fast._add(args, "key", object(), host.address, host.runtime, "ppf", 0)
    for same in [args, (torch.ones(64), torch.zeros(64), -1.5), (torch.nn.Parameter(x), args[1], 0.5)]:
        with pytest.raises(cute.CudaError):
            fast.call(same)
    assert touched == ["key"]  # the later hits had the same key: no reorder
    others = [(x[1:33], args[1], 2.0),                   # another shape, and 4-byte aligned data
              (x[:32], args[1], 2.0), (x.double(), args[1], 2.0), (x.view(8, 8).t(), args[1], 2.0),
              (x, args[1], 2), (x, args[1], True), (x, args[1], 1 << 40), (x, args[1], torch.tensor(2.0)),
              (x, args[1]), (x, args[1], 2.0, 1)]
    for other in others:
        assert fast.call(other) is False, other
    assert fast._add((x[:32], args[1], 1), "int", object(), host.address, host.runtime, "ppi", 0)
    with pytest.raises(cute.CudaError):
        fast.call((torch.ones(32), args[1], 7))
    fast.remove("key")
    assert fast.call(args) is False
    with pytest.raises(cute.CudaError):  # the other entry stays
        fast.call((torch.ones(32), args[1], 7))
    assert not fast._add((x, args[1], 1 << 40), "big", object(), host.address, host.runtime, "ppi", 0)
    # An argument that does not go where the host function takes it is not registered (a handle
    # compiled for a float and first called with an int would launch the int's bits).
    assert not fast._add((x, args[1], 2), "int for f32", object(), host.address, host.runtime, "ppf", 0)
    assert not fast._add((x, 2.0, 2.0), "float for a pointer", object(), host.address, host.runtime, "ppf", 0)


def _clamp_body(x, n):
    out = 0
    for i in range(n):
        if x[i] > 0:
            out = out + x[i]
    return out


def _code_tree(code):
    """A code object's instructions, names and constants, nested functions' included."""
    consts = tuple(_code_tree(c) if hasattr(c, "co_code") else c for c in code.co_consts)
    return code.co_code, code.co_names, code.co_varnames, code.co_filename, code.co_firstlineno, consts


def test_a_rewrite_is_read_back_from_the_disk_cache(tmp_path, monkeypatch):
    """The preprocessor's rewrite of a function is stored once and read back (no rewrite) while
    its source and the preprocessor are unchanged; a corrupt entry is rewritten, a moved function
    is another entry, and with the cache off nothing is read or written."""
    from cute_torch.dsl import control, preprocess
    monkeypatch.setenv("CUTE_TORCH_CACHE_DIR", str(tmp_path))
    rewrites = []
    real = preprocess._rewrite
    monkeypatch.setattr(preprocess, "_rewrite", lambda *a: rewrites.append(1) or real(*a))
    first = preprocess.preprocess(_clamp_body)
    again = preprocess.preprocess(_clamp_body)
    assert len(rewrites) == 1
    [entry] = [os.path.join(d, f) for d, _, files in os.walk(tmp_path) for f in files]
    # The same rewritten code, read back.
    assert _code_tree(again.factory.__code__) == _code_tree(first.factory.__code__)
    assert "__cute_rt.for_loop" in first.source and callable(again.instantiate(control))
    open(entry, "wb").write(b"not a code object")
    preprocess.preprocess(_clamp_body)
    assert len(rewrites) == 2
    preprocess.preprocess(_clamp_body)
    assert len(rewrites) == 2                             # the corrupt entry was replaced
    monkeypatch.setenv("CUTE_TORCH_NO_CACHE", "1")
    preprocess.preprocess(_clamp_body)
    assert len(rewrites) == 3
    assert len([f for _, _, files in os.walk(tmp_path) for f in files]) == 1
    assert again.source == first.source and len(rewrites) == 4   # read back: rewritten again to be shown


def test_the_fingerprint_is_the_same_in_every_process():
    """The source fingerprint (part of every disk-cache key) may not depend on the process's
    string hashing: it visited a function's globals in a set's order, so the GEMM's key changed
    from process to process and its disk-cache entries were never hit."""
    script = ("import sys; sys.path.insert(0, %r)\n"
              "from cute_torch.kernels.gemm_sm90 import _gemm_host\n"
              "print(_gemm_host._source_fingerprint())" % ROOT)
    prints = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                             env=dict(os.environ, PYTHONHASHSEED=str(seed))).stdout for seed in (1, 2, 3)}
    assert len(prints) == 1 and len(prints.pop().strip()) == 64
