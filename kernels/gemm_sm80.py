"""The Ampere GEMM of the kernel library (sm_80, 86, 89; on Hopper too when asked): cp.async into
a multistage shared ring, ldmatrix, mma.sync, and the same fused epilogues as gemm_sm90.

    from cute_torch.kernels.gemm_sm80 import gemm
    gemm(a, b, c)                                         # c = a @ b, like torch.mm
    gemm(a, b, c, "gelu_tanh(acc + x0)", (bias,))         # the epilogue language of gemm_sm90

A (M, K) and B (K, N), or batches (L, M, K) x (L, K, N) with any batch strides, are bf16 or fp16,
each row- or column-major (no copies); C (M, N) or (L, M, N), bf16, fp16 or fp32, has rows of a
multiple of 16 bytes (N / 2 columns for a gated epilogue over `gate` and `up`). Operands are read
in 16-byte pieces, so their strides (but the unit one) and addresses are multiples of 16 bytes
and a K-major operand's K a multiple of 8; M, N and K are otherwise any size (tails are
zero-filled by predicated cp.async).

One CTA of 256 threads (8 warps) per 128 x BN output tile (BN 256, or 128 where 256-wide tiles
would leave more than half the SMs idle or shared memory is short: choose_config), tiles visited
in groups of GROUP_M tile rows so that neighbouring CTAs share operands in L2:
  * the main loop keeps a ring of `stages` k-tiles of A (128 x BK) and B (BN x BK), 128-byte
    swizzled (BK = 64; 64-byte swizzle with BK = 32 where shared memory holds fewer than three
    64-deep stages), filled by cp.async, one commit group per k-tile. For each k-block of 16,
    ldmatrix brings the next k-block's fragments while mma.sync m16n8k16 consumes this one's;
    before a k-tile's last k-block, the CTA waits for the next k-tile's group and syncs (every
    warp has then read this k-tile's slot), refills the slot with the k-tile `stages` ahead and
    loads the next k-tile's first fragments, so the sync and the ldmatrix latency hide behind
    the last k-block's MMAs;
  * the warps form a 2 x 4 grid, so a warp computes 64 x BN/4 (4 x BN/32 atoms): per k-block 4
    ldmatrix.x4 of A and BN/32 ldmatrix.x2 of B feed BN/8 mma.sync;
  * the epilogue sends the fp32 accumulators through shared memory (the ring is free by then;
    rows padded by C_PAD columns against bank conflicts) so that each thread then owns 8
    consecutive output columns of a row: it reads the inputs in 16-byte vectors where their
    strides allow, computes every epilogue (a gated one combines 8 gate and 8 up columns into 8
    outputs), and stores 16-byte vectors: coalesced in and out, unlike the accumulators' own
    layout (two columns per thread).
Measured on an H100 (sm_90, mma.sync instead of wgmma): benchmarks/RESULTS.md.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

import cute_torch as cute
from cute_torch import Constexpr
from cute_torch.kernels.gemm_common import epilogue_values, is_gated, k_major_view, problem, swizzled, tile_of

BM = 128                          # tile rows
THREADS = 256                     # 8 warps
WARPS = (2, 4, 1)                 # the warp grid over (M, N, K): warp tiles of 64 x BN/4
MAX_STAGES = 4                    # more did not help (the ring then outruns what L2 delivers)
C_PAD = 4                         # fp32 columns of padding per accumulator row in shared memory
VECTOR = 8                        # output columns per thread in the epilogue (16 bytes of 16-bit)
# Shared memory one CTA may allocate, by compute capability (A100/H100 more than the consumer parts).
SMEM_BYTES = {(8, 0): 163 * 1024, (8, 6): 99 * 1024, (8, 7): 163 * 1024, (8, 9): 99 * 1024,
              (9, 0): 227 * 1024}


class Config(NamedTuple):
    """A kernel variant (compile-time): tile columns, k-tile depth, ring stages."""
    tile_n: int = 256
    bk: int = 64
    stages: int = 4


def _stage_bytes(tile_n: int, bk: int) -> int:
    return (BM + tile_n) * bk * 2


def _c_bytes(tile_n: int) -> int:
    return BM * (tile_n + C_PAD) * 4


def choose_config(m: int, n: int, batches: int, sms: int, smem: int, tile_n: int | None = None) -> Config:
    """Tiles 128 x 256 (the most math per byte read from shared memory) unless that leaves more
    than half the SMs idle, N is narrow or the accumulator tile does not fit in shared memory;
    BK 64 when three such stages fit, else 32; as many stages as fit, up to MAX_STAGES."""
    if tile_n is None:
        tiles = -(-m // BM) * -(-n // 256) * batches
        tile_n = 128 if n <= 128 or 2 * tiles <= sms or _c_bytes(256) > smem else 256
    bk = 64 if 3 * _stage_bytes(tile_n, 64) <= smem else 32
    stages = min(MAX_STAGES, smem // _stage_bytes(tile_n, bk))
    if stages < 2 or _c_bytes(tile_n) > smem:
        raise ValueError(f"gemm_sm80: a 128 x {tile_n} tile does not fit in {smem} bytes of shared memory")
    return Config(tile_n, bk, stages)


def _operand_copy(dtype, rows: int, bk: int, k_major: bool):
    """cp.async of a rows x bk tile, 16 bytes (8 values) per copy along the contiguous mode:
    consecutive threads take consecutive pieces of one row (K-major) or one column (MN-major),
    so that a warp reads whole 128-byte (or 64-byte) lines."""
    # (.cg: a GEMM's tiles are read once per CTA, L1 would only evict)
    atom = cute.make_copy_atom(cute.nvgpu.cpasync.CopyG2SOp(cache_mode=cute.nvgpu.cpasync.LoadCacheMode.GLOBAL), dtype,
                               num_bits_per_copy=128)
    if k_major:
        across = bk // 8                                   # threads per row
        threads = cute.make_layout((THREADS // across, across), stride=(across, 1))
        return cute.make_tiled_copy_tv(atom, threads, cute.make_layout((1, 8), stride=(8, 1)))
    threads = cute.make_layout((8, THREADS // 8), stride=(1, 8))   # 8 threads cover 64 rows of one k
    return cute.make_tiled_copy_tv(atom, threads, cute.make_layout((8, 1), stride=(1, 8)))


def _k_tiles(tiles, i, l):
    """Tile row (or column) i of a (rows, bk, tiles, k_tiles[, L]) tensor: (rows, bk, k_tiles)."""
    return tiles[(None, None, i, None) + ((l,) if len(tiles.shape) == 5 else ())]


def _load_k_tile(copy, src, dst, coords, extent, pred, kt, slot) -> None:
    """cp.async of k-tile kt into ring slot `slot`; pieces whose first element lies outside
    `extent` (rows or K past the operand's end) arrive as zeros."""
    for i in cute.range_constexpr(cute.size(pred, mode=[1])):
        for j in cute.range_constexpr(cute.size(pred, mode=[2])):
            pred[0, i, j] = cute.elem_less(coords[0, i, j, kt], extent)
    cute.copy(copy, src[None, None, None, kt], dst[None, None, None, slot], pred=pred)


def _with_aligned_strides(x, elements: int):
    """`x` with its run-time strides assumed multiples of `elements` (the host checked them)."""
    strides = tuple(cute.assume(d, divby=elements) if not isinstance(d, int) else d for d in x.stride)
    return cute.make_tensor(x.iterator, cute.make_layout(x.shape, stride=strides))


def _row_piece(x, coord, width: int):
    """The `width` elements of tensor x from coordinate (row, col[, l]) along its columns."""
    rest = len(coord) - 2
    at = cute.domain_offset(coord, x)
    return cute.local_tile(at, (1, width) + (1,) * rest, (0,) * (2 + rest))[(0, None) + (0,) * rest]


def _input_elements(x, coord, vector: bool, n) -> list:
    """Elements col..col+7 of row `row` of input x: one 16-byte load where the host allowed
    (`vector`: unit column stride, strides and N multiples of 8), else one at a time; columns
    past N are clamped (their outputs are not stored)."""
    row, col, *l = coord
    if cute.const_expr(vector):
        piece = _row_piece(x, (row, cute.assume(cute.math.min(col, n - VECTOR), divby=VECTOR), *l), VECTOR).load()
        return [piece[e] for e in range(VECTOR)]
    return [x[(row, cute.math.min(col + e, n - 1), *l)] for e in range(VECTOR)]


@cute.kernel
def gemm_kernel(mA, mB, outs, inputs, tiled_mma: Constexpr, copy_a: Constexpr, copy_b: Constexpr,
                ldsm_a: Constexpr, ldsm_b: Constexpr, epilogues: Constexpr, input_dtypes: Constexpr,
                input_vectors: Constexpr, out_types: Constexpr, k_major: Constexpr, config: Constexpr):
    BN, bk, stages = config
    gated = is_gated(epilogues)
    out_n = BN // 2 if gated else BN                   # a gated tile's output columns combine pairs
    tid = cute.arch.thread_idx()[0]
    ab = mA.element_type
    smem = cute.SmemAllocator()
    ring_a = BM * bk * stages * 2
    base = smem.allocate(max(ring_a + BN * bk * stages * 2, _c_bytes(BN)), 1024)
    sA = cute.make_tensor(cute.recast_ptr(base, ab), swizzled(BM, bk, stages, k_major[0]))
    sB = cute.make_tensor(cute.recast_ptr(base + ring_a, ab), swizzled(BN, bk, stages, k_major[1]))
    sC = cute.make_tensor(cute.recast_ptr(base, cute.Float32), cute.make_layout((BM, BN), stride=(BN + C_PAD, 1)))

    # This CTA's tile, and the coordinates of its operands' elements (for the predicates).
    modes = (None,) * len(mA.shape)
    gA, gB = cute.local_tile(mA, (BM, bk), modes), cute.local_tile(mB, (BN, bk), modes)
    cA = cute.local_tile(cute.make_identity_tensor(mA.shape), (BM, bk), modes)
    cB = cute.local_tile(cute.make_identity_tensor(mB.shape), (BN, bk), modes)
    tiles_m, tiles_n, k_tiles = cute.size(gA, mode=[2]), cute.size(gB, mode=[2]), cute.size(gA, mode=[3])
    m, n, l = tile_of(cute.arch.block_idx()[0], tiles_m, tiles_n)
    thr_a, thr_b = copy_a.get_slice(tid), copy_b.get_slice(tid)
    tAgA, tAsA, tAcA = thr_a.partition_S(_k_tiles(gA, m, l)), thr_a.partition_D(sA), thr_a.partition_S(
        _k_tiles(cA, m, l))                            # (8 values, pieces M, pieces K, k-tiles | stages)
    tBgB, tBsB, tBcB = thr_b.partition_S(_k_tiles(gB, n, l)), thr_b.partition_D(sB), thr_b.partition_S(
        _k_tiles(cB, n, l))
    pred_a = cute.make_rmem_tensor(cute.make_layout((1,) + tuple(tAcA.shape[1:3])), cute.Boolean)
    pred_b = cute.make_rmem_tensor(cute.make_layout((1,) + tuple(tBcB.shape[1:3])), cute.Boolean)

    def load(kt, slot):
        _load_k_tile(copy_a, tAgA, tAsA, tAcA, mA.shape, pred_a, kt, slot)
        _load_k_tile(copy_b, tBgB, tBsB, tBcB, mB.shape, pred_b, kt, slot)

    for s in cute.range_constexpr(stages):                # the prologue: a k-tile in flight per slot
        if s < k_tiles:
            load(s, s)
        cute.arch.cp_async_commit_group()                   # one group per k-tile, even when empty

    thr = tiled_mma.get_slice(tid)
    tCrA = thr.make_fragment_A(thr.partition_A(sA)[None, None, None, 0])      # (values, FrgM, k-blocks)
    tCrB = thr.make_fragment_B(thr.partition_B(sB)[None, None, None, 0])
    acc = thr.make_fragment_C(tiled_mma.partition_shape_C((BM, BN)))
    lds_a, lds_b = ldsm_a.get_slice(tid), ldsm_b.get_slice(tid)
    tLsA, tLrA = lds_a.partition_S(sA), lds_a.retile(tCrA)       # ldmatrix sources, fragments as targets
    tLsB, tLrB = lds_b.partition_S(sB), lds_b.retile(tCrB)

    def fragments(kb, slot):                              # one k-block of A and B, by ldmatrix
        cute.copy(ldsm_a, tLsA[None, None, kb, slot], tLrA[None, None, kb])
        cute.copy(ldsm_b, tLsB[None, None, kb, slot], tLrB[None, None, kb])

    k_blocks = bk // 16
    acc.fill(0.0)
    cute.arch.cp_async_wait_group(stages - 1)              # k-tile 0 has landed
    cute.arch.sync_threads()
    fragments(0, 0)
    for kt in range(k_tiles):
        s = kt % stages
        for kb in cute.range_constexpr(k_blocks):
            if cute.const_expr(kb + 1 < k_blocks):          # the next k-block's fragments in flight
                fragments(kb + 1, s)
            else:
                # Before the last k-block's MMAs: every warp has issued its reads of slot s, so
                # after a sync the slot takes k-tile kt + stages, and k-tile kt + 1's first
                # fragments load while these MMAs run.
                cute.arch.cp_async_wait_group(stages - 2)   # k-tile kt + 1 has landed
                cute.arch.sync_threads()
                if kt + stages < k_tiles:
                    load(kt + stages, s)
                cute.arch.cp_async_commit_group()
                fragments(0, (kt + 1) % stages)
            cute.gemm(tiled_mma, acc, tCrA[None, None, kb], tCrB[None, None, kb], acc)

    # The epilogue: accumulators to shared memory (over the ring), then 8 output columns per thread.
    cute.arch.cp_async_wait_group(0)
    cute.arch.sync_threads()                                # every warp is done with the ring
    cute.autovec_copy(acc, thr.partition_C(sC))
    cute.arch.sync_threads()
    per_row = out_n // VECTOR                              # threads across one tile row
    rows_per_pass = THREADS // per_row
    first_row = tid // per_row
    col = cute.assume(n * out_n + (tid % per_row) * VECTOR, divby=VECTOR)
    rows, cols = outs[0].shape[0], outs[0].shape[1]
    batch = (l,) if cute.const_expr(len(mA.shape) == 3) else ()
    xs = [_with_aligned_strides(x, VECTOR) if cute.const_expr(v) else x for x, v in zip(inputs, input_vectors)]
    ys = [_with_aligned_strides(y, 16 // (t.width // 8)) for y, t in zip(outs, out_types)]
    for p in cute.range_constexpr(BM // rows_per_pass):
        r = p * rows_per_pass + first_row
        row = m * BM + r
        if row < rows:
            c = (tid % per_row) * VECTOR * (2 if gated else 1)
            accs = _row_piece(sC, (r, c), 2 * VECTOR if gated else VECTOR).load()
            elements = [_input_elements(x, (row, col, *batch), v, cols) for x, v in zip(xs, input_vectors)]
            pieces = [cute.make_rmem_tensor(cute.make_layout(VECTOR), t) for t in out_types]
            for e in cute.range_constexpr(VECTOR):
                pair = [accs[e], accs[VECTOR + e]] if cute.const_expr(gated) else [accs[e]]
                values = epilogue_values(epilogues, pair, [x[e] for x in elements], input_dtypes, out_types)
                for piece, value in zip(pieces, values):
                    piece[e] = value
            for y, piece, t in zip(ys, pieces, out_types):
                width = 16 // (t.width // 8)                 # values per 16-byte store
                for h in cute.range_constexpr(VECTOR // width):
                    at = cute.assume(col + h * width, divby=width) if cute.const_expr(h) else col
                    if at < cols:                            # rows of 16 bytes: a store is all in or out
                        _row_piece(y, (row, at, *batch), width).store(
                            cute.local_tile(piece, (width,), (h,)).load())


@cute.jit
def _gemm_host(a: cute.Tensor, b: cute.Tensor, config: Constexpr, epilogues: Constexpr, input_dtypes: Constexpr,
               input_vectors: Constexpr, *tensors):
    """a (M, K[, L]), b (N, K[, L]) (views: either mode may be contiguous); `tensors` are one
    output per epilogue, (M, N[, L]) with N contiguous, then the epilogues' inputs."""
    outs, inputs = tensors[:len(epilogues)], tensors[len(epilogues):]
    ab = a.element_type
    k_major = (k_major_view(a), k_major_view(b))
    warp = cute.nvgpu.warp
    tiled_mma = cute.make_tiled_mma(warp.MmaF16BF16Op(ab, cute.Float32, (16, 8, 16)), WARPS)
    ldsm_a = cute.make_tiled_copy_A(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(not k_major[0], 4), ab), tiled_mma)
    ldsm_b = cute.make_tiled_copy_B(cute.make_copy_atom(warp.LdMatrix8x8x16bOp(not k_major[1], 2), ab), tiled_mma)
    copy_a = _operand_copy(ab, BM, config.bk, k_major[0])
    copy_b = _operand_copy(ab, config.tile_n, config.bk, k_major[1])
    tiles = cute.ceil_div(cute.size(a, mode=[0]), BM) * cute.ceil_div(cute.size(b, mode=[0]), config.tile_n)
    if cute.const_expr(len(a.shape) == 3):
        tiles = tiles * cute.size(a, mode=[2])
    out_types = tuple(out.element_type for out in outs)
    gemm_kernel(a, b, outs, inputs, tiled_mma, copy_a, copy_b, ldsm_a, ldsm_b, epilogues, input_dtypes,
                input_vectors, out_types, k_major, config).launch(grid=(tiles, 1, 1), block=(THREADS, 1, 1))


def reads_vectors(strides, n: int, alignment: int) -> bool:
    """Whether the epilogue reads an input view (rows, cols[, L]) of these strides 8 columns per
    load: unit column stride, every other stride and N multiples of 8, a 16-byte aligned
    address (cute::gemm's C++ key tells these apart)."""
    return (strides[1] == 1 and n % VECTOR == 0 and alignment % 16 == 0
            and all(d % VECTOR == 0 for i, d in enumerate(strides) if i != 1))


def _check_operand(name: str, t: torch.Tensor, k_dim: int) -> None:
    """cp.async reads 16-byte pieces along the contiguous mode: bf16/fp16, 16-byte aligned
    strides and address; K-major: K a multiple of 8 (a piece never straddles K's end); MN-major:
    the last piece of a row may read up to 7 elements past it, inside the tensor's storage."""
    if t.dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"gemm_sm80: {name} is {t.dtype}; the operands are bfloat16 or float16")
    contiguous = [d for d in (t.dim() - 2, t.dim() - 1) if t.stride(d) == 1 or t.shape[d] == 1]
    bad = [s for s, n in zip(t.stride(), t.shape) if s != 1 and n > 1 and s % 8]
    if not contiguous or bad or t.data_ptr() % 16:
        raise ValueError(f"gemm_sm80: {name} (shape {tuple(t.shape)}, strides {t.stride()}, address "
                         f"{t.data_ptr():#x}) is read in 16-byte pieces: one of its last two dims must be contiguous, "
                         "its address and other strides multiples of 16 bytes (8 elements); pad the leading dimension")
    along = contiguous[-1] if k_dim % t.dim() in contiguous else contiguous[0]
    extent = t.shape[along]
    if along == k_dim % t.dim() and extent % 8:
        raise ValueError(f"gemm_sm80: {name} (shape {tuple(t.shape)}) has K = {extent} contiguous, not a multiple "
                         "of 8: a 16-byte piece would straddle K's end; pad K")
    if extent % 8:
        last = t.storage_offset() + sum((s - 1) * d for i, (s, d) in enumerate(zip(t.shape, t.stride())) if i != along)
        if last + -(-extent // 8) * 8 > t.untyped_storage().nbytes() // t.element_size():
            raise ValueError(f"gemm_sm80: {name} (shape {tuple(t.shape)}) ends {extent} elements into its last "
                             "16-byte piece and its storage ends there too; pad it to a multiple of 8")


def host_arguments(a: torch.Tensor, b: torch.Tensor, c, epilogue=None, inputs=(), tile_n: int | None = None,
                   capability: tuple | None = None) -> tuple:
    """The arguments of _gemm_host for c = epilogue(a @ b) (gemm_sm90.host_arguments tells the
    operands, outputs and epilogues; they are the same here). `tile_n` (128 or 256) overrides
    choose_config's; `capability` is the target's (default: a's GPU; an A100 for CPU tensors),
    whose shared memory sizes the configuration."""
    outs, epilogues, gated, batched, views, tensors, dtypes = problem(a, b, c, epilogue, inputs)
    _check_operand("a", a, -1)
    _check_operand("b", b, -2)
    if a.dtype != b.dtype:
        raise ValueError(f"gemm_sm80: a is {a.dtype} and b {b.dtype}; the operands are both bfloat16 or both float16")
    for i, out in enumerate(outs):
        if out.dtype not in (torch.bfloat16, torch.float16, torch.float32):
            raise ValueError(f"gemm_sm80: output {i} is {out.dtype}; outputs are bfloat16, float16 or float32")
        bad = [s for s, n in zip(out.stride(), out.shape) if s != 1 and n > 1 and (s * out.element_size()) % 16]
        if bad or out.data_ptr() % 16 or (out.shape[-1] * out.element_size()) % 16:
            raise ValueError(f"gemm_sm80: output {i} (shape {tuple(out.shape)}, strides {out.stride()}) is stored in "
                             "16-byte pieces: its rows, strides and address must be multiples of 16 bytes; pad N")
    if tile_n not in (None, 128, 256):
        raise ValueError(f"gemm_sm80: tile_n is 128 or 256, got {tile_n!r}")
    shape = outs[0].shape
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count if a.is_cuda else 108
    if capability is None:
        capability = torch.cuda.get_device_capability(a.device) if a.is_cuda else (8, 0)
    smem = SMEM_BYTES.get(tuple(capability), 99 * 1024)
    config = choose_config(shape[-2], b.shape[-1], shape[0] if batched else 1, sms, smem, tile_n)
    vectors = tuple(reads_vectors(x.stride(), shape[-1], 16 if x.data_ptr() % 16 == 0 else 1)
                    for x in tensors[len(outs):])
    dynamic = [cute.from_dlpack(x).mark_layout_dynamic(keep_broadcast=True) for x in views + tuple(tensors)]
    return (*dynamic[:2], config, epilogues, dtypes, vectors, *dynamic[2:])


def gemm(a: torch.Tensor, b: torch.Tensor, c, epilogue=None, inputs=(), tile_n: int | None = None):
    """c = epilogue(a @ b) with Ampere's instructions (any GPU from sm_80 on), like torch.mm /
    torch.bmm; epilogues, inputs and several outputs as in gemm_sm90.gemm."""
    _gemm_host(*host_arguments(a, b, c, epilogue, inputs, tile_n))
    return c
