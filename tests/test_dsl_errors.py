"""One test per DSL error class: stable code, the user's file:line, the source line, a suggestion."""

import inspect

import pytest
import torch

import cute_torch as cute
from cute_torch.dsl import diagnostics as codes


def line_of(fn, text: str) -> int:
    """The file line number of the first line of `fn`'s source containing `text`."""
    lines, first = inspect.getsourcelines(getattr(fn, "fn", fn))
    return first + next(i for i, line in enumerate(lines) if text in line)


def compile_kernel(kernel, *args):
    @cute.jit
    def host(x, n):
        kernel(x, n).launch(grid=1, block=32)

    return cute.compile(host, *args)


def check(error: cute.DSLError, code: str, fn, marker: str, suggestion_word: str):
    assert error.code == code
    assert error.file == __file__
    assert error.line == line_of(fn, marker), str(error)
    assert marker.strip() in error.source_line
    assert suggestion_word in error.suggestion
    text = str(error)
    assert f"error[{code}]" in text and f"{__file__}:{error.line}:" in text and "help:" in text


X = torch.zeros(64)


def test_return_inside_dynamic_if():
    @cute.kernel
    def k(x, n: cute.Int32):
        if x[0] > n:  # EXIT
            return
        x[0] = 1.0

    with pytest.raises(cute.DSLError) as e:
        compile_kernel(k, X, 3)
    check(e.value, codes.EARLY_EXIT, k, "# EXIT", "flag")


def test_break_inside_dynamic_for():
    @cute.kernel
    def k(x, n: cute.Int32):
        for i in range(n):  # LOOP
            if i == 3:
                break

    with pytest.raises(cute.DSLError) as e:
        compile_kernel(k, X, 3)
    check(e.value, codes.EARLY_EXIT, k, "# LOOP", "range_constexpr")


def test_loop_else_on_dynamic_loop():
    @cute.kernel
    def k(x, n: cute.Int32):
        for i in range(n):  # LOOP
            x[i] = 1.0
        else:
            x[0] = 2.0

    with pytest.raises(cute.DSLError) as e:
        compile_kernel(k, X, 3)
    check(e.value, codes.LOOP_ELSE, k, "# LOOP", "flag")


def test_variable_defined_inside_dynamic_region_read_after():
    @cute.kernel
    def k(x, n: cute.Int32):
        if n > 2:
            y = x[0]
        x[1] = y  # READ

    with pytest.raises(cute.DSLError) as e:
        compile_kernel(k, X, 3)
    check(e.value, codes.UNDEFINED_AFTER_REGION, k, "# READ", "before")
    assert "'y'" in e.value.message


def test_carried_variable_changing_type():
    @cute.kernel
    def k(x, n: cute.Int32):
        acc = 0
        for i in range(n):
            acc = acc + x[i]  # CHANGE
        x[0] = acc

    with pytest.raises(cute.DSLError) as e:
        compile_kernel(k, X, 3)
    check(e.value, codes.TYPE_CHANGE, k, "# CHANGE", "Float32")


def expect_type_change(kernel, marker: str, suggestion_word: str):
    with pytest.raises(cute.DSLError) as e:
        compile_kernel(kernel, X, 3)
    check(e.value, codes.TYPE_CHANGE, kernel, marker, suggestion_word)


def test_type_change_points_at_the_assignment_not_the_regions_last_line():
    """In a loop whose body goes on after the assignment that changes a carried variable's type
    (for and while), the error names that assignment's line, not the body's last."""
    @cute.kernel
    def k(x, n: cute.Int32):
        total = 0
        count = 0
        for i in range(n):
            total = x[i] * 2.0  # CHANGE
            count = count + 1
        x[0] = total + count

    expect_type_change(k, "# CHANGE", "Float32")

    @cute.kernel
    def loop(x, n: cute.Int32):
        i = cute.Int32(0)
        total = 0
        while i < n:
            total = x[i] * 2.0  # WHILE
            i = i + 1
        x[0] = total

    expect_type_change(loop, "# WHILE", "Float32")


def test_branch_type_mismatch_points_at_the_branch_that_changed_it():
    """A dynamic `if` whose one branch gives a variable another DSL type than it had before (the
    other branch keeping it): the error names that branch's assignment, in a then or an else."""
    @cute.kernel
    def then_side(x, n: cute.Int32):
        v = cute.Int32(0)
        if n > 0:
            v = x[0] * 2.0  # THEN
            n = n + 1
        x[0] = v.to(cute.Float32)

    expect_type_change(then_side, "# THEN", "convert")

    @cute.kernel
    def else_side(x, n: cute.Int32):
        v = cute.Int32(0)
        if n > 0:
            n = n + 1
        else:
            v = x[0] * 2.0  # ELSE
        x[0] = v.to(cute.Float32)

    expect_type_change(else_side, "# ELSE", "convert")


def test_dynamic_value_where_compile_time_needed():
    @cute.kernel
    def k(x, n: cute.Int32):
        for i in cute.range_constexpr(n):  # CONST
            x[i] = 1.0

    with pytest.raises(cute.DSLError) as e:
        compile_kernel(k, X, 3)
    check(e.value, codes.NOT_CONSTEXPR, k, "# CONST", "cute.range")


def test_unsupported_builtin_on_dynamic_value():
    @cute.kernel
    def k(x, n: cute.Int32):
        x[0] = float(n)  # BUILTIN

    with pytest.raises(cute.DSLError) as e:
        compile_kernel(k, X, 3)
    check(e.value, codes.UNSUPPORTED_BUILTIN, k, "# BUILTIN", ".to(cute.Float32)")


def plain_helper(v):
    if v > 0:  # HELPER
        return v
    return -v


def test_undecorated_helper_with_dynamic_control_flow():
    @cute.kernel
    def k(x, n: cute.Int32):
        x[0] = plain_helper(x[1])

    with pytest.raises(cute.DSLError) as e:
        compile_kernel(k, X, 3)
    check(e.value, codes.UNREWRITTEN_CONTROL_FLOW, plain_helper, "# HELPER", "@cute.jit")


def test_python_calls_kernel():
    @cute.kernel
    def k(x, n):
        pass

    with pytest.raises(cute.DSLError) as e:
        k(X, 3)  # CALL
    check(e.value, codes.PYTHON_CALLS_KERNEL, test_python_calls_kernel, "# CALL", "launch")


def test_kernel_calls_kernel():
    @cute.kernel
    def inner(x, n):
        pass

    @cute.kernel
    def k(x, n: cute.Int32):
        inner(x, n)  # NESTED

    with pytest.raises(cute.DSLError) as e:
        compile_kernel(k, X, 3)
    check(e.value, codes.KERNEL_CALLS_KERNEL, k, "# NESTED", "@cute.jit")


def test_cpu_tensor_at_call_time():
    @cute.kernel
    def k(x, n: cute.Int32):
        x[0] = 1.0

    @cute.jit
    def host(x, n):
        k(x, n).launch(grid=1, block=32)

    with pytest.raises(cute.DSLError) as e:
        host(torch.zeros(4), 1)  # RUN
    check(e.value, codes.ARGUMENT_MISMATCH, test_cpu_tensor_at_call_time, "# RUN", "cuda")


def test_wrong_scalar_type_for_annotation():
    @cute.jit
    def host(x, n: cute.Int32):
        pass

    with pytest.raises(cute.DSLError) as e:
        host(X, "three")  # ARG
    assert e.value.code == codes.ARGUMENT_MISMATCH
    assert "Int32" in e.value.message and e.value.line == line_of(test_wrong_scalar_type_for_annotation, "# ARG")


def test_compiled_function_rejects_other_shapes_and_dtypes():
    @cute.kernel
    def k(x, n: cute.Int32):
        x[0] = 1.0

    compiled = compile_kernel(k, X, 3)
    with pytest.raises(cute.DSLError) as e:
        compiled.check_args(torch.zeros(3, 3, dtype=torch.float16), 3)  # CHECK
    assert e.value.code == codes.ARGUMENT_MISMATCH
    assert "Float16 tensor of shape (3, 3)" in e.value.message


def test_unsupported_dtype_lists_the_supported_ones():
    @cute.jit
    def host(x):
        pass

    with pytest.raises(cute.DSLError) as e:
        cute.compile(host, torch.zeros(3, dtype=torch.complex64))
    assert e.value.code == codes.ARGUMENT_MISMATCH and "bfloat16" in e.value.suggestion


def test_device_op_on_host():
    @cute.jit
    def host(x):
        cute.arch.thread_idx()  # HOST

    with pytest.raises(cute.DSLError) as e:
        cute.compile(host, X)
    check(e.value, codes.WRONG_CONTEXT, host, "# HOST", "kernel")


def test_invalid_launch_shape():
    @cute.kernel
    def k(x, n):
        pass

    @cute.jit
    def host(x):
        k(x, 1).launch(grid=1, block=(64, 32, 1))  # LAUNCH

    with pytest.raises(cute.DSLError) as e:
        cute.compile(host, X)
    assert e.value.code == codes.INVALID_LAUNCH and e.value.line == line_of(host, "# LAUNCH")
    assert "1024" in e.value.message


def test_mlir_verifier_error_points_at_the_users_line():
    @cute.kernel
    def k(x, n: cute.Int32):
        if n > 1:
            v = x[0]
            keep.append(v)  # a value escaping its region: MLIR's dominance check rejects it
        x[1] = keep[0]  # USE

    keep = []
    with pytest.raises(cute.DSLError) as e:
        compile_kernel(k, X, 3)
    assert e.value.code == codes.MLIR_ERROR
    assert e.value.line == line_of(k, "# USE") and "used outside it" in e.value.suggestion


def test_python_loop_constant_range_constexpr_is_fine():
    @cute.kernel
    def k(x, n: cute.Constexpr):
        for i in cute.range_constexpr(n):
            if cute.const_expr(i == 2):
                break
            x[i] = 1.0

    @cute.jit
    def host(x, n: cute.Constexpr):
        k(x, n).launch(grid=1, block=32)

    assert cute.compile(host, X, 4).__mlir__.count("llvm.store") == 2


def test_keyword_only_parameters():
    with pytest.raises(cute.DSLError) as e:
        @cute.jit  # DEF
        def host(x, *, scale):
            pass
    check(e.value, codes.ARGUMENT_MISMATCH, test_keyword_only_parameters, "# DEF", "positional")


def test_bad_compile_option_value_names_the_callers_line():
    @cute.jit
    def host(x):
        pass

    with pytest.raises(cute.DSLError) as e:
        cute.compile(host, X, options={"line_info": "yes"})  # OPTION
    check(e.value, codes.ARGUMENT_MISMATCH, test_bad_compile_option_value_names_the_callers_line, "# OPTION",
          "line_info")
    assert "option 'line_info' must be true or false" in e.value.message


@cute.kernel
def _spilling(x: cute.Tensor, out: cute.Tensor):
    # 256 values live across a barrier, in a 1024-thread block (64 registers each): they spill.
    t = cute.arch.thread_idx()[0]
    frag = cute.make_rmem_tensor(cute.make_layout(256), cute.Float32)
    for i in cute.range_constexpr(256):
        frag[i] = x[t * 256 + i]
    cute.arch.sync_threads()
    total = cute.Float32(0.0)
    for i in cute.range_constexpr(256):
        total = total + frag[i] * frag[255 - i]
    out[t] = total


@cute.jit
def _spilling_host(x: cute.Tensor, out: cute.Tensor):
    _spilling(x, out).launch(grid=(1, 1, 1), block=(1024, 1, 1))


def test_a_kernel_that_spills_warns_at_the_jit_functions_line():
    with pytest.warns(cute.SpillWarning, match=r"kernel _spilling_0 spills registers to local memory") as record:
        cute.compile(_spilling_host, torch.zeros(1024 * 256), torch.zeros(1024), options={"arch": "sm_80"})
    assert record[0].filename.endswith("test_dsl_errors.py")


@cute.jit
def _accepting_host(x: cute.Tensor, out: cute.Tensor, accepted: cute.Constexpr):
    _spilling(x, out).launch(grid=(1, 1, 1), block=(1024, 1, 1), accepted_spill_bytes=accepted)


def test_a_launch_accepts_the_spills_its_author_measured(recwarn):
    """launch(accepted_spill_bytes=N): spills up to N bytes raise no SpillWarning; past N they do;
    N must be a compile-time int >= 0 (an error at the launch's line)."""
    x, out = torch.zeros(1024 * 256), torch.zeros(1024)
    compiled = cute.compile(_accepting_host, x, out, 1 << 20, options={"arch": "sm_80"})
    stores = compiled.kernels[0]["spill_stores"]
    assert stores > 0 and not [w for w in recwarn if issubclass(w.category, cute.SpillWarning)]
    with pytest.warns(cute.SpillWarning, match=f"{stores} bytes stored"):
        cute.compile(_accepting_host, x, out, stores - 1, options={"arch": "sm_80"})
    with pytest.raises(cute.DSLError) as e:
        cute.compile(_accepting_host, x, out, -1, options={"arch": "sm_80"})
    assert e.value.code == codes.INVALID_LAUNCH and "accepted_spill_bytes must be a compile-time int >= 0" in \
        e.value.message
