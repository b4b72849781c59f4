"""Bad input gets an error that names the problem and where it is."""

import pytest

import cute_torch


def test_parse_error_carries_the_mlir_location():
    text = "module {\n  func.func @f() -> i32 {\n    %x = arith.constant 1 : i32\n    return %y : i32\n  }\n}\n"
    with pytest.raises(cute_torch.CompileError) as info:
        cute_torch.compile_mlir(text, source_name="broken.mlir")
    error = info.value
    assert error.kind == "parse"
    assert error.location is not None
    assert (error.location.file, error.location.line) == ("broken.mlir", 4)
    assert "undeclared SSA value name" in error.location.message
    assert "broken.mlir:4:" in str(error)


def test_verifier_error_carries_the_op_location():
    text = (
        "func.func @f(%i: index) -> index {\n"
        '  %l = cute.static_layout : !cute.layout<"(4,8):(8,1)">\n'
        '  %o = cute.crd2idx %l[%i, %i, %i] {coord = "(?,?,?)"} : !cute.layout<"(4,8):(8,1)">, '
        "(index, index, index) -> index\n"
        "  return %o : index\n"
        "}\n"
    )
    with pytest.raises(cute_torch.CompileError) as info:
        cute_torch.compile_mlir(text, source_name="layout.mlir")
    location = info.value.location
    assert (location.file, location.line, location.col) == ("layout.mlir", 3, 8)
    assert "coordinate (?,?,?) does not fit the shape (4,8)" in location.message


def test_lowering_error_reports_the_launch_site():
    text = (
        "module attributes {gpu.container_module} {\n"
        "  gpu.module @m {\n"
        "    gpu.func @k(%x: memref<4xf32>) kernel { gpu.return }\n"
        "  }\n"
        "  func.func @h(%x: memref<4xf32>) {\n"
        "    %c1 = arith.constant 1 : index\n"
        "    gpu.launch_func @m::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<4xf32>)\n"
        "    return\n"
        "  }\n"
        "}\n"
    )
    with pytest.raises(cute_torch.CompileError) as info:
        cute_torch.compile_mlir(text, source_name="memref.mlir")
    assert info.value.kind == "pass"
    assert info.value.location.line == 7
    assert "cannot cross the launch boundary" in info.value.location.message


def test_missing_toolkit_names_cuda_home(vector_add_mlir, monkeypatch):
    monkeypatch.setenv("CUDA_HOME", "/nonexistent/cuda")
    with pytest.raises(cute_torch.ToolkitError) as info:
        cute_torch.compile_mlir(vector_add_mlir, cubin_backend="ptxas")
    assert "CUDA_HOME" in info.value.message and "/nonexistent/cuda/bin/ptxas" in info.value.message


def test_missing_libdevice_names_cuda_home(monkeypatch):
    from conftest import read_mlir

    monkeypatch.setenv("CUDA_HOME", "/nonexistent/cuda")
    with pytest.raises(cute_torch.ToolkitError, match="libdevice.*CUDA_HOME"):
        cute_torch.compile_mlir(read_mlir("math_exp.mlir"))


def test_bad_options_are_named(vector_add_mlir):
    with pytest.raises(cute_torch.CompileError, match="unknown cubin_backend 'gcc'"):
        cute_torch.compile_mlir(vector_add_mlir, cubin_backend="gcc")
    with pytest.raises(cute_torch.CompileError, match="opt_level must be 0..3"):
        cute_torch.compile_mlir(vector_add_mlir, opt_level=7)
    with pytest.raises(cute_torch.CompileError, match="opt_level must be 0..3"):
        cute_torch.compile_mlir(vector_add_mlir, opt_level="fast")  # was silently ignored
    with pytest.raises(cute_torch.CompileError, match="option 'line_info' must be true or false"):
        cute_torch.compile_mlir(vector_add_mlir, line_info="yes")
    with pytest.raises(cute_torch.CompileError, match="option 'fmad' must be true or false"):
        cute_torch.compile_mlir(vector_add_mlir, fmad=1)
