"""Compile tier: shared storage as pipelined kernels lay it out (@cute.struct of MemRanges with
Align, carved by SmemAllocator) and the launch's smem computed from it."""

import pytest
import torch

import cute_torch as cute
from cute_torch.dsl.diagnostics import DSLError

STAGES = 4


@cute.struct
class Storage:
    full: cute.struct.MemRange[cute.Int64, STAGES]  # 32 bytes at 0
    empty: cute.struct.MemRange[cute.Int64, STAGES]  # 32 bytes at 32
    a: cute.struct.Align[cute.struct.MemRange[cute.Float16, STAGES * 64 * 64], 1024]  # 32 KB at 1024
    flag: cute.Int32  # 4 bytes at 33792


def test_struct_layout_follows_each_fields_alignment():
    offsets = {name: offset for name, _, offset in Storage.__cute_struct__.fields}
    assert offsets == {"full": 0, "empty": 32, "a": 1024, "flag": 1024 + STAGES * 64 * 64 * 2}
    assert Storage.align_in_bytes() == 1024
    assert Storage.size_in_bytes() == 34 * 1024  # 33796 rounded up to the 1024-byte alignment


@cute.kernel
def _uses_storage(out: cute.Tensor):
    allocator = cute.SmemAllocator()
    storage = allocator.allocate(Storage)
    extra = allocator.allocate_array(cute.Float32, 8)  # after the struct
    sA = storage.a.get_tensor(cute.make_layout((64, 64, STAGES), stride=(64, 1, 4096)))
    t = cute.arch.thread_idx()[0]
    if t == 0:
        cute.arch.mbarrier_init(storage.full.data_ptr() + 1, 1)
    sA[t % 64, 0, 1] = cute.Float16(1.0)
    cute.make_tensor(extra, cute.make_layout(8))[t % 8] = 2.0
    out[t] = cute.Float32(sA[0, t % 64, 1])


@cute.jit
def _storage_host(out: cute.Tensor):
    _uses_storage(out).launch(grid=(1, 1, 1), block=(128, 1, 1))


def test_the_launch_gets_the_bytes_the_kernel_allocated():
    compiled = cute.compile(_storage_host, torch.zeros(128), options={"arch": "sm_90a"})
    mlir, ptx = compiled.__mlir__, compiled.__ptx__
    total = 34 * 1024 + 8 * 4  # the struct, then 8 floats
    assert f"dynamic_shared_memory_size %c{total}_i32" in mlir
    assert ".extern .shared .align 1024 .b8 __cute_dynamic_smem[]" in ptx
    assert "mbarrier.init.shared.b64" in ptx


@cute.jit
def _too_small(out: cute.Tensor):
    _uses_storage(out).launch(grid=(1, 1, 1), block=(128, 1, 1), smem=1024)


def test_a_launch_smaller_than_the_allocations_is_an_error():
    with pytest.raises(DSLError) as err:
        cute.compile(_too_small, torch.zeros(128), options={"arch": "sm_90a"})
    assert "the kernel allocates 34848 bytes of dynamic shared memory (SmemAllocator) but the launch gives " \
           "smem=1024" in str(err.value)
    assert "test_smem_storage.py" in str(err.value)


def test_bad_struct_fields_are_errors():
    with pytest.raises(DSLError, match="field 'x' of Bad is 3"):
        @cute.struct
        class Bad:
            x: 3
    with pytest.raises(DSLError, match="Align takes a power of two, got 48"):
        cute.struct.Align[cute.struct.MemRange[cute.Float32, 4], 48]


@cute.struct
class Huge:
    a: cute.struct.Align[cute.struct.MemRange[cute.Float16, 60 * 1024], 1024]  # 120 KB


@cute.kernel
def _huge(out: cute.Tensor):
    storage = cute.SmemAllocator().allocate(Huge)
    out[0] = cute.Float32(storage.a.get_tensor(cute.make_layout(8))[0])


@cute.jit
def _huge_host(out: cute.Tensor):
    _huge(out).launch(grid=(1, 1, 1), block=(32, 1, 1))


def test_more_shared_memory_than_the_target_has_is_an_error_at_the_users_line():
    cute.compile(_huge_host, torch.zeros(1), options={"arch": "sm_90a"})  # 120 KB fit in 227 KB
    with pytest.raises(DSLError) as err:
        cute.compile(_huge_host, torch.zeros(1), options={"arch": "sm_86"})
    assert "122880 bytes of dynamic shared memory; sm_86 allows at most 101376 per block" in str(err.value)
    assert "test_smem_storage.py" in str(err.value)


@cute.kernel
def _static_and_dynamic(out: cute.Tensor, static_kb: cute.Constexpr):
    tile = cute.arch.alloc_smem(cute.Float32, (static_kb * 256,))
    big = cute.SmemAllocator().allocate_tensor(cute.Float32, cute.make_layout(200 * 256))   # 200 KB dynamic
    tile[0] = out[0]
    big[0] = tile[0]


@cute.jit
def _static_and_dynamic_host(out: cute.Tensor, static_kb: cute.Constexpr):
    _static_and_dynamic(out, static_kb).launch(grid=(1, 1, 1), block=(32, 1, 1))


def test_static_shared_memory_limits_are_errors_at_the_users_line():
    cute.compile(_static_and_dynamic_host, torch.zeros(1), 16, options={"arch": "sm_90a"})   # 16 + 200 KB fit
    with pytest.raises(DSLError) as err:   # static + dynamic over the block's 227 KB
        cute.compile(_static_and_dynamic_host, torch.zeros(1), 40, options={"arch": "sm_90a"})
    assert "204800 bytes of dynamic shared memory plus 40960 of static shared memory" in str(err.value)
    with pytest.raises(DSLError) as err:   # static over CUDA's 48 KB
        cute.compile(_static_and_dynamic_host, torch.zeros(1), 64, options={"arch": "sm_90a"})
    assert "static shared memory reaches 65536 bytes; CUDA allows 49152" in str(err.value)
    assert "cute.SmemAllocator" in str(err.value) and "test_smem_storage.py" in str(err.value)
