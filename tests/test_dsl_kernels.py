"""GPU tier of the DSL: kernels written in the DSL against references computed in higher
precision on fresh random inputs, outputs poisoned first, every element checked."""

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import cute_torch as cute  # noqa: E402

pytestmark = pytest.mark.gpu
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def poisoned(shape, dtype=torch.float32):
    shape = (shape,) if isinstance(shape, int) else shape
    if dtype.is_floating_point:
        return torch.full(shape, float("nan"), device="cuda").to(dtype)
    return torch.full(shape, -12345, device="cuda", dtype=dtype)


@cute.kernel
def add_1d(a, b, c):
    i = cute.arch.block_idx()[0] * cute.arch.block_dim()[0] + cute.arch.thread_idx()[0]
    if i < cute.size(c):
        c[i] = a[i] + b[i]


@cute.jit
def vector_add(a, b, c):
    add_1d(a, b, c).launch(grid=((cute.size(c) + 127) // 128, 1, 1), block=(128, 1, 1))


@pytest.mark.parametrize("n", [1, 127, 1000, 65537, 1 << 20])
@pytest.mark.parametrize("dynamic", [False, True])
def test_vector_add_static_and_dynamic_layouts(n, dynamic):
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = poisoned(n)
    args = [a, b, c]
    if dynamic:
        args = [cute.from_dlpack(t).mark_layout_dynamic() for t in args]
    vector_add(*args)
    torch.cuda.synchronize()
    assert torch.equal(c, (a.double() + b.double()).float())


@cute.kernel
def add_2d(a, b, c):
    i = cute.arch.block_idx()[0]
    j = cute.arch.thread_idx()[0]
    if j < c.shape[1]:
        c[i, j] = a[i, j] + b[i, j]


@cute.jit
def matrix_add(a, b, c):
    add_2d(a, b, c).launch(grid=(c.shape[0], 1, 1), block=(256, 1, 1))


@pytest.mark.parametrize("dynamic", [False, True])
def test_non_contiguous_strides(dynamic):
    base = torch.randn(64, 300, device="cuda")
    a = base[::2, 7:207]  # row stride 600, 200 columns
    b = torch.randn(200, 32, device="cuda").t()  # column-major view
    c = poisoned((32, 200))
    args = [a, b, c]
    if dynamic:
        args = [cute.from_dlpack(t).mark_layout_dynamic() for t in args]
    matrix_add(*args)
    torch.cuda.synchronize()
    assert torch.equal(c, (a.double() + b.double()).float())


@cute.kernel
def saxpy_kernel(alpha: cute.Float32, x, y, out, n: cute.Int32):
    i = cute.arch.block_idx()[0] * 256 + cute.arch.thread_idx()[0]
    if i < n:
        out[i] = alpha * x[i] + y[i]


@cute.jit
def saxpy(alpha, x, y, out, n):
    saxpy_kernel(alpha, x, y, out, n).launch(grid=((n + 255) // 256, 1, 1), block=(256, 1, 1))


def test_saxpy_with_scalar_arguments():
    n = 10007
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    for alpha in (0.5, -3.25):
        out = poisoned(n)
        saxpy(alpha, x, y, out, n - 7)  # the last 7 stay untouched
        torch.cuda.synchronize()
        expected = (alpha * x.double() + y.double()).float()
        torch.testing.assert_close(out[: n - 7], expected[: n - 7], rtol=1e-6, atol=1e-6)
        assert torch.isnan(out[n - 7:]).all()


@cute.kernel
def block_sum_kernel(x, partial, n: cute.Int32):
    tid = cute.arch.thread_idx()[0]
    block = cute.arch.block_idx()[0]
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    sums = cute.arch.alloc_smem(cute.Float32, (8,))
    i = block * 256 + tid
    v = x[i] if i < n else cute.Float32(0.0)
    for offset in cute.range_constexpr(5):  # 16, 8, 4, 2, 1
        v = v + cute.arch.shuffle_sync(v, 16 >> offset, mode="down")
    if lane == 0:
        sums[warp] = v
    cute.arch.sync_threads()
    if warp == 0:
        w = sums[lane] if lane < 8 else cute.Float32(0.0)
        for offset in cute.range_constexpr(3):
            w = w + cute.arch.shuffle_sync(w, 4 >> offset, mode="bfly")
        if lane == 0:
            partial[block] = w


@cute.jit
def block_sum(x, partial, n):
    block_sum_kernel(x, partial, n).launch(grid=((n + 255) // 256, 1, 1), block=(256, 1, 1))


def test_block_reduction_with_shared_memory_barriers_and_shuffles():
    n = 100_003
    x = torch.randn(n, device="cuda")
    blocks = (n + 255) // 256
    partial = poisoned(blocks)
    block_sum(x, partial, n)
    torch.cuda.synchronize()
    padded = torch.zeros(blocks * 256, device="cuda", dtype=torch.float64)
    padded[:n] = x.double()
    expected = padded.view(blocks, 256).sum(1)
    torch.testing.assert_close(partial.double(), expected, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(partial.double().sum(), x.double().sum(), rtol=1e-5, atol=1e-3)


@cute.kernel
def collatz_kernel(start, steps, n: cute.Int32):
    i = cute.arch.block_idx()[0] * 128 + cute.arch.thread_idx()[0]
    if i < n:
        v = start[i]
        count = cute.Int32(0)
        while v != 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            count += 1
        steps[i] = count


@cute.jit
def collatz(start, steps, n):
    collatz_kernel(start, steps, n).launch(grid=((n + 127) // 128, 1, 1), block=(128, 1, 1))


def test_data_dependent_while_loop():
    n = 5000
    start = torch.randint(1, 100_000, (n,), device="cuda", dtype=torch.int64)
    steps = poisoned(n, torch.int32)
    collatz(start, steps, n)
    torch.cuda.synchronize()

    def reference(v):
        count = 0
        while v != 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            count += 1
        return count

    assert steps.cpu().tolist() == [reference(v) for v in start.cpu().tolist()]


@cute.kernel
def classify_kernel(x, out, lo: cute.Float32, hi: cute.Float32):
    i = cute.arch.block_idx()[0] * 128 + cute.arch.thread_idx()[0]
    if i < cute.size(x):
        v = x[i]
        score = cute.Float32(0.0)
        if v < lo:
            score = v * 2.0
            if v < lo * 2.0:
                score = score - 1.0
        elif v < hi:
            score = v
        else:
            score = cute.math.sqrt(v)
        out[i] = score


@cute.jit
def classify(x, out, lo, hi):
    classify_kernel(x, out, lo, hi).launch(grid=((cute.size(x) + 127) // 128, 1, 1), block=(128, 1, 1))


def test_nested_if_elif_else_with_carried_variables():
    x = torch.randn(4099, device="cuda") * 3
    out = poisoned(4099)
    classify(x, out, -1.0, 1.0)
    torch.cuda.synchronize()
    v = x.double()
    expected = torch.where(v < -1, torch.where(v < -2, v * 2 - 1, v * 2), torch.where(v < 1, v, v.clamp_min(0).sqrt()))
    torch.testing.assert_close(out.double(), expected, rtol=1e-6, atol=1e-6)


@cute.kernel
def convert_kernel(x, h, b, f8, back):
    i = cute.arch.block_idx()[0] * 128 + cute.arch.thread_idx()[0]
    if i < cute.size(x):
        v = x[i]
        h[i] = v.to(cute.Float16)
        b[i] = v.to(cute.BFloat16)
        f8[i] = v.to(cute.Float8E4M3FN)
        back[i] = f8[i].to(cute.Float32) + b[i].to(cute.Float32) * 0.0


@cute.jit
def conversions(x, h, b, f8, back):
    convert_kernel(x, h, b, f8, back).launch(grid=((cute.size(x) + 127) // 128, 1, 1), block=(128, 1, 1))


def test_fp16_bf16_fp8_conversions_round_like_torch():
    x = torch.randn(3000, device="cuda") * 10
    h, b = poisoned(3000, torch.float16), poisoned(3000, torch.bfloat16)
    f8 = torch.zeros(3000, device="cuda", dtype=torch.float8_e4m3fn)
    back = poisoned(3000)
    conversions(x, h, b, f8, back)
    torch.cuda.synchronize()
    assert torch.equal(h, x.half())
    assert torch.equal(b, x.bfloat16())
    assert torch.equal(f8.float(), x.to(torch.float8_e4m3fn).float())
    assert torch.equal(back, x.to(torch.float8_e4m3fn).float())


@cute.kernel
def bf16_kernel(x, narrowed, every_bf16, widened, p, q, r, out):
    i = cute.arch.block_idx()[0] * 128 + cute.arch.thread_idx()[0]
    if i < cute.size(x):
        narrowed[i] = x[i].to(cute.BFloat16)           # cvt.rn.bf16.f32
    if i < cute.size(every_bf16):
        widened[i] = every_bf16[i].to(cute.Float32)    # cvt.f32.bf16
    if i < cute.size(p):
        out[i] = p[i] * q[i] + r[i]                    # each op rounds to bf16, as torch's do


@cute.jit
def bf16_ops(x, narrowed, every_bf16, widened, p, q, r, out):
    bf16_kernel(x, narrowed, every_bf16, widened, p, q, r, out).launch(
        grid=((cute.size(x) + 127) // 128, 1, 1), block=(128, 1, 1))


def same_bits_or_both_nan(got, expected):
    nan = torch.isnan(expected.float())
    assert torch.equal(torch.isnan(got.float()), nan)
    bits = torch.int16 if got.dtype == torch.bfloat16 else torch.int32
    return torch.equal(got.view(bits)[~nan], expected.view(bits)[~nan])


def test_bf16_is_a_real_type_and_rounds_like_torch_bit_for_bit():
    """BFloat16 is MLIR's bf16 (LLVM selects the conversions): every f32 class (random bit
    patterns cover normals, subnormals, infinities and NaNs; ties to even are planted), every
    one of the 65536 bf16 patterns widened, and bf16 arithmetic against torch's, bit for bit."""
    gen = torch.Generator(device="cuda").manual_seed(1490)
    n = 1 << 17
    random_bits = torch.randint(-2**31, 2**31, (n,), device="cuda", generator=gen, dtype=torch.int64)
    upper = random_bits[: n // 4] & ~0xFFFF
    ties = torch.cat([upper | 0x8000, upper | 0x7FFF, upper | 0x8001, (upper + 0x10000) | 0x8000])
    x = torch.cat([random_bits, ties]).to(torch.int32).view(torch.float32)
    specials = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-45, -1e-45,
                             3.3895314e38, 3.4028235e38, 1.1754942e-38], device="cuda")
    x = torch.cat([x, specials])
    every_bf16 = torch.arange(-32768, 32768, device="cuda", dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    p, q, r = (torch.randn(4096, device="cuda", generator=gen).mul(8).bfloat16() for _ in range(3))
    narrowed = poisoned(x.numel(), torch.bfloat16)
    widened = poisoned(every_bf16.numel())
    out = poisoned(4096, torch.bfloat16)
    bf16_ops(x, narrowed, every_bf16, widened, p, q, r, out)
    torch.cuda.synchronize()
    assert same_bits_or_both_nan(narrowed, x.bfloat16())
    assert same_bits_or_both_nan(widened, every_bf16.float())
    assert torch.equal(out, p * q + r)


@cute.kernel
def atomics_kernel(x, counter, biggest):
    i = cute.arch.block_idx()[0] * 128 + cute.arch.thread_idx()[0]
    if i < cute.size(x):
        cute.arch.atomic_add(counter, 0, 1)
        cute.arch.atomic_max(biggest, 0, x[i])


@cute.jit
def atomics(x, counter, biggest):
    atomics_kernel(x, counter, biggest).launch(grid=((cute.size(x) + 127) // 128, 1, 1), block=(128, 1, 1))


def test_atomics():
    x = -torch.rand(1000, device="cuda") - 0.5  # all negative: exercises the float max ordering
    counter = torch.zeros(1, device="cuda", dtype=torch.int32)
    biggest = torch.full((1,), -1e30, device="cuda")
    atomics(x, counter, biggest)
    torch.cuda.synchronize()
    assert counter.item() == 1000 and biggest.item() == x.max().item()


def test_launch_goes_to_the_current_stream():
    n = 1 << 22
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = poisoned(n)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        vector_add(a, b, c)
        d = c * 2  # ordered after the kernel only if it ran on `side`
    torch.cuda.synchronize()
    assert torch.equal(d, (a + b) * 2)


def _python(code: str, tmp_path):
    script = tmp_path / "printf_script.py"  # the preprocessor reads source from a file
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=ROOT)


def test_printf_output_from_a_subprocess(tmp_path):
    code = """
import torch, cute_torch as cute
@cute.kernel
def k(x):
    tid = cute.arch.thread_idx()[0]
    if tid < 3:
        v = x[tid]
        cute.printf(f"tid={tid} v={v:.2f}")
        cute.printf("pct %d%%", tid * 10)
@cute.jit
def host(x):
    k(x).launch(grid=1, block=32)
host(torch.tensor([0.5, 1.25, -2.0], device="cuda"))
torch.cuda.synchronize()
"""
    result = _python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    lines = sorted(result.stdout.splitlines())
    assert lines == sorted(["tid=0 v=0.50", "tid=1 v=1.25", "tid=2 v=-2.00", "pct 0%", "pct 10%", "pct 20%"])


def test_examples_run_and_print_what_the_seed_shows():
    stages = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "stages.py")], capture_output=True,
                            text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert stages.returncode == 0, stages.stderr
    assert stages.stdout.splitlines() == ["[add_dynamicexpr] result = ?", "[add_constexpr] result = 7.0",
                                          "[add_hybrid] result = ?"]
    hello = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "hello_world.py")], capture_output=True,
                           text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert hello.returncode == 0 and hello.stdout == "Hello world\n", hello.stderr
    epilogue = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "epilogue_metaprogramming.py")],
                              capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert epilogue.returncode == 0, epilogue.stderr
    errors = [float(line.split("max error ")[1]) for line in epilogue.stdout.splitlines()]
    assert len(errors) == 4 and max(errors) < 1e-4


def test_compiled_handle_runs_without_retracing():
    n = 4096
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = poisoned(n)
    compiled = cute.compile(vector_add, a, b, c)
    compiled(a, b, c)
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)


@cute.kernel
def elementwise_math_kernel(x, y, fused, largest, smallest):
    # One thread per 8-element row: each row is a TensorSSA.
    row = cute.arch.block_idx()[0] * cute.arch.block_dim()[0] + cute.arch.thread_idx()[0]
    if row < x.shape[0]:
        v, w = x[(row, None)].load(), y[(row, None)].load()
        fused[(row, None)].store(cute.math.fma(v, w, 0.25))
        largest[(row, None)].store(cute.math.max(cute.math.max(v, v), cute.math.max(-0.5, w)))
        smallest[(row, None)].store(cute.math.min(0.5, cute.math.min(v, w)))


@cute.jit
def elementwise_math(x, y, fused, largest, smallest):
    elementwise_math_kernel(x, y, fused, largest, smallest).launch(grid=((x.shape[0] + 63) // 64, 1, 1),
                                                                   block=(64, 1, 1))


def test_fma_min_max_over_tensor_ssa_match_fp64():
    g = torch.Generator(device="cuda").manual_seed(20)
    x = torch.randn(1000, 8, device="cuda", generator=g)
    y = torch.randn(1000, 8, device="cuda", generator=g)
    fused, largest, smallest = poisoned((1000, 8)), poisoned((1000, 8)), poisoned((1000, 8))
    elementwise_math(x, y, fused, largest, smallest)
    xd, yd = x.double(), y.double()
    # One rounding: fp32 products are exact in fp64, so this is the fma unless the fp64 sum
    # lands on an fp32 tie (these seeded inputs do not).
    assert torch.equal(fused, (xd * yd + 0.25).float())
    assert torch.equal(largest, torch.maximum(xd, yd.clamp_min(-0.5)).float())
    assert torch.equal(smallest, torch.minimum(xd, yd).clamp_max(0.5).float())


def test_structures_cross_launches_loops_and_branches():
    """A NamedTuple pipeline state and a dataclass cross the launch, the state is carried through
    a dynamic loop and merged by a dynamic if; a layout with run-time leaves is an argument."""
    from test_dsl_structures import advance, pass_layout

    for first, steps, factor in ((1, 8, 2.0), (3, 5, -0.5)):
        out = poisoned(steps)
        advance(out, first, factor, 3, 4)
        index, phase, count = first, 0, 0
        for _ in range(steps):
            index, phase = (0, phase ^ 1) if index + 1 == 4 else (index + 1, phase)
            count += 1
        assert out[:3].tolist() == [index * factor + 3, float(phase), float(count)]
    offsets = torch.full((128,), -1, dtype=torch.int32, device="cuda")
    pass_layout(offsets, 8)
    expected = [(i % 8) * 4 + i // 8 for i in range(32)] + [-1] * 96
    assert offsets.tolist() == expected


@cute.kernel
def _axpb_kernel(x, out, a: cute.Float32, b: cute.Int32, negate: cute.Boolean):
    i = cute.arch.block_idx()[0] * cute.arch.block_dim()[0] + cute.arch.thread_idx()[0]
    if i < cute.size(out):
        v = x[i] * a + cute.Float32(b)
        if negate:
            v = -v
        out[i] = v


@cute.jit
def axpb(x, out, a, b, negate):
    _axpb_kernel(x, out, a, b, negate).launch(grid=((cute.size(out) + 127) // 128, 1, 1), block=(128, 1, 1))


def test_repeated_jit_calls_take_the_cpp_dispatch_and_stay_right(monkeypatch):
    """From a function's second call with plain tensors and Python scalars, its hits are keyed
    and launched in C++ (cute_torch/dsl/dispatch.py): every call's scalars reach the kernel, a
    side stream is honoured, shapes and alignments take their own specializations, and an
    evicted specialization is freed although the C++ side had it."""
    import gc
    import weakref
    monkeypatch.setenv("CUTE_TORCH_MEMORY_CACHE_SIZE", "2")
    g = torch.Generator(device="cuda").manual_seed(19)
    x = torch.randn(4097, device="cuda", generator=g)

    def check(src, a, b, negate):
        out = poisoned(src.numel())
        axpb(src, out, a, b, negate)
        expected = (src.double() * a + b) * (-1 if negate else 1)
        torch.testing.assert_close(out.double(), expected, rtol=1e-6, atol=1e-5)

    for step in range(4):  # the first call is the Python path, the later ones C++
        check(x, 0.5 + step, step - 2, step % 2 == 1)
    assert axpb._cache.fast is not None
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = x * 3  # made on the side stream: the kernel must run after it, on that stream
        out = poisoned(x.numel())
        axpb(y, out, 1.0, 0, False)
        z = out + 0
    torch.cuda.synchronize()
    torch.testing.assert_close(z, y)
    check(x[1:], 2.0, 1, False)  # 4-byte aligned data: another specialization
    check(x[1:], -2.0, 3, True)
    first = weakref.ref(next(iter(axpb._cache._entries.values())))  # the least recent (x's)
    check(x[:100], 1.5, 0, False)  # a third specialization past a limit of 2
    check(x[:100], 1.5, 0, False)
    gc.collect()
    assert first() is None  # the evicted one is freed: the C++ side let it go
    check(x, 0.25, 7, True)  # and comes back
    check(x, 0.25, 7, True)
    handle = cute.compile(axpb, x, poisoned(x.numel()), 1.0, 0, False)  # its calls from the second on: C++
    for a, b, negate in [(1.0, 0, False), (-0.5, 3, True), (4.0, -9, False)]:
        out = poisoned(x.numel())
        handle(x, out, a, b, negate)
        torch.testing.assert_close(out.double(), (x.double() * a + b) * (-1 if negate else 1), rtol=1e-6, atol=1e-5)
    assert handle._fast
