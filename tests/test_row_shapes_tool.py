"""benchmarks/row_shapes.py, the A/B tool for the row kernels' CTA shapes: its shape names and its
compile-only mode (no GPU)."""

import os
import sys

import pytest
import torch

from cute_torch.kernels import norm_shapes
from cute_torch.kernels.row_reduce import RowConfig

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
sys.path.insert(0, BENCHMARKS)          # only while importing: its module names (backend, gemm) are generic
try:
    import row_shapes
finally:
    sys.path.remove(BENCHMARKS)


def test_shape_names_spell_cluster_threads_rows_vector_walk_and_bound():
    assert row_shapes.parse_shape("lib") is None
    shape = row_shapes.parse_shape("c4t128v4")
    assert shape == row_shapes.Shape(4, 128, 128, 4) and shape.config(10240) == RowConfig(10240, 4, 128, 128, 4)
    assert row_shapes.parse_shape("c1t128r32v8w4b3") == row_shapes.Shape(1, 128, 32, 8, 4, 3)
    for bad in ("c4t128", "x", "c1t96r64v8", "c4t128v4 "):
        with pytest.raises(ValueError, match="shape"):
            row_shapes.parse_shape(bad)


def test_the_compile_only_mode_builds_the_library_shape_and_a_named_one():
    """--cpu: `lib` is the library's shape (LayerNorm's bf16 backward at 10240 off fast memory:
    clusters of 4 in 16-byte vectors), a named shape is compiled as named; walks and bounds are
    refused where the shape function does not return them."""
    case = row_shapes.Case("layer_norm", "bwd", torch.bfloat16, 10240, "wb", False, "cpu")
    lib, named = case.compiled(None), case.compiled(row_shapes.parse_shape("c8t128v4"))
    x, w = case.x, case.w
    assert norm_shapes.backward_config(10240, (x, w, x, x), True).cluster == 4
    assert lib[0]["block_dims"][0] == 128 and named[0]["block_dims"][0] == 128
    assert lib[0]["registers"] != named[0]["registers"]       # 16-byte vectors x 3 against 8-byte x 3 over 8
    with pytest.raises(ValueError, match="walk and bound"):
        case.compiled(row_shapes.parse_shape("c4t128v4b2"))
    forward = row_shapes.Case("rms_norm", "fwd", torch.bfloat16, 4096, "w", True, "cpu")
    assert all(k["spill_stores"] == 0 for k in forward.compiled(row_shapes.parse_shape("c1t128v8b3")))
    with pytest.raises(ValueError, match="no bias"):
        row_shapes.Case("rms_norm", "fwd", torch.bfloat16, 4096, "wb", False, "cpu")


def test_w0_names_quacks_shape_and_b_its_bound():
    """`w0`: the norm forward in quack's shape (norm_shapes.DIRECT), three CTAs per SM unless `b`
    says otherwise: LayerNorm's padded rows with a weight at 100000 columns spill in 80 registers
    and fit two CTAs' 128 without spilling."""
    case = row_shapes.Case("layer_norm", "fwd", torch.bfloat16, 100000, "w", False, "cpu")
    three, two = (case.compiled(row_shapes.parse_shape(name))[0] for name in ("c8t256v8w0", "c8t256v8w0b2"))
    assert row_shapes.parse_shape("c8t256v8w0b2") == row_shapes.Shape(8, 256, 256, 8, norm_shapes.DIRECT, 2)
    assert three["registers"] <= 80 < two["registers"] <= 128 and two["spill_stores"] == 0
    assert three["cluster_dims"] == two["cluster_dims"] == [8, 1, 1]


def test_softmax_shapes_walk_as_the_library_says_and_w0_names_the_direct_forward():
    """softmax's and log_softmax's shapes: a named backward walks where softmax.backward_walk says
    (off fast memory: never without --fast-memory), `w0` names the forward's direct kernel and a
    backward refuses it; cross-entropy's `w0` too."""
    case = row_shapes.Case("softmax", "bwd", torch.bfloat16, 100000, "wb", False, "cpu")
    kernels = case.compiled(row_shapes.parse_shape("c16t256v8"))
    assert kernels[0]["block_dims"][0] == 256 and kernels[0]["cluster_dims"] == [16, 1, 1]
    assert case.softmax_walk(row_shapes.parse_shape("c8t512v8"), RowConfig(100000, 8, 512, 512, 8), True)
    with pytest.raises(ValueError, match="w0"):
        case.compiled(row_shapes.parse_shape("c8t256v8w0"))
    forward = row_shapes.Case("log_softmax", "fwd", torch.bfloat16, 100000, "wb", False, "cpu")
    direct = forward.compiled(row_shapes.parse_shape("c8t256v8w0"))
    assert direct[0]["block_dims"][0] == 256 and direct[0]["cluster_dims"] == [8, 1, 1]
    # cross-entropy's w0: its one row per cluster (the library's at 100000), here over 16 CTAs
    logits = row_shapes.Case("cross_entropy", "fwd", torch.bfloat16, 100000, "wb", False, "cpu")
    wide = logits.compiled(row_shapes.parse_shape("c16t256v8w0"))
    assert wide[0]["cluster_dims"] == [16, 1, 1] and logits.compiled(None)[0]["cluster_dims"] == [8, 1, 1]
    with pytest.raises(ValueError, match="w0"):
        logits.compiled(row_shapes.parse_shape("c8t256v8w2"))


def test_the_compile_only_mode_names_a_refused_shape_and_goes_on(monkeypatch, capsys):
    """--cpu: a shape the kernel refuses (7 CTAs of 8 warps in the one-phase exchange) prints its
    error on its line, and the next shape still compiles."""
    monkeypatch.setattr(sys, "argv", ["row_shapes.py", "softmax", "fwd", "--ns", "100000", "--shapes", "c7t256v8w0",
                                      "c8t256v8w0", "--cpu"])
    row_shapes.main()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("softmax fwd bfloat16 100000 c7t256v8w0 error: the one-phase exchange folds a power")
    assert lines[1].startswith("softmax fwd bfloat16 100000 c8t256v8w0: ") and "bytes spilled" in lines[1]
