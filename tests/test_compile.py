"""Compile tier: MLIR -> CUBIN without a GPU (ptxas/nvJitLink run on the CPU)."""

import json
import os
import shlex
import subprocess

import pytest
from conftest import read_mlir

import cute_torch
from cute_torch.toolkit import nvdisasm_path, nvjitlink_path

BACKENDS = ["ptxas"] + (["nvjitlink"] if nvjitlink_path() else [])
ELF_MAGIC = b"\x7fELF"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("arch", cute_torch.SUPPORTED_ARCHS)
def test_vector_add_compiles_for_every_arch(vector_add_mlir, arch, backend):
    module = cute_torch.compile_mlir(vector_add_mlir, arch=arch, cubin_backend=backend)
    assert module.metadata["arch"] == arch
    assert module.metadata["cubin_backend"] == backend
    cubin = module.cubins["kernels"]
    assert cubin.startswith(ELF_MAGIC) and len(cubin) > 512
    ptx = module.__ptx__
    # LLVM 19 emits every target natively, sm_90a included (no header rewriting), as PTX 8.5.
    assert f".version 8.5\n.target {arch}\n" in ptx
    assert ".visible .entry vadd(" in ptx


def test_metadata_describes_kernels_and_host_functions(vector_add_mlir):
    module = cute_torch.compile_mlir(vector_add_mlir)
    (kernel,) = module.kernels
    assert (kernel["index"], kernel["module"], kernel["name"]) == (0, "kernels", "vadd")
    assert [(p["type"], p["size"]) for p in kernel["params"]] == [("ptr", 8)] * 3 + [("i32", 4)]
    assert 0 < kernel["registers"] < 64
    # Spills come from the assembler's report; some nvJitLink builds give none (null).
    unknown = module.metadata["cubin_backend"] == "nvjitlink" and kernel["spill_stores"] is None
    assert unknown or kernel["spill_stores"] == kernel["spill_loads"] == 0
    assert kernel["block_dims"] == [256, 1, 1]
    assert kernel["cluster_dims"] == [1, 1, 1]
    assert module.functions["vector_add"].arg_types == ["!llvm.ptr", "!llvm.ptr", "!llvm.ptr", "i32"]
    timings = module.metadata["timings_ms"]
    assert set(timings) >= {"parse", "device_passes", "llvm", "ptx", "cubin", "host", "total"}


def test_launch_shapes_that_differ_between_sites_are_not_recorded():
    module = cute_torch.compile_mlir(read_mlir("smem_reverse.mlir"))
    (kernel,) = module.kernels
    assert kernel["block_dims"] is None  # run-time block size
    assert kernel["cluster_dims"] is None  # one site has clusters, one does not
    assert set(module.functions) == {"reverse_blocks", "reverse_clusters"}


def test_sm90a_wgmma_fence_compiles():
    module = cute_torch.compile_mlir(read_mlir("wgmma_fence.mlir"), arch="sm_90a")
    assert "wgmma.fence.sync.aligned;" in module.__ptx__
    assert module.cubins["hopper"].startswith(ELF_MAGIC)


def test_math_links_libdevice_and_inlines_it():
    module = cute_torch.compile_mlir(read_mlir("math_exp.mlir"), keep=["llvm"])
    assert "__nv_expf" not in module.__ptx__  # linked and inlined, not called
    assert "ex2.approx" in module.__ptx__
    assert "define" in module.stage("llvm").decode()


def test_every_stage_can_be_kept_and_dumped(vector_add_mlir, tmp_path):
    stages = ["mlir", "nvvm", "llvm", "ptx", "cubin", "host", "host_object", "sass"]
    module = cute_torch.compile_mlir(vector_add_mlir, keep=stages, dump_dir=str(tmp_path), name="vadd")
    assert "gpu.launch_func" in module.__mlir__
    assert "nvvm.read.ptx.sreg.tid.x" in module.stage("nvvm").decode()
    assert "llvm.call @cute_rt_launch" in module.stage("host").decode()
    assert module.stage("cubin") == module.cubins["kernels"]
    assert module.__sass__  # the SASS, or a line saying there is no disassembler
    assert module.host_object.startswith(b"\x7fELF")
    files = sorted(os.listdir(tmp_path))
    assert files == sorted(
        ["vadd.mlir", "vadd.nvvm.mlir", "vadd.ll", "vadd.ptx", "vadd.cubin", "vadd.host.mlir", "vadd.host.o",
         "vadd.sass"]
    )
    assert (tmp_path / "vadd.ptx").read_text() == module.__ptx__


def test_sass_comes_from_nvdisasm_where_one_is_found(vector_add_mlir, monkeypatch):
    """The "sass" stage disassembles with the toolkit's nvdisasm or the nvidia-cuda-nvdisasm
    wheel's (scripts/install_deps.sh installs it: SASS on machines without a full toolkit);
    CUTE_TORCH_NVDISASM names another, and one that does not run leaves the toolkit's tools."""
    if nvdisasm_path() is None:
        pytest.skip("no nvdisasm (toolkit or wheel)")
    sass = cute_torch.compile_mlir(vector_add_mlir, keep=["sass"]).__sass__
    assert ".text.vadd" in sass and "EXIT" in sass, sass[:500]
    monkeypatch.setenv("CUTE_TORCH_NVDISASM", "/nonexistent/nvdisasm")
    assert cute_torch.compile_mlir(vector_add_mlir, keep=["sass"]).__sass__   # SASS or a line saying none


def test_keep_from_environment(vector_add_mlir, monkeypatch):
    monkeypatch.setenv("CUTE_TORCH_KEEP", "mlir,llvm")
    module = cute_torch.compile_mlir(vector_add_mlir)
    assert module.__mlir__ and module.stage("llvm") and module.stage("nvvm") is None
    monkeypatch.setenv("CUTE_TORCH_KEEP", "mlir,bogus")
    with pytest.raises(ValueError, match="bogus"):
        cute_torch.compile_mlir(vector_add_mlir)


def test_lazy_mlir_prints_the_module_only_when_asked(vector_add_mlir):
    """With lazy_mlir (the DSL's compiles) the "mlir" stage is not printed during the compile but
    on first use, the same text as a kept one; stages that are not kept stay None."""
    kept = cute_torch.compile_mlir(vector_add_mlir, keep=["mlir"])
    lazy = cute_torch.compile_mlir(vector_add_mlir, lazy_mlir=True)
    assert "mlir" not in lazy.metadata["stages"] and "mlir" in kept.metadata["stages"]
    assert lazy.__mlir__ == kept.__mlir__ and "gpu.func @vadd" in lazy.__mlir__
    assert cute_torch.compile_mlir(vector_add_mlir).__mlir__ is None and lazy.stage("nvvm") is None
    assert cute_torch.compiler.print_mlir(vector_add_mlir) == kept.__mlir__
    with pytest.raises(cute_torch.CompileError, match="invalid"):
        cute_torch.compiler.print_mlir("module { bogus }")


def test_arch_comes_from_the_environment_when_not_given(vector_add_mlir, monkeypatch):
    monkeypatch.setenv("CUTE_TORCH_ARCH", "sm_86")
    assert cute_torch.compile_mlir(vector_add_mlir).metadata["arch"] == "sm_86"
    with pytest.raises(ValueError, match="unsupported arch 'sm_70'"):
        cute_torch.compile_mlir(vector_add_mlir, arch="sm_70")


def test_host_entry_refuses_wrong_arguments(vector_add_mlir):
    module = cute_torch.compile_mlir(vector_add_mlir)
    with pytest.raises(TypeError, match="takes 4 arguments, got 2"):
        module.vector_add(1, 2)
    with pytest.raises(TypeError, match="argument 3 must be i32"):
        module.vector_add(1, 2, 3, "four")
    with pytest.raises(AttributeError, match="no host function 'nope'"):
        module.nope


def test_ptxas_failure_keeps_ptx_and_gives_a_reproducer(tmp_path):
    # wgmma needs sm_90a: for sm_90 the assembler refuses it.
    with pytest.raises(cute_torch.PtxasError) as info:
        cute_torch.compile_mlir(read_mlir("wgmma_fence.mlir"), arch="sm_90", cubin_backend="ptxas",
                                dump_dir=str(tmp_path), name="fence")
    error = info.value
    assert error.kind == "ptxas"
    assert "wgmma.fence" in error.message and "not supported on .target 'sm_90'" in error.message
    assert os.path.dirname(error.ptx_path) == str(tmp_path) and os.path.exists(error.ptx_path)
    assert error.ptx_path in error.message and error.command in error.message
    rerun = subprocess.run(shlex.split(error.command), capture_output=True, text=True)
    assert rerun.returncode != 0 and "wgmma.fence" in rerun.stderr


@pytest.mark.skipif("nvjitlink" not in BACKENDS, reason="nvJitLink not installed")
def test_nvjitlink_failure_is_reported_like_ptxas():
    with pytest.raises(cute_torch.PtxasError) as info:
        cute_torch.compile_mlir(read_mlir("wgmma_fence.mlir"), arch="sm_90", cubin_backend="nvjitlink")
    assert "nvJitLink failed for sm_90" in info.value.message
    assert os.path.exists(info.value.ptx_path)



def _spilling_kernel_mlir() -> str:
    """The traced MLIR of a kernel ptxas spills (LayerNorm's bf16 backward with weight and bias
    over 8 512-thread CTAs at 100000 columns: 124 bytes, sm_90a)."""
    import torch

    from row_checks import norm_backward_args

    from cute_torch.kernels import norms
    from cute_torch.kernels.row_reduce import RowConfig
    n = 100000
    x, w = torch.empty(4, n, dtype=torch.bfloat16), torch.empty(n, dtype=torch.bfloat16)
    args = norm_backward_args(x, w, True, True)
    return norms._backward.compile(*args, 1, RowConfig(n, 8, 512, 512, 8), options={"arch": "sm_90a"}).__mlir__


@pytest.mark.skipif("nvjitlink" not in BACKENDS, reason="nvJitLink not installed")
def test_auto_reports_the_spills_of_a_spilling_kernel_on_every_compile():
    """Where nvJitLink assembles, its log gives ptxas's spill counts only with -Xptxas=-v, and
    none for a kernel it serves without running ptxas (then only a summary with its stack frame;
    seen on the GPU machine). `auto` then takes ptxas's cubin and report: every compile of a
    spilling kernel reports its spills. (Which of the two compiles below runs ptxas inside
    nvJitLink is its business; csrc/unittests/PtxUtilsTest.cpp covers both logs.)"""
    mlir = _spilling_kernel_mlir()
    for _ in range(2):
        module = cute_torch.compile_mlir(mlir, arch="sm_90a", cubin_backend="auto")
        assert all(isinstance(k["spill_stores"], int) for k in module.kernels), module.kernels
        assert max(k["spill_stores"] for k in module.kernels) > 0, module.kernels


def test_ptxas_reports_the_spills_of_the_spilling_kernel():
    """The kernel above spills under ptxas (else the test above could not fail)."""
    module = cute_torch.compile_mlir(_spilling_kernel_mlir(), arch="sm_90a", cubin_backend="ptxas")
    assert max(k["spill_stores"] for k in module.kernels) > 0, module.kernels

HOST_ONLY = """
module {
  func.func @add(%a: i64, %b: i64) -> i64 {
    %c = arith.addi %a, %b : i64
    return %c : i64
  }
  func.func @scale(%p: !llvm.ptr, %v: f32, %n: i32) {
    %f = arith.sitofp %n : i32 to f32
    %w = arith.mulf %v, %f : f32
    llvm.store %w, %p : f32, !llvm.ptr
    return
  }
}
"""


def test_host_entries_take_packed_arguments_and_free_their_code():
    """A host function's entry, `void entry(void **args)`: argument i read through args[i], a
    result written through args[n]; run here on the CPU (no kernel launch in them). Each module's
    code lives in its own JITDylib of the process's JIT and goes with the artifact."""
    import ctypes
    import gc

    def call(module, name, *values):
        entry = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(module._artifact.host_entry_address(name))
        argv = (ctypes.c_void_p * len(values))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
        entry(ctypes.cast(argv, ctypes.c_void_p))

    from cute_torch import _C
    from cute_torch.compiler import CompiledModule

    def reloaded(module):  # what a disk-cache hit does: link the kept object, compile nothing
        assert module.host_object.startswith(b"\x7fELF")
        artifact, error = _C.load(module.host_object, json.dumps(module.metadata), list(module.cubins.items()))
        assert error is None, error
        return CompiledModule(artifact)

    for round_ in range(4):                       # modules made and freed one after the other
        module = cute_torch.compile_mlir(HOST_ONLY, arch="sm_90a")
        if round_ % 2:
            module = reloaded(module)
        total = ctypes.c_int64(-1)
        call(module, "add", ctypes.c_int64(40 + round_), ctypes.c_int64(2), total)
        assert total.value == 42 + round_
        out = ctypes.c_float(0.0)
        call(module, "scale", ctypes.c_void_p(ctypes.addressof(out)), ctypes.c_float(1.5), ctypes.c_int32(-4))
        assert out.value == -6.0
        del module
        gc.collect()
