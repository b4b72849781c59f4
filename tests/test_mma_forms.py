"""The rest of the tensor-core layer's forms: wgmma with fp16 accumulators, tf32 and fp8 inputs,
non-swizzled (interleaved) operands, and transposed ldmatrix / stmatrix. Each form runs in a
one-tile kernel: the CPU tier checks the layouts against the PTX ISA's fragment tables and that
ptxas takes the PTX; the GPU tier compares every element with a float64 product of the same
inputs, outputs poisoned first."""

import pytest
import torch

import cute_torch as cute
from conftest import copy_by_threads, wgmma_tile
from cute_torch.dsl.diagnostics import DSLError

warp = cute.nvgpu.warp
warpgroup = cute.nvgpu.warpgroup
Kind = warpgroup.SmemLayoutAtomKind

N = 64           # the MMA's N; M is 64 (one warpgroup), K one 128-byte row per operand row
ON_SM90 = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
needs_sm90 = pytest.mark.skipif(not ON_SM90, reason="wgmma needs sm_90a")


def _k_total(dtype) -> int:
    return 1024 // dtype.width          # 128 bytes of k: 4 k-blocks of 32 bytes


# -- one wgmma tile: A (64 x K) and B (N x K) copied by threads into shared memory of a given kind --

@cute.kernel
def _wgmma_tile(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, tiled_mma: cute.Constexpr,
                a_kind: cute.Constexpr, b_kind: cute.Constexpr):
    tid = cute.arch.thread_idx()[0]
    k_total = _k_total(mB.element_type)
    b_atom = warpgroup.make_smem_layout_atom(b_kind, mB.element_type)
    sB = cute.arch.alloc_smem(mB.element_type, cute.tile_to_shape(b_atom, (N, k_total)), alignment=1024)
    copy_by_threads(mB, sB, tid)
    thr = tiled_mma.get_slice(tid)
    if cute.const_expr(a_kind is None):                   # A from registers, straight from global
        tCgA = thr.partition_A(mA)
        tCrA = thr.make_fragment_A(tCgA)
        cute.autovec_copy(tCgA, tCrA)
    else:
        a_atom = warpgroup.make_smem_layout_atom(a_kind, mA.element_type)
        sA = cute.arch.alloc_smem(mA.element_type, cute.tile_to_shape(a_atom, (64, k_total)), alignment=1024)
        copy_by_threads(mA, sA, tid)
        tCrA = thr.make_fragment_A(thr.partition_A(sA))
    cute.arch.fence_proxy("async.shared", space="cta")   # thread stores -> wgmma's async reads
    cute.arch.sync_threads()
    tCrB = thr.make_fragment_B(thr.partition_B(sB))
    tCgC = thr.partition_C(mC)
    acc = thr.make_fragment_C(tCgC)
    wgmma_tile(tiled_mma, acc, tCrA, tCrB)
    cute.autovec_copy(acc, tCgC)


@cute.jit
def _wgmma_tile_host(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor, op_name: cute.Constexpr,
                     a_kind: cute.Constexpr, b_kind: cute.Constexpr):
    major = {"K": warpgroup.OperandMajorMode.K, "MN": warpgroup.OperandMajorMode.MN}
    source = warpgroup.OperandSource.RMEM if a_kind is None else warpgroup.OperandSource.SMEM
    a_major = major["K" if a_kind is None else a_kind.value[0]]
    b_major = major[b_kind.value[0]]
    k = 256 // a.element_type.width
    if op_name == "f16bf16":
        op = warpgroup.MmaF16BF16Op(a.element_type, c.element_type, (64, N, k), source, a_major, b_major)
    elif op_name == "f8":
        op = warpgroup.MmaF8Op(a.element_type, b.element_type, c.element_type, (64, N, k), source, a_major, b_major)
    else:
        op = warpgroup.MmaTF32Op((64, N, k), source, a_major, b_major)
    _wgmma_tile(a, b, c, cute.make_tiled_mma(op), a_kind, b_kind).launch(grid=(1, 1, 1), block=(128, 1, 1))


# (name, A dtype, B dtype, C dtype, op, A kind (None: registers), B kind)
FORMS = [
    ("f16-acc", torch.float16, torch.float16, torch.float16, "f16bf16", Kind.K_SW128, Kind.K_SW128),
    ("f16-acc-mn-rs", torch.float16, torch.float16, torch.float16, "f16bf16", None, Kind.MN_SW64),
    ("tf32", torch.float32, torch.float32, torch.float32, "tf32", Kind.K_SW128, Kind.K_SW32),
    ("tf32-rs", torch.float32, torch.float32, torch.float32, "tf32", None, Kind.K_SW64),
    ("e4m3", torch.float8_e4m3fn, torch.float8_e4m3fn, torch.float32, "f8", Kind.K_SW128, Kind.K_SW128),
    ("e4m3-e5m2-f16", torch.float8_e4m3fn, torch.float8_e5m2, torch.float16, "f8", Kind.K_SW64, Kind.K_INTER),
    ("e5m2-rs", torch.float8_e5m2, torch.float8_e5m2, torch.float32, "f8", None, Kind.K_SW128),
    ("bf16-inter", torch.bfloat16, torch.bfloat16, torch.float32, "f16bf16", Kind.K_INTER, Kind.MN_INTER),
    ("f16-mn-inter", torch.float16, torch.float16, torch.float32, "f16bf16", Kind.MN_INTER, Kind.K_INTER),
]
_PTX_TYPE = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "tf32", torch.float8_e4m3fn: "e4m3",
             torch.float8_e5m2: "e5m2"}


def _inputs(a_dtype, b_dtype, device="cpu", seed=11):
    """Values each input type holds exactly (tf32: 10 mantissa bits, so the tensor core's
    truncation changes nothing), so the only error left is the accumulation's."""
    g = torch.Generator().manual_seed(seed)
    k = 1024 // (torch.finfo(a_dtype).bits)
    a, b = torch.randn(64, k, generator=g), torch.randn(N, k, generator=g)
    if a_dtype is torch.float32:
        a, b = ((x.view(torch.int32) & ~0x1FFF).view(torch.float32) for x in (a, b))
    return a.to(a_dtype).to(device), b.to(b_dtype).to(device)


@pytest.mark.parametrize("form", FORMS, ids=[f[0] for f in FORMS])
def test_wgmma_form_reaches_ptx(form):
    _, a_dtype, b_dtype, c_dtype, op_name, a_kind, b_kind = form
    a, b = _inputs(a_dtype, b_dtype)
    ptx = cute.compile(_wgmma_tile_host, a, b, torch.empty(64, N, dtype=c_dtype), op_name, a_kind, b_kind,
                       options={"arch": "sm_90a"}).__ptx__
    acc = "f16" if c_dtype is torch.float16 else "f32"
    k = 256 // torch.finfo(a_dtype).bits
    assert ptx.count(f"wgmma.mma_async.sync.aligned.m64n{N}k{k}.{acc}.{_PTX_TYPE[a_dtype]}.{_PTX_TYPE[b_dtype]}") == 4


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("form", FORMS, ids=[f[0] for f in FORMS])
def test_wgmma_form_matches_matmul(form):
    _, a_dtype, b_dtype, c_dtype, op_name, a_kind, b_kind = form
    a, b = _inputs(a_dtype, b_dtype, "cuda")
    c = torch.full((64, N), float("nan"), device="cuda", dtype=c_dtype)
    _wgmma_tile_host(a, b, c, op_name, a_kind, b_kind)
    torch.cuda.synchronize()
    want = a.double() @ b.double().t()
    if c_dtype is torch.float16:
        # fp16 accumulators round the partial sums (|C| ~ 8-11 here, half an ulp 0.004): allow
        # about 30 such roundings.
        torch.testing.assert_close(c.double(), want, rtol=0, atol=0.125)
    elif a_dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        # Hopper adds fp8 products with fewer than fp32's bits (about 14 after alignment).
        torch.testing.assert_close(c.double(), want, rtol=1e-3, atol=1e-2)
    else:
        torch.testing.assert_close(c.double(), want, rtol=1e-4, atol=1e-3)


def test_rs_a_fragments_of_tf32_and_fp8_follow_the_ptx_tables():
    """wgmma's register A for 32- and 8-bit inputs: warp w rows 16w.., lane L row L/4 (+8 for
    odd registers); tf32 column L%4 (+4 for registers 2-3), fp8 columns 4(L%4)..+3 (+16 for
    registers 2-3)."""
    from cute_torch.dsl.nvgpu.warpgroup import _RS_A
    for width, per_reg, kstep, khalf in ((32, 1, 1, 4), (8, 4, 4, 16)):
        layout = _RS_A[width]
        for t in range(128):
            w, lane = t // 32, t % 32
            for reg in range(4):
                for e in range(per_reg):
                    idx = layout((t, reg * per_reg + e))
                    want = (lane // 4 + 8 * (reg % 2) + 16 * w, kstep * (lane % 4) + e + khalf * (reg // 2))
                    assert (idx % 64, idx // 64) == want, (width, t, reg, e)


def test_wgmma_form_misuse_is_an_error_at_the_users_line():
    @cute.jit
    def mn_major_fp8(a: cute.Tensor):
        warpgroup.MmaF8Op(cute.Float8E4M3FN, cute.Float8E4M3FN, cute.Float32, (64, 64, 32),
                          b_major_mode=warpgroup.OperandMajorMode.MN)

    @cute.jit
    def tf32_wrong_k(a: cute.Tensor):
        warpgroup.MmaTF32Op((64, 64, 16))

    @cute.jit
    def bf16_half_acc(a: cute.Tensor):
        warpgroup.MmaF16BF16Op(cute.BFloat16, cute.Float16, (64, 64, 16))

    for fn, words in ((mn_major_fp8, "transposes only 16-bit operands"), (tf32_wrong_k, "(64, N, 8)"),
                      (bf16_half_acc, "no BFloat16 inputs with Float16 accumulators")):
        with pytest.raises(DSLError) as err:
            cute.compile(fn, torch.zeros(4))
        assert words in str(err.value) and "test_mma_forms.py" in str(err.value), str(err.value)


# -- transposed ldmatrix: an MN-major (K, N) row-major B into a warp MMA ----------------------------

def test_transposed_ldmatrix_rows_land_in_the_mma_fragments():
    """PTX's ldmatrix.trans: matrix j's row r is at the address lane 8j + r gives; lane L
    receives, in register j, elements (2(L%4) + e, L/4) of matrix j: the matrix transposed.
    Simulate that with our transposed partitions' rows and check each register against
    mma.sync's A (x4) and B (x2) fragments."""
    from cute_torch.dsl.nvgpu.warp import _A_16x16, _B_8x16, LDSM_T_A_16x16, LDSM_T_B_8x16
    for ldsm, frag, rows, matrices in ((LDSM_T_A_16x16, _A_16x16, 16, 4), (LDSM_T_B_8x16, _B_8x16, 8, 2)):
        for lane in range(32):
            for j in range(matrices):
                for e in range(2):
                    got = ldsm((8 * j + 2 * (lane % 4) + e, lane // 4))
                    assert got == frag((lane, 2 * j + e)), (rows, lane, j, e)


TM, TN, TK = 64, 64, 32


@cute.kernel
def _warp_mma_mn_major(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, tiled_mma: cute.Constexpr,
                       a_transposed: cute.Constexpr):
    """C (TM x TN) = A @ B with B given as (N, K) over a (K, N) row-major buffer (MN-major)
    and A K-major or M-major; four warps, fragments by ldmatrix (transposed where MN-major)."""
    tid = cute.arch.thread_idx()[0]
    a_stride = (1, TM) if a_transposed else (TK, 1)
    sA = cute.arch.alloc_smem(mA.element_type, (TM, TK), stride=a_stride)
    sB = cute.arch.alloc_smem(mB.element_type, (TN, TK), stride=(1, TN))   # B[n, k] at k * TN + n
    copy_by_threads(mA, sA, tid)
    copy_by_threads(mB, sB, tid)
    cute.arch.sync_threads()
    thr = tiled_mma.get_slice(tid)
    tCgC = thr.partition_C(mC)
    tCrA, tCrB = thr.make_fragment_A(thr.partition_A(sA)), thr.make_fragment_B(thr.partition_B(sB))
    acc = thr.make_fragment_C(tCgC)
    acc.fill(0.0)
    ld_a = cute.make_tiled_copy_A(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(a_transposed, 4), mA.element_type),
                                  tiled_mma)
    ld_b = cute.make_tiled_copy_B(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(True, 2), mB.element_type), tiled_mma)
    la, lb = ld_a.get_slice(tid), ld_b.get_slice(tid)
    cute.copy(ld_a, la.partition_S(sA), la.retile(tCrA))
    cute.copy(ld_b, lb.partition_S(sB), lb.retile(tCrB))
    cute.gemm(tiled_mma, acc, tCrA, tCrB, acc)
    cute.autovec_copy(acc, tCgC)


@cute.jit
def _warp_mma_mn_major_host(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor, a_transposed: cute.Constexpr):
    op = warp.MmaF16BF16Op(a.element_type, cute.Float32, (16, 8, 16))
    _warp_mma_mn_major(a, b, c, cute.make_tiled_mma(op, (2, 2, 1)), a_transposed).launch(grid=(1, 1, 1),
                                                                                        block=(128, 1, 1))


def _mn_operands(device="cpu", dtype=torch.bfloat16, seed=12):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(TM, TK, generator=g).to(dtype).to(device),
            torch.randn(TN, TK, generator=g).to(dtype).to(device))


@pytest.mark.parametrize("a_transposed", [False, True])
def test_transposed_ldmatrix_reaches_ptx(a_transposed):
    a, b = _mn_operands()
    ptx = cute.compile(_warp_mma_mn_major_host, a, b, torch.empty(TM, TN), a_transposed,
                       options={"arch": "sm_80"}).__ptx__
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16") == 4 * 2       # 4 N atoms x 2 k-steps
    trans_a = ptx.count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16")
    assert trans_a == (4 if a_transposed else 0)                                     # 2 M atoms x 2 k-steps
    assert "ld.shared" not in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("a_transposed", [False, True])
def test_transposed_ldmatrix_gemm_matches_matmul(a_transposed):
    a, b = _mn_operands("cuda")
    c = torch.full((TM, TN), float("nan"), device="cuda")
    _warp_mma_mn_major_host(a, b, c, a_transposed)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.double(), a.double() @ b.double().t(), rtol=1e-4, atol=1e-3)


# -- transposed stmatrix: wgmma accumulators into a column-major (M-contiguous) shared tile ----------

def test_stmatrix_rows_hold_the_accumulator_fragment():
    """PTX's stmatrix: lane L's register i goes to matrix i at (L/4, 2(L%4) + e), or transposed
    at (2(L%4) + e, L/4); matrix i's row r is at the address lane 8i + r gives. Register i of a
    16-column group j holds the fragment's values 8j + 2i, +1. Both layouts must put every value
    where the accumulator fragment says it belongs."""
    from cute_torch.dsl.nvgpu.warpgroup import _c_layout, stsm_layout
    n = 32
    frag = _c_layout(n)
    for transpose in (False, True):
        stsm = stsm_layout(n, transpose)
        for t in range(128):
            w, lane = t // 32, t % 32
            for j in range(n // 16):
                for i in range(4):
                    for e in range(2):
                        r, c = (2 * (lane % 4) + e, lane // 4) if transpose else (lane // 4, 2 * (lane % 4) + e)
                        got = stsm((32 * w + 8 * i + r, (c, j)))
                        assert got == frag((t, 8 * j + 2 * i + e)), (transpose, t, j, i, e)


@cute.kernel
def _stmatrix_store(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, tiled_mma: cute.Constexpr,
                    transpose: cute.Constexpr):
    tid = cute.arch.thread_idx()[0]
    k_total = _k_total(mA.element_type)
    atom = warpgroup.make_smem_layout_atom(Kind.K_SW128, mA.element_type)
    sA = cute.arch.alloc_smem(mA.element_type, cute.tile_to_shape(atom, (64, k_total)), alignment=1024)
    sB = cute.arch.alloc_smem(mB.element_type, cute.tile_to_shape(atom, (N, k_total)), alignment=1024)
    c_stride = (1, 64) if transpose else (N, 1)
    sC = cute.arch.alloc_smem(mC.element_type, (64, N), stride=c_stride, alignment=16)
    copy_by_threads(mA, sA, tid)
    copy_by_threads(mB, sB, tid)
    cute.arch.fence_proxy("async.shared", space="cta")
    cute.arch.sync_threads()
    thr = tiled_mma.get_slice(tid)
    acc = thr.make_fragment_C(thr.partition_C(sC))
    wgmma_tile(tiled_mma, acc, thr.make_fragment_A(thr.partition_A(sA)), thr.make_fragment_B(thr.partition_B(sB)))
    out = cute.make_fragment_like(acc, mC.element_type)
    out.store(acc.load().to(mC.element_type))
    stsm = cute.make_tiled_copy_C(cute.make_copy_atom(warpgroup.StMatrix8x8x16bOp(transpose), mC.element_type),
                                  tiled_mma)
    st = stsm.get_slice(tid)
    cute.copy(stsm, st.retile(out), st.partition_D(sC))
    cute.arch.sync_threads()
    copy_by_threads(sC, mC, tid)


@cute.jit
def _stmatrix_host(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor, transpose: cute.Constexpr):
    op = warpgroup.MmaF16BF16Op(a.element_type, cute.Float32, (64, N, 16))
    _stmatrix_store(a, b, c, cute.make_tiled_mma(op), transpose).launch(grid=(1, 1, 1), block=(128, 1, 1))


@pytest.mark.parametrize("transpose", [False, True])
def test_transposed_stmatrix_reaches_ptx(transpose):
    a, b = _inputs(torch.bfloat16, torch.bfloat16)
    ptx = cute.compile(_stmatrix_host, a, b, torch.empty(64, N, dtype=torch.bfloat16), transpose,
                       options={"arch": "sm_90a"}).__ptx__
    form = "x4.trans.m8n8" if transpose else "x4.m8n8"
    assert ptx.count(f"stmatrix.sync.aligned.{form}.shared.b16") == N // 16


# -- ldmatrix through make_tiled_copy_C: a 16-bit tile into registers laid out as accumulators -----

@cute.kernel
def _ldmatrix_c(mIn: cute.Tensor, mOut: cute.Tensor, tiled_mma: cute.Constexpr, transpose: cute.Constexpr):
    """Reads a (64, N) tile from shared memory into an accumulator-shaped fragment by ldmatrix, then
    writes each value to its accumulator's place in mOut: mOut equals mIn when the fragment
    order is the accumulators'."""
    tid = cute.arch.thread_idx()[0]
    sIn = cute.arch.alloc_smem(mIn.element_type, (64, N), stride=(1, 64) if transpose else (N, 1), alignment=16)
    copy_by_threads(mIn, sIn, tid)
    cute.arch.sync_threads()
    thr = tiled_mma.get_slice(tid)
    frag = cute.make_fragment_like(thr.make_fragment_C(thr.partition_C(sIn)), mIn.element_type)
    ldsm = cute.make_tiled_copy_C(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(transpose), mIn.element_type),
                                  tiled_mma)
    ld = ldsm.get_slice(tid)
    cute.copy(ldsm, ld.partition_S(sIn), ld.retile(frag))
    out = thr.partition_C(mOut)
    for i in cute.range_constexpr(cute.size(frag)):
        out[i] = frag[i]


@cute.jit
def _ldmatrix_c_host(x: cute.Tensor, y: cute.Tensor, transpose: cute.Constexpr):
    op = warpgroup.MmaF16BF16Op(cute.BFloat16, cute.Float32, (64, N, 16))
    _ldmatrix_c(x, y, cute.make_tiled_mma(op), transpose).launch(grid=(1, 1, 1), block=(128, 1, 1))


@pytest.mark.parametrize("transpose", [False, True])
def test_ldmatrix_reads_a_c_tile_with_stmatrix_addresses(transpose):
    x = torch.randn(64, N).bfloat16()
    ptx = cute.compile(_ldmatrix_c_host, x, torch.empty_like(x), transpose, options={"arch": "sm_90a"}).__ptx__
    form = "x4.trans.shared.b16" if transpose else "x4.shared.b16"
    assert ptx.count(f"ldmatrix.sync.aligned.m8n8.{form}") == N // 16
    with pytest.raises(DSLError, match="x4 ldmatrix"):
        @cute.jit
        def two_matrices(t: cute.Tensor):
            op = warpgroup.MmaF16BF16Op(cute.BFloat16, cute.Float32, (64, N, 16))
            cute.make_tiled_copy_C(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(num_matrices=2), cute.BFloat16),
                                   cute.make_tiled_mma(op))
        cute.compile(two_matrices, x, options={"arch": "sm_90a"})


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("transpose", [False, True])
def test_ldmatrix_fills_a_fragment_in_accumulator_order(transpose):
    x = torch.randn(64, N, generator=torch.Generator().manual_seed(41)).bfloat16().cuda()
    y = torch.full_like(x, float("nan"))
    _ldmatrix_c_host(x, y, transpose)
    torch.cuda.synchronize()
    assert torch.equal(y, x)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("transpose", [False, True])
def test_transposed_stmatrix_matches_matmul(transpose):
    a, b = _inputs(torch.bfloat16, torch.bfloat16, "cuda")
    c = torch.full((64, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    _stmatrix_host(a, b, c, transpose)
    torch.cuda.synchronize()
    want = (a.double() @ b.double().t()).to(torch.bfloat16)      # the kernel rounds fp32 sums once
    torch.testing.assert_close(c, want, rtol=1e-2, atol=1e-2)
