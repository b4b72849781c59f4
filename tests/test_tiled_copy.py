"""Copy atoms and tiled copies: cp.async (CopyG2SOp) through a tiled copy, predicated by
coordinates (a tail tile's missing rows are zero-filled), and predicated universal copies
(skipped). Compile tier: PTX and errors; GPU tier: every element against torch."""

import re

import pytest
import torch

import cute_torch as cute
from conftest import run_under_sanitizer
from cute_torch.dsl.diagnostics import DSLError

TILE_M, TILE_N = 64, 64


def _tiled(op, bits=128):
    atom = cute.make_copy_atom(op, cute.BFloat16, num_bits_per_copy=bits)
    return cute.make_tiled_copy_tv(atom, cute.make_layout((32, 8), stride=(8, 1)),
                                   cute.make_layout((1, 8), stride=(8, 1)))


@cute.kernel
def _staged_copy(mA: cute.Tensor, out: cute.Tensor, tiled_copy: cute.Constexpr, store_copy: cute.Constexpr):
    tid = cute.arch.thread_idx()[0]
    bm = cute.arch.block_idx()[0]
    gA = cute.local_tile(mA, (TILE_M, TILE_N), (bm, 0))
    cA = cute.local_tile(cute.make_identity_tensor(mA.shape), (TILE_M, TILE_N), (bm, 0))
    gO = cute.local_tile(out, (TILE_M, TILE_N), (bm, 0))
    sA = cute.arch.alloc_smem(cute.BFloat16, (TILE_M, TILE_N), stride=(TILE_N, 1), alignment=128)
    thr = tiled_copy.get_slice(tid)
    tAgA, tAsA, tAcA = thr.partition_S(gA), thr.partition_D(sA), thr.partition_S(cA)   # (8, 2, 1)
    pred = cute.make_rmem_tensor(cute.make_layout((1, 2, 1)), cute.Boolean)
    for r in cute.range_constexpr(2):
        pred[0, r, 0] = cute.elem_less(tAcA[0, r, 0], mA.shape)
    cute.copy(tiled_copy, tAgA, tAsA, pred=pred)          # rows past M arrive as zeros
    cute.arch.cp_async_commit_group()
    cute.arch.cp_async_wait_group(0)
    cute.arch.sync_threads()
    sthr = store_copy.get_slice(tid)
    keep = cute.make_rmem_tensor(cute.make_layout((1, 2, 1)), cute.Boolean)
    for r in cute.range_constexpr(2):
        keep[0, r, 0] = (sthr.partition_S(cA)[0, r, 0][0] % 2) == 0      # only even rows are written out
    cute.copy(store_copy, sthr.partition_S(sA), sthr.partition_D(gO), pred=keep)


LoadCacheMode = cute.nvgpu.cpasync.LoadCacheMode


@cute.jit
def _staged_host(a: cute.Tensor, out: cute.Tensor, cache_mode: cute.Constexpr):
    _staged_copy(a, out, _tiled(cute.nvgpu.cpasync.CopyG2SOp(cache_mode)), _tiled(cute.nvgpu.CopyUniversalOp())).launch(
        grid=(cute.ceil_div(cute.size(a, mode=[0]), TILE_M), 1, 1), block=(256, 1, 1))


@pytest.mark.parametrize("mode,operator", [(LoadCacheMode.ALWAYS, "ca"), (LoadCacheMode.GLOBAL, "cg")])
def test_predicated_cp_async_reaches_ptx_with_a_source_size(mode, operator):
    a, out = torch.randn(100, 64).bfloat16(), torch.empty(128, 64).bfloat16()
    ptx = cute.compile(_staged_host, a, out, mode, options={"arch": "sm_80"}).__ptx__
    assert ptx.count(f"cp.async.{operator}.shared.global") == 2 and "cp.async.wait_group 0" in ptx
    assert ", 16, %r" in ptx          # the source size operand: 16, or 0 to zero-fill


def test_cp_async_defaults_to_cuTe_dsls_cache_mode():
    assert cute.nvgpu.cpasync.CopyG2SOp().cache_mode is LoadCacheMode.ALWAYS


def test_copy_atom_misuse_is_an_error_at_the_users_line():
    @cute.jit
    def bad_width(a: cute.Tensor):
        cute.make_copy_atom(cute.nvgpu.cpasync.CopyG2SOp(), cute.BFloat16, num_bits_per_copy=256)

    with pytest.raises(DSLError) as err:
        cute.compile(bad_width, torch.zeros(4))
    assert "4, 8 or 16 bytes" in str(err.value) and "test_tiled_copy.py" in str(err.value)

    @cute.jit
    def bad_mode(a: cute.Tensor):
        cute.make_copy_atom(cute.nvgpu.cpasync.CopyG2SOp(LoadCacheMode.GLOBAL), cute.BFloat16, num_bits_per_copy=64)

    with pytest.raises(DSLError) as err:
        cute.compile(bad_mode, torch.zeros(4))
    assert "LoadCacheMode.GLOBAL (.cg) copies 16 bytes" in str(err.value) and "test_tiled_copy.py" in str(err.value)

    @cute.jit
    def not_a_mode(a: cute.Tensor):
        cute.nvgpu.cpasync.CopyG2SOp("cg")

    with pytest.raises(DSLError) as err:
        cute.compile(not_a_mode, torch.zeros(4))
    assert "cpasync.LoadCacheMode" in str(err.value) and "test_tiled_copy.py" in str(err.value)

    @cute.kernel
    def scattered(mA: cute.Tensor, tiled_copy: cute.Constexpr):
        sA = cute.arch.alloc_smem(cute.BFloat16, (TILE_M, TILE_N), stride=(1, TILE_M))   # column-major
        thr = tiled_copy.get_slice(cute.arch.thread_idx()[0])
        cute.copy(tiled_copy, thr.partition_S(cute.local_tile(mA, (TILE_M, TILE_N), (0, 0))), thr.partition_D(sA))

    @cute.jit
    def host(a: cute.Tensor):
        scattered(a, _tiled(cute.nvgpu.cpasync.CopyG2SOp())).launch(grid=(1, 1, 1), block=(256, 1, 1))

    with pytest.raises(DSLError) as err:
        cute.compile(host, torch.zeros(64, 64).bfloat16(), options={"arch": "sm_80"})
    assert "not contiguous" in str(err.value)


def run_predicated(rows, mode=LoadCacheMode.ALWAYS):
    g = torch.Generator().manual_seed(rows)
    a = torch.randn(rows, 64, generator=g).bfloat16().cuda()
    padded = -(-rows // TILE_M) * TILE_M
    out = torch.full((padded, 64), float("nan"), dtype=torch.bfloat16, device="cuda")
    _staged_host(a, out, mode)
    torch.cuda.synchronize()
    want = torch.zeros(padded, 64, dtype=torch.bfloat16)
    want[:rows] = a.cpu()
    even = torch.arange(padded) % 2 == 0
    assert torch.equal(out.cpu()[even], want[even])          # copied, or zero-filled past the end
    assert torch.isnan(out.cpu()[~even].float()).all()      # skipped: still poisoned


@pytest.mark.gpu
@pytest.mark.parametrize("mode", [LoadCacheMode.ALWAYS, LoadCacheMode.GLOBAL])
@pytest.mark.parametrize("rows", [100, 128, 37])
def test_predicated_tiled_copies_zero_fill_and_skip(rows, mode):
    run_predicated(rows, mode)


@pytest.mark.gpu
def test_predicated_tail_copies_stay_in_bounds_under_memcheck():
    """A tail tile's coordinates past the last row must not wrap into the next column (they did
    when identity tensors packed coordinates compactly: the predicate passed and cp.async read
    past the tensor)."""
    code, report = run_under_sanitizer("memcheck", "import test_tiled_copy as t; t.run_predicated(100)")
    assert code == 0 and re.search(r"\b0 errors\b", report), report[-3000:]


# -- bulk copies (cp.async.bulk, CopyBulkG2SOp) --------------------------------------------------------

ROW = 1024          # bf16 elements of a row: 2 KB, a bulk copy of 512 bytes x 4 (the atom's width)


@cute.kernel
def _bulk_rows(mA: cute.Tensor, out: cute.Tensor, atom: cute.Constexpr):
    """Each CTA copies row block_idx of mA into shared memory by bulk copies (thread 0) and
    writes it back out through registers, in two phases of the barrier (rows bid and bid + grid)."""
    tid = cute.arch.thread_idx()[0]
    bid = cute.arch.block_idx()[0]
    grid = cute.arch.grid_dim()[0]
    sRow = cute.arch.alloc_smem(cute.BFloat16, (ROW,), alignment=128)
    bar = cute.arch.alloc_smem(cute.Int64, (1,), alignment=8).iterator
    if tid == 0:
        cute.arch.mbarrier_init(bar, 1)
        cute.arch.mbarrier_init_fence()
    cute.arch.sync_threads()
    for phase in cute.range_constexpr(2):
        row = bid + phase * grid
        if tid == 0:
            cute.arch.mbarrier_arrive_and_expect_tx(bar, ROW * 2)
            cute.copy(atom, mA[(row, None)], sRow, mbar_ptr=bar)
        cute.arch.mbarrier_wait(bar, phase)
        for i in cute.range_constexpr(ROW // 128):
            out[(row, i * 128 + tid)] = sRow[i * 128 + tid]
        cute.arch.sync_threads()              # every read of this row is done before the next load


@cute.jit
def _bulk_host(a: cute.Tensor, out: cute.Tensor):
    atom = cute.make_copy_atom(cute.nvgpu.cpasync.CopyBulkG2SOp(), cute.BFloat16, num_bits_per_copy=512 * 8)
    _bulk_rows(a, out, atom).launch(grid=(cute.size(a, mode=[0]) // 2, 1, 1), block=(128, 1, 1))


def test_bulk_copy_reaches_ptx_as_one_instruction_per_atom():
    a, out = torch.randn(8, ROW).bfloat16(), torch.empty(8, ROW).bfloat16()
    ptx = cute.compile(_bulk_host, a, out, options={"arch": "sm_90a"}).__ptx__
    # four 512-byte atoms per 2 KB row, two rows
    assert ptx.count("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes") == 8


def test_a_copy_atom_takes_one_dimensional_tensors_of_an_integer_shape():
    """make_layout(n) gives the shape n, not (n,): the copy still indexes it (value, rest...)."""
    @cute.kernel
    def one_d(mA: cute.Tensor, atom: cute.Constexpr):
        sRow = cute.arch.alloc_smem(cute.BFloat16, (ROW,), alignment=128)
        bar = cute.arch.alloc_smem(cute.Int64, (1,), alignment=8).iterator
        src = cute.make_tensor(mA[(1, None)].iterator, cute.make_layout(ROW))
        cute.copy(atom, src, cute.make_tensor(sRow.iterator, cute.make_layout(ROW)), mbar_ptr=bar)

    @cute.jit
    def host(a: cute.Tensor):
        atom = cute.make_copy_atom(cute.nvgpu.cpasync.CopyBulkG2SOp(), cute.BFloat16, num_bits_per_copy=ROW * 16)
        one_d(a, atom).launch(grid=(1, 1, 1), block=(32, 1, 1))

    ptx = cute.compile(host, torch.zeros(2, ROW).bfloat16(), options={"arch": "sm_90a"}).__ptx__
    assert ptx.count("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes") == 1


def test_bulk_copy_misuse_is_an_error_at_the_users_line():
    @cute.jit
    def odd_width(a: cute.Tensor):
        cute.make_copy_atom(cute.nvgpu.cpasync.CopyBulkG2SOp(), cute.BFloat16, num_bits_per_copy=8 * 24)

    with pytest.raises(DSLError) as err:
        cute.compile(odd_width, torch.zeros(4))
    assert "multiple of 16 bytes" in str(err.value) and "test_tiled_copy.py" in str(err.value)

    @cute.kernel
    def no_barrier(mA: cute.Tensor, atom: cute.Constexpr):
        sRow = cute.arch.alloc_smem(cute.BFloat16, (ROW,), alignment=128)
        cute.copy(atom, mA[(0, None)], sRow)

    @cute.jit
    def host(a: cute.Tensor):
        atom = cute.make_copy_atom(cute.nvgpu.cpasync.CopyBulkG2SOp(), cute.BFloat16, num_bits_per_copy=ROW * 16)
        no_barrier(a, atom).launch(grid=(1, 1, 1), block=(32, 1, 1))

    with pytest.raises(DSLError) as err:
        cute.compile(host, torch.zeros(2, ROW).bfloat16(), options={"arch": "sm_90a"})
    assert "mbar_ptr=" in str(err.value) and "test_tiled_copy.py" in str(err.value)


def run_bulk_rows(rows=64):
    g = torch.Generator().manual_seed(rows + 1)
    a = torch.randn(rows, ROW, generator=g).bfloat16().cuda()
    out = torch.full((rows, ROW), float("nan"), dtype=torch.bfloat16, device="cuda")
    _bulk_host(a, out)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), a.cpu())


@pytest.mark.gpu
def test_bulk_copies_complete_on_the_barrier():
    run_bulk_rows()


@pytest.mark.gpu
@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
def test_bulk_copies_are_clean_under_compute_sanitizer(tool):
    code, report = run_under_sanitizer(tool, "import test_tiled_copy as t; t.run_bulk_rows(8)")
    assert code == 0 and re.search(r"\b0 (errors|hazards)\b", report), report[-3000:]
