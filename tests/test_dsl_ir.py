"""The IR each DSL construct produces (no GPU): FileCheck on the traced module."""

import os
import subprocess
import sys

import pytest
import torch

import cute_torch as cute

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def x_(n=64, dtype=torch.float32):
    return torch.randn(n).to(dtype)


def _compile_with_tensors(kernel, args, **options):
    # The launcher's parameters take the kernel's annotations (Constexpr stays compile-time).
    annotations = [p.annotation for p in __import__("inspect").signature(kernel.fn).parameters.values()]
    names = [f"a{i}" for i in range(len(args))]
    params = [f"{n}: cute.Constexpr" if a is cute.Constexpr else n for n, a in zip(names, annotations)]
    source = (f"def host({', '.join(params)}):\n"
              f"    kernel({', '.join(names)}).launch(grid=(1, 1, 1), block=(32, 1, 1))\n")
    namespace = {"kernel": kernel, "cute": cute}
    exec(compile(source, "<host>", "exec"), namespace)  # noqa: S102 - a tiny generated launcher
    host = cute.jit(namespace["host"], preprocess=False)
    return cute.compile(host, *args, options=options or None).__mlir__


def test_dynamic_for_carries_variables_as_iter_args(filecheck):
    @cute.kernel
    def k(x: cute.Tensor, out: cute.Tensor, n: cute.Int32):
        acc = cute.Float32(0.0)
        count = 0
        for i in range(n):
            acc += x[i]
            count += 1
        out[0] = acc + count

    filecheck(_compile_with_tensors(k, (x_(), x_(), 10)), """
// CHECK: gpu.func @k
// CHECK: %{{.*}}:2 = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args({{.*}}, {{.*}}) -> (f32, i32)
// CHECK: llvm.load
// CHECK: arith.addf
// CHECK: arith.addi
// CHECK: scf.yield %{{.*}}, %{{.*}} : f32, i32
""")


def test_range_with_constant_bounds_is_still_a_loop(filecheck):
    @cute.kernel
    def k(x: cute.Tensor):
        for i in range(4):
            x[i] = 1.0

    filecheck(_compile_with_tensors(k, (x_(),)), """
// CHECK: scf.for
// CHECK-NOT: scf.for
""")


def test_range_constexpr_gives_no_loop(filecheck):
    @cute.kernel
    def k(x: cute.Tensor):
        for i in cute.range_constexpr(3):
            x[i] = 1.0

    filecheck(_compile_with_tensors(k, (x_(),)), """
// CHECK: gpu.func @k
// CHECK-NOT: scf.for
// CHECK-COUNT-3: llvm.store
// CHECK-NOT: llvm.store
""")


def test_negative_and_runtime_steps_iterate_a_trip_count(filecheck):
    @cute.kernel
    def k(x: cute.Tensor, step: cute.Int32):
        for i in range(10, 0, -3):
            x[i] = 1.0
        for j in range(0, 10, step):
            x[j] = 2.0

    filecheck(_compile_with_tensors(k, (x_(), 2)), """
// CHECK: gpu.func @k
// CHECK: scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step
// CHECK: arith.muli
// CHECK: arith.cmpi sgt
// CHECK: arith.select
// CHECK: scf.for
""")


def test_unroll_traces_the_body_n_times_plus_a_remainder_loop(filecheck):
    @cute.kernel
    def k(x: cute.Tensor, n: cute.Int32):
        for i in cute.range(0, n, 1, unroll=4):
            x[i] = 3.0

    filecheck(_compile_with_tensors(k, (x_(), 7)), """
// CHECK: scf.for
// CHECK-COUNT-4: llvm.store
// CHECK: scf.for
// CHECK-COUNT-1: llvm.store
// CHECK-NOT: llvm.store
""")


def test_data_dependent_while_is_scf_while(filecheck):
    @cute.kernel
    def k(x: cute.Tensor, limit: cute.Int32):
        i = cute.Int32(0)
        total = cute.Float32(0.0)
        while total < 10.0 and i < limit:
            total += x[i]
            i += 1
        x[0] = total

    filecheck(_compile_with_tensors(k, (x_(), 64)), """
// CHECK: scf.while (%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) : (f32, i32) -> (f32, i32)
// CHECK: arith.cmpf olt
// CHECK: scf.if
// CHECK: scf.condition
// CHECK: } do {
// CHECK: scf.yield
""")


def test_while_with_python_values_runs_at_compile_time(filecheck):
    @cute.kernel
    def k(x: cute.Tensor):
        i = 0
        while i < 3:
            x[i] = 1.0
            i += 1

    filecheck(_compile_with_tensors(k, (x_(),)), """
// CHECK-NOT: scf.while
// CHECK-COUNT-3: llvm.store
""")


def test_if_elif_else_yields_assigned_variables(filecheck):
    @cute.kernel
    def k(x: cute.Tensor, n: cute.Int32):
        tid = cute.arch.thread_idx()[0]
        if tid < n:
            y = x[tid] * 2.0
        elif tid == n:
            y = cute.Float32(0.0)
        else:
            y = x[0]
        x[tid] = y

    filecheck(_compile_with_tensors(k, (x_(), 5)), """
// CHECK: %[[OUTER:.*]] = scf.if %{{.*}} -> (f32) {
// CHECK: scf.yield %{{.*}} : f32
// CHECK: } else {
// CHECK: %[[INNER:.*]] = scf.if %{{.*}} -> (f32) {
// CHECK: scf.yield %[[INNER]] : f32
// CHECK: llvm.store %[[OUTER]]
""")


def test_ternary_and_boolean_operators(filecheck):
    @cute.kernel
    def k(x: cute.Tensor, n: cute.Int32):
        tid = cute.arch.thread_idx()[0]
        v = x[tid] if tid < n else 0.0
        ok = (tid > 1 and tid < 30) or not (tid == 7)
        if ok:
            x[tid] = v

    filecheck(_compile_with_tensors(k, (x_(), 5)), """
// CHECK: scf.if %{{.*}} -> (f32)
// CHECK: scf.if %{{.*}} -> (i1)
// CHECK: scf.if %{{.*}} -> (i1)
// CHECK: scf.if
""")


def test_comparison_chain_evaluates_each_operand_once(filecheck):
    @cute.kernel
    def k(x: cute.Tensor):
        tid = cute.arch.thread_idx()[0]
        if 2 < tid < 10:
            x[tid] = 1.0

    filecheck(_compile_with_tensors(k, (x_(),)), """
// CHECK-COUNT-1: nvvm.read.ptx.sreg.tid.x
// CHECK: arith.cmpi sgt
// CHECK: scf.if %{{.*}} -> (i1)
// CHECK: arith.cmpi slt
""")


def test_const_expr_keeps_only_the_taken_branch(filecheck):
    @cute.kernel
    def k(x: cute.Tensor, double: cute.Constexpr):
        if cute.const_expr(double):
            x[0] = x[0] * 2.0
        else:
            x[0] = x[0] + 1.0

    filecheck(_compile_with_tensors(k, (x_(), True)), """
// CHECK: arith.mulf
// CHECK-NOT: arith.addf
// CHECK-NOT: scf.if
""")


def test_tracing_mode_unrolls_loops_and_drops_untaken_branches(filecheck):
    @cute.kernel(preprocess=False)
    def k(x: cute.Tensor, flag: cute.Constexpr):
        for i in range(3):
            x[i] = 1.0
        if flag:
            x[5] = 2.0

    filecheck(_compile_with_tensors(k, (x_(), False)), """
// CHECK-NOT: scf.for
// CHECK-COUNT-3: llvm.store
// CHECK-NOT: llvm.store
""")


def test_epilogue_example_selects_only_for_relu():
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import epilogue_metaprogramming as ex

    A, B, C = torch.randn(16, 8), torch.randn(8, 4), torch.randn(16, 4)
    for epilogue, selects in ((ex.Epilogue, 0), (ex.ReLU, 1)):
        text = cute.compile(ex.matmul_dynamic, epilogue, A, B, cute.from_dlpack(C).mark_layout_dynamic()).__mlir__
        device = text[text.index("gpu.module"):text.index("func.func")]
        assert device.count("scf.for") == 2  # columns (dynamic bound) and the dot product
        assert device.count("arith.select") == selects
        unrolled = cute.compile(ex.matmul_unrolled, epilogue, A, B, C).__mlir__
        device = unrolled[unrolled.index("gpu.module"):unrolled.index("func.func")]
        assert device.count("scf.for") == 4  # one dot-product loop per column, no column loop
        assert device.count("arith.select") == 4 * selects


def test_numeric_conversions_and_promotion(filecheck):
    @cute.kernel
    def k(h: cute.Tensor, b: cute.Tensor, f8: cute.Tensor, out: cute.Tensor):
        i = cute.arch.thread_idx()[0]
        x = h[i] + b[i].to(cute.Float16)   # f16 + f16 stays f16
        y = b[i] * 2                        # bf16 math in f32, rounded back
        z = f8[i].to(cute.Float32)          # fp8 -> f32 through cvt
        out[i] = x.to(cute.Float32) + y.to(cute.Float32) + z + (i // 3) + (i / 2)
        f8[i] = out[i].to(cute.Float8E4M3FN)

    text = _compile_with_tensors(k, (x_(dtype=torch.float16), x_(dtype=torch.bfloat16),
                                     x_(dtype=torch.float8_e4m3fn), x_()))
    filecheck(text, """
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.addf %{{.*}}, %{{.*}} : f16
// CHECK: arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: cvt.rn.f16x2.e4m3x2
// CHECK: arith.divsi
// CHECK: arith.sitofp
// CHECK: arith.divf
// CHECK: cvt.rn.satfinite.e4m3x2.f32
""")


def test_promotion_rules():
    from cute_torch.dsl.numeric import promote

    assert promote(cute.Int32, cute.Int64) is cute.Int64
    assert promote(cute.Int32, cute.Uint32) is cute.Uint32
    assert promote(cute.Int8, cute.Float16) is cute.Float16
    assert promote(cute.Float16, cute.BFloat16) is cute.Float32
    assert promote(cute.Float8E4M3FN, cute.Float16) is cute.Float32  # Float8 computes in Float32
    assert promote(cute.Float32, cute.Float64) is cute.Float64


def test_printf_fstring_and_arch_ops(filecheck):
    @cute.kernel
    def k(x: cute.Tensor, counts: cute.Tensor):
        tid = cute.arch.thread_idx()[0]
        lane = cute.arch.lane_idx()
        smem = cute.arch.alloc_smem(cute.Float32, (32,))
        smem[lane] = x[tid]
        cute.arch.sync_threads()
        v = cute.arch.shuffle_sync(smem[lane], 1, mode="bfly")
        anyone = cute.arch.vote_any_sync(v > 0.0)
        old = cute.arch.atomic_add(counts, 0, 1)
        cute.printf(f"tid={tid} v={v:.3f} any={anyone} old={old}")

    filecheck(_compile_with_tensors(k, (x_(), torch.zeros(4, dtype=torch.int32))), """
// CHECK: llvm.mlir.global internal @__cute_smem{{.*}} {addr_space = 3 : i32
// CHECK: nvvm.read.ptx.sreg.tid.x
// CHECK: nvvm.read.ptx.sreg.laneid
// CHECK: llvm.mlir.addressof
// CHECK: nvvm.barrier0
// CHECK: nvvm.shfl.sync bfly
// CHECK: nvvm.vote.ballot.sync
// CHECK: atom.add.s32
// CHECK: gpu.printf "tid=%d v=%.3f any=%d old=%d\\0A"
""")


def test_reduction_profiles_fold_chosen_modes():
    @cute.kernel
    def k(x: cute.Tensor, out: cute.Tensor):
        frag = cute.make_rmem_tensor((2, 3), cute.Float32)
        frag.fill(1.0)
        rows = frag.load().reduce(cute.ReductionOp.ADD, 0.0, reduction_profile=(None, 1))
        assert rows.shape == (2,) and frag.load().reduce(cute.ReductionOp.MUL, 1.0, (1, None)).shape == (3,)
        out[0] = rows[1]

    _compile_with_tensors(k, (x_(), x_()))

    @cute.kernel
    def bad(x: cute.Tensor):
        frag = cute.make_rmem_tensor((2, 3), cute.Float32)
        x[0] = frag.load().reduce(cute.ReductionOp.ADD, 0.0, reduction_profile=(None, 1, 1))[0]

    with pytest.raises(cute.DSLError, match=r"reduction_profile \(None, 1, 1\) does not match the shape") as err:
        _compile_with_tensors(bad, (x_(),))
    assert "test_dsl_ir.py" in str(err.value)


def test_warp_reductions_and_fmax(filecheck):
    @cute.kernel
    def k(x: cute.Tensor, out: cute.Tensor):
        lane = cute.arch.lane_idx()
        v = x[lane]
        out[0] = cute.arch.warp_reduction_max(v, threads_in_group=8)
        out[1] = cute.arch.warp_reduction_sum(v)
        out[2] = cute.arch.fmin(cute.arch.shuffle_sync_down(v, 1), cute.arch.shuffle_sync_up(v, 2))
        out[3] = cute.arch.warp_reduction(v, cute.ReductionOp.MUL, 2)

    # Groups of 8 lanes: offsets 4, 2, 1 with clamp 0x181f ((32 - 8) << 8 | 31 = 6175).
    filecheck(_compile_with_tensors(k, (x_(), x_())), """
// CHECK: arith.constant 6175 : i32
// CHECK: nvvm.shfl.sync bfly
// CHECK: arith.maxnumf
// CHECK: nvvm.shfl.sync bfly
// CHECK: arith.maxnumf
// CHECK: nvvm.shfl.sync bfly
// CHECK: arith.maxnumf
// CHECK: nvvm.shfl.sync bfly
// CHECK: arith.addf
// CHECK: nvvm.shfl.sync down
// CHECK: nvvm.shfl.sync up
// CHECK: arith.minnumf
// CHECK: nvvm.shfl.sync bfly
// CHECK: arith.mulf
""")


def test_warp_reduction_groups_are_powers_of_two():
    @cute.kernel
    def k(x: cute.Tensor):
        x[0] = cute.arch.warp_reduction_sum(x[0], threads_in_group=12)

    with pytest.raises(cute.DSLError, match="threads_in_group must be a power of two") as err:
        _compile_with_tensors(k, (x_(),))
    assert "test_dsl_ir.py" in str(err.value)


def test_ops_carry_the_users_source_locations():
    @cute.kernel
    def k(x: cute.Tensor):
        x[0] = 1.0  # the store's line

    @cute.jit
    def host(x):
        k(x).launch(grid=1, block=32)

    line = k.fn.__code__.co_firstlineno + 2
    text = host.trace((x_(),), tuple(cute.dsl.jit._arg_key(a, None) for a in (x_(),)), "host")
    store = next(line_ for line_ in text.splitlines() if "llvm.store" in line_)
    assert f'loc("{__file__}":{line}:' in store


def test_print_after_preprocess_and_print_ir(tmp_path):
    script = tmp_path / "show.py"
    script.write_text(
        "import torch, cute_torch as cute\n"
        "@cute.kernel\n"
        "def k(x):\n"
        "    for i in range(4):\n"
        "        x[i] = 1.0\n"
        "@cute.jit\n"
        "def host(x):\n"
        "    k(x).launch(grid=1, block=1)\n"
        "cute.compile(host, torch.zeros(4))\n")
    env = dict(os.environ, CUTE_TORCH_PRINT_AFTER_PREPROCESS="1", CUTE_TORCH_PRINT_IR="1", PYTHONPATH=ROOT)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert "__cute_rt.for_loop(__cute_rt.range(4)" in result.stderr
    assert "scf.for" in result.stderr and f'loc("{script}":5:' in result.stderr


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64,
                                   torch.uint8, torch.bool, torch.float64])
def test_every_tensor_dtype_loads_and_stores(dtype):
    @cute.kernel
    def k(x: cute.Tensor, y: cute.Tensor):
        i = cute.arch.thread_idx()[0]
        y[i] = x[i]

    assert "llvm.load" in _compile_with_tensors(k, (torch.zeros(8, dtype=dtype), torch.zeros(8, dtype=dtype)))


@cute.kernel
def _math_on_tensors(x: cute.Tensor, y: cute.Tensor, out: cute.Tensor):
    v, w = x.load(), y.load()
    out.store(cute.math.fma(v, w, 1.0) + cute.math.max(v, v) + cute.math.max(2.0, w) + cute.math.min(v, 0.5))


def test_fma_and_min_max_over_tensor_ssa_compile():
    """fma lowers in device code (math.fma once had no device lowering); min/max take the same
    TensorSSA twice and a Python scalar first, with one compare per element each."""
    x = x_(8)
    mlir = _compile_with_tensors(_math_on_tensors, (x, x, x))
    assert mlir.count("math.fma") == 8
    assert mlir.count("arith.cmpf") == 3 * 8  # max(v, v), max(2.0, w), min(v, 0.5): nothing spurious
    host = cute.jit(lambda a, b, c: _math_on_tensors(a, b, c).launch(grid=(1, 1, 1), block=(1, 1, 1)),
                    preprocess=False)
    assert "fma.rn.f32" in cute.compile(host, x, x, x).__ptx__


@cute.kernel
def _multiply_add(x: cute.Tensor, y: cute.Tensor, out: cute.Tensor):
    i = cute.arch.thread_idx()[0]
    out[i] = x[i] * y[i] + out[i] - x[i] * 3.0


@pytest.mark.parametrize("fmad", [None, True, False])
def test_a_multiply_and_an_add_fuse_only_with_fmad(fmad):
    """As nvcc's --fmad: with fmad=True (CUTE_TORCH_FMAD=1) a float multiply and the add of its
    result become one fma; by default (off: it cost a LayerNorm backward a third, docs/language.md)
    they keep two roundings, mul.rn and add.rn, which ptxas does not fuse either."""
    x = x_(32)
    host = cute.jit(lambda a, b, c: _multiply_add(a, b, c).launch(grid=(1, 1, 1), block=(32, 1, 1)),
                    preprocess=False)
    options = {} if fmad is None else {"fmad": fmad}
    ptx = cute.compile(host, x, x, x, options={"arch": "sm_90a", **options}).__ptx__
    if not fmad:
        assert "fma" not in ptx and "mul.rn.f32" in ptx and ("add.rn.f32" in ptx or "sub.rn.f32" in ptx)
    else:
        assert ptx.count("fma.rn.f32") == 2 and "mul.rn.f32" not in ptx and "mul.f32" not in ptx


@cute.kernel
def _tanh_both_ways(x: cute.Tensor, out: cute.Tensor):
    v = x.load()
    out.store(cute.math.tanh(v) + cute.math.tanh(v, fastmath=True))


def test_tanh_with_fastmath_is_the_hardware_approximation():
    """tanh(fastmath=True) is tanh.approx.f32 (one MUFU instruction), plain tanh libdevice's."""
    x = x_(4)
    host = cute.jit(lambda a, b: _tanh_both_ways(a, b).launch(grid=(1, 1, 1), block=(1, 1, 1)), preprocess=False)
    ptx = cute.compile(host, x, x).__ptx__
    assert ptx.count("tanh.approx.f32") == 4
    assert "__nv_tanhf" not in ptx and ptx.count("ex2.approx") >= 4   # libdevice's tanhf, inlined
    assert cute.math.tanh(0.5, fastmath=True) == cute.math.tanh(0.5)   # Python numbers fold exactly


@cute.kernel
def _exp2_both_ways(x: cute.Tensor, out: cute.Tensor):
    v = x.load()
    out.store(cute.math.exp2(v) + cute.math.exp2(v, fastmath=True))


def test_exp2_with_fastmath_is_the_hardware_approximation():
    """exp2(fastmath=True) is ex2.approx.ftz.f32; plain exp2 is libdevice's ex2.approx.f32, whose
    subnormal results ptxas scales around the MUFU (about six SASS instructions)."""
    x = x_(4)
    host = cute.jit(lambda a, b: _exp2_both_ways(a, b).launch(grid=(1, 1, 1), block=(1, 1, 1)), preprocess=False)
    ptx = cute.compile(host, x, x).__ptx__
    assert ptx.count("ex2.approx.ftz.f32") == 4
    assert ptx.count("ex2.approx.f32") == 4
    assert cute.math.exp2(-3.0, fastmath=True) == 0.125


def test_printf_ends_with_a_newline_unless_told_otherwise():
    @cute.kernel
    def kernel(x: cute.Tensor):
        cute.printf("a={}", cute.arch.thread_idx()[0])
        cute.printf("b", end="")
        cute.printf("100%%", end="%\n")            # a C format: its own % doubled, end escaped

    @cute.jit
    def host(x: cute.Tensor):
        kernel(x).launch(grid=(1, 1, 1), block=(1, 1, 1))
    mlir = cute.compile(host, torch.zeros(1), options={"arch": "sm_80"}).__mlir__
    assert 'gpu.printf "a=%d\\0A"' in mlir and 'gpu.printf "b"' in mlir and 'gpu.printf "100%%%%\\0A"' in mlir
