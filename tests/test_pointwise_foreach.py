"""cute::pointwise.foreach_into on the GPU: every segment against the fp64 result of its own
inputs (segments of many sizes, tails, one element, empty, 0-dim inputs, in place), the launches
it takes (one per 32 segments of an AdamW-like update), the segments that take the general path
(strided, misaligned, broadcast along some dimensions), CUDA graph replay and errors.

Outputs that are not also inputs are poisoned (NaN) first, so an element left unwritten fails."""

import math

import pytest

torch = pytest.importorskip("torch")

import cute_torch.ops  # noqa: E402,F401 - registers torch.ops.cute
from cute_torch.pointwise.dtypes import reference  # noqa: E402

pytestmark = pytest.mark.gpu
foreach_into = torch.ops.cute.pointwise.foreach_into

# AdamW's update of one parameter: p, g, m, v and the 0-dim step count in, m, v and p out.
ADAMW = ["0.9 * x2 + 0.1 * x1", "0.999 * x3 + 0.001 * x1 * x1",
         "x0 * (1 - 1e-3) - 1e-2 * (0.9 * x2 + 0.1 * x1) / (1 - exp(x4 * log(0.9))) / "
         "(sqrt((0.999 * x3 + 0.001 * x1 * x1) / (1 - exp(x4 * log(0.999)))) + 1e-8)"]
SIZES = [1, 7, 4096, 4097, 12345, 0, 65539, 2048 * 3]


def segment_inputs(numel, dtype, gen, step):
    p, g, m = (torch.randn(numel, generator=gen, device="cuda").to(dtype) for _ in range(3))
    v = torch.rand(numel, generator=gen, device="cuda").to(dtype)   # a second moment: not negative
    return [p, g, m, v, torch.tensor(float(step), device="cuda")]


def expected(exprs, inputs, dtypes):
    wide = [t.double() for t in inputs]
    return [reference(e, wide).to(d) for e, d in zip(exprs, dtypes)]


def assert_matches(got, want):
    # Two roundings of the output dtype; in fp32 the bias correction 1 - 0.9 ** t (ex2.approx,
    # then a cancellation that loses a decimal digit) sets the floor.
    tol = max(2 * torch.finfo(want.dtype).eps, 5e-5)
    torch.testing.assert_close(got.double(), want.double(), rtol=tol, atol=tol / 2)


def kernel_launches(fn) -> int:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "pointwise" in e.name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("count", [3, 70])
def test_every_segment_matches_its_own_call(dtype, count):
    gen = torch.Generator(device="cuda").manual_seed(1234 + count)
    segments = [segment_inputs(SIZES[s % len(SIZES)], dtype, gen, step=1 + s % 5) for s in range(count)]
    outs = [torch.full_like(x, float("nan")) for seg in segments for x in seg[2:4] + seg[0:1]]
    foreach_into(ADAMW, [x for seg in segments for x in seg], outs)
    for s, seg in enumerate(segments):
        want = expected(ADAMW, seg, [dtype] * 3)
        for got, w in zip(outs[3 * s:3 * s + 3], want):
            assert_matches(got, w)


@pytest.mark.parametrize("count", [3, 70])
def test_one_launch_per_32_segments(count):
    # The kernel's parameter space holds 32 AdamW segments; empty segments take no launch, and
    # a segment of 2**22 elements or more one of its own (plus one: the last one here).
    gen = torch.Generator(device="cuda").manual_seed(4)
    sizes = [SIZES[s % len(SIZES)] for s in range(count - 1)] + [1 << 22]
    segments = [segment_inputs(n, torch.bfloat16, gen, step=1) for n in sizes]
    outs = [torch.full_like(x, float("nan")) for seg in segments for x in seg[:3]]
    inputs = [x for seg in segments for x in seg]
    foreach_into(ADAMW, inputs, outs)    # built before the profiled call
    launches = kernel_launches(lambda: foreach_into(ADAMW, inputs, outs))
    assert launches == math.ceil(sum(1 for n in sizes[:-1] if n) / 32) + 1
    for s in (0, 2, count - 1):
        for got, want in zip(outs[3 * s:3 * s + 3], expected(ADAMW, segments[s], [torch.bfloat16] * 3)):
            assert_matches(got, want)


def test_in_place_over_the_inputs_as_an_optimizer_writes():
    gen = torch.Generator(device="cuda").manual_seed(77)
    segments = [segment_inputs(n, torch.bfloat16, gen, step=3) for n in (4096, 300, 1)]
    wants = [expected(ADAMW, seg, [torch.bfloat16] * 3) for seg in segments]
    foreach_into(ADAMW, [x for seg in segments for x in seg], [x for seg in segments for x in (seg[2], seg[3], seg[0])])
    for seg, want in zip(segments, wants):
        for got, w in zip((seg[2], seg[3], seg[0]), want):
            assert_matches(got, w)


def test_segments_the_one_launch_cannot_take_run_on_their_own():
    # A transposed input, a misaligned one (one element in: 16-byte vectors are off for its
    # launch), and a (1, N) bias broadcast over (M, N): each still gets its own call's values.
    gen = torch.Generator(device="cuda").manual_seed(5)
    exprs = ["x0 * 2 + x1"]
    a = torch.randn(64, 48, generator=gen, device="cuda")
    strided = [a, torch.randn(48, 64, generator=gen, device="cuda").t()]
    base = torch.randn(4097, generator=gen, device="cuda")
    misaligned = [base[1:], torch.randn(4096, generator=gen, device="cuda")]
    broadcast = [torch.randn(32, 40, generator=gen, device="cuda"), torch.randn(1, 40, generator=gen, device="cuda")]
    one = [torch.randn(40, 40, generator=gen, device="cuda"), torch.randn(1, generator=gen, device="cuda")]
    plain = [torch.randn(1000, generator=gen, device="cuda"), torch.randn(1000, generator=gen, device="cuda")]
    segments = [strided, misaligned, broadcast, one, plain]
    outs = [torch.full(torch.broadcast_shapes(*(x.shape for x in seg)), float("nan"), device="cuda")
            for seg in segments]
    foreach_into(exprs, [x for seg in segments for x in seg], outs)
    for seg, out in zip(segments, outs):
        (want,) = expected(exprs, seg, [torch.float32])
        assert_matches(out, want)


def test_replays_in_a_cuda_graph():
    gen = torch.Generator(device="cuda").manual_seed(9)
    segments = [segment_inputs(n, torch.float32, gen, step=2) for n in (5000, 17, 8192)]
    inputs = [x for seg in segments for x in seg]
    outs = [torch.empty_like(x) for seg in segments for x in seg[:3]]
    foreach_into(ADAMW, inputs, outs)   # built before capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        foreach_into(ADAMW, inputs, outs)
    for seg in segments:                # new values in the same tensors
        for x in seg[:4]:
            x.copy_(torch.randn(x.shape, generator=gen, device="cuda").abs())
    for out in outs:
        out.fill_(float("nan"))
    graph.replay()
    for s, seg in enumerate(segments):
        for got, want in zip(outs[3 * s:3 * s + 3], expected(ADAMW, seg, [torch.float32] * 3)):
            assert_matches(got, want)


def test_a_bad_segment_is_named():
    x = torch.randn(8, device="cuda")
    with pytest.raises(ValueError, match="3 inputs do not split into 2 segments"):
        foreach_into(["x0 * 2"], [x, x, x], [x, x])
    with pytest.raises(ValueError, match=r"(?s)outs\[0\] must be a contiguous float32 tensor of shape \[8\] on "
                       r"cuda:\d; got float32 \[9\].*segment 1 of cute::pointwise.foreach_into"):
        foreach_into(["x0 * 2"], [x, x], [torch.empty(8, device="cuda"), torch.empty(9, device="cuda")])
    with pytest.raises(ValueError, match=r"cute::pointwise.into: outs\[0\] must be a contiguous float32 tensor of "
                       r"shape \[8\] on cuda:\d; got float32 \[2, 4\] \(not contiguous\)"):
        torch.ops.cute.pointwise.into(["x0 * 2"], [x], [torch.empty(4, 2, device="cuda").t()])
