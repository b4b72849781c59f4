"""What scripts/sanitize.py runs under compute-sanitizer: a small instance of every kernel family,
and one planted bug per tool (an out-of-bounds write for memcheck, a shared-memory race for
racecheck, a barrier under a divergent branch for synccheck, a read of never-written memory for
initcheck), which proves the tool is looking. Each function runs on the current GPU and
synchronizes."""

from __future__ import annotations

import torch

import cute_torch as cute


def _rand(*shape, seed: int, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype).cuda()


# -- the families ----------------------------------------------------------------------------------------

def run_pointwise():
    import cute_torch.ops as cops
    a, b, c = (_rand(1000, 33, seed=s, dtype=torch.bfloat16) for s in (1, 2, 3))
    cops.pointwise("relu(x0 * x1 + x2) * 2", a, b, c)
    cops.pointwise_multi(["x0 + x1", "tanh(x0) * x1"], a, b)
    # Three segments in one launch, one of them a 1-element tail, written in place.
    segments = [(a[i].clone(), b[i].clone()) for i in range(2)] + [(a[0, :1].clone(), b[0, :1].clone())]
    torch.ops.cute.pointwise.foreach_into(["x0 * 0.9 + x1"], [x for pair in segments for x in pair],
                                          [p for p, _ in segments])
    torch.cuda.synchronize()


def run_copies():
    from cute_torch.kernels import elementwise_add, transpose
    a, b = _rand(300, 200, seed=4), _rand(300, 200, seed=5)
    elementwise_add(a, b)
    transpose(a.bfloat16())
    torch.cuda.synchronize()


def run_gemm():
    import test_gemm_sm90_kernel
    import test_gemm_stream_k
    test_gemm_sm90_kernel.run_small()
    test_gemm_stream_k.run_small()


def run_pipeline():
    import test_pipeline
    assert test_pipeline.run_ws_gemm()["check"]() < 1e-2


def run_rows():
    import test_row_kernels
    test_row_kernels.run_small()


FAMILIES = {"pointwise": run_pointwise, "copies": run_copies, "gemm": run_gemm, "pipeline": run_pipeline,
            "rows": run_rows}


# -- the planted bugs ------------------------------------------------------------------------------------

@cute.kernel
def _out_of_bounds(a: cute.Tensor, n: cute.Int32):
    i = cute.arch.thread_idx()[0]
    if i < n:
        a[i + n] = a[i] * 3.0                      # PLANTED: writes the n elements after a's end


@cute.kernel
def _shared_race(out: cute.Tensor):
    tid = cute.arch.thread_idx()[0]
    slots = cute.arch.alloc_smem(cute.Float32, (64,))
    slots[tid] = cute.Float32(tid)
    out[tid] = slots[63 - tid]                     # PLANTED: reads the other warp's write, no barrier


@cute.kernel
def _divergent_barrier(out: cute.Tensor):
    tid = cute.arch.thread_idx()[0]
    if tid < 16:
        cute.arch.sync_threads()                   # PLANTED: half a warp, half a block, at a barrier
    out[tid] = cute.Float32(tid)


@cute.kernel
def _uninitialized_read(src: cute.Tensor, out: cute.Tensor):
    tid = cute.arch.thread_idx()[0]
    out[tid] = src[tid] + 1.0                      # PLANTED: src was allocated and never written


@cute.jit
def _launch_out_of_bounds(a: cute.Tensor, n: cute.Int32):
    _out_of_bounds(a, n).launch(grid=(1, 1, 1), block=(32, 1, 1))


@cute.jit
def _launch_race(out: cute.Tensor):
    _shared_race(out).launch(grid=(1, 1, 1), block=(64, 1, 1))


@cute.jit
def _launch_divergent(out: cute.Tensor):
    _divergent_barrier(out).launch(grid=(1, 1, 1), block=(64, 1, 1))


@cute.jit
def _launch_uninitialized(src: cute.Tensor, out: cute.Tensor):
    _uninitialized_read(src, out).launch(grid=(1, 1, 1), block=(64, 1, 1))


# Each planted launch with arguments a CPU test can compile it for.
LAUNCHES = {"memcheck": (_launch_out_of_bounds, lambda: (torch.empty(32), 32)),
            "racecheck": (_launch_race, lambda: (torch.empty(64),)),
            "synccheck": (_launch_divergent, lambda: (torch.empty(64),)),
            "initcheck": (_launch_uninitialized, lambda: (torch.empty(1 << 20), torch.empty(64)))}


def plant_memcheck():
    _launch_out_of_bounds(_rand(32, seed=6), 32)
    torch.cuda.synchronize()


def plant_racecheck():
    _launch_race(torch.zeros(64, device="cuda"))
    torch.cuda.synchronize()


def plant_synccheck():
    _launch_divergent(torch.zeros(64, device="cuda"))
    torch.cuda.synchronize()


def plant_initcheck():
    _launch_uninitialized(torch.empty(1 << 20, device="cuda"), torch.zeros(64, device="cuda"))
    torch.cuda.synchronize()


PLANTED = {"memcheck": plant_memcheck, "racecheck": plant_racecheck, "synccheck": plant_synccheck,
           "initcheck": plant_initcheck}
