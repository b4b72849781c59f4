"""Compile tier: structures of DSL values (NamedTuples, dataclasses, tuples, layouts with
run-time leaves) as kernel arguments and carried through dynamic loops and branches, and the
launch bounds a launch gives its kernel. The GPU tier runs the same kernels
(test_dsl_kernels.py::test_structures_cross_launches_loops_and_branches)."""

import dataclasses
import re
from typing import NamedTuple

import pytest
import torch

import cute_torch as cute
from cute_torch.dsl.diagnostics import DSLError


class PipelineState(NamedTuple):
    index: cute.Int32
    phase: cute.Int32
    count: cute.Int32


@dataclasses.dataclass(frozen=True)
class Scale:
    factor: cute.Float32
    tiles: int  # compile-time: part of the key


@cute.kernel
def advance_kernel(out: cute.Tensor, start: PipelineState, scale: Scale, stages: cute.Constexpr):
    state = start
    for _ in range(out.shape[0]):  # a dynamic loop carrying the NamedTuple's three fields
        index = state.index + 1
        if index == stages:  # a dynamic if merging two PipelineStates
            state = PipelineState(cute.Int32(0), state.phase ^ 1, state.count + 1)
        else:
            state = PipelineState(index, state.phase, state.count + 1)
    out[0] = cute.Float32(state.index) * scale.factor + scale.tiles
    out[1] = cute.Float32(state.phase)
    out[2] = cute.Float32(state.count)


@cute.jit
def advance(out: cute.Tensor, first: cute.Int32, factor: cute.Float32, tiles: cute.Constexpr, stages: cute.Constexpr):
    # Structures are built in the host function (structured arguments of @cute.jit functions
    # themselves are not supported yet) and cross the launch.
    start = PipelineState(first, cute.Int32(0), cute.Int32(0))
    advance_kernel(out, start, Scale(factor, tiles), stages).launch(grid=(1, 1, 1), block=(32, 1, 1),
                                                                    min_blocks_per_mp=2)


def test_structures_become_parameters_and_loop_carried_values():
    compiled = cute.compile(advance, torch.zeros(8), 1, 2.0, 3, 4)
    mlir = compiled.__mlir__
    kernel = re.search(r"gpu\.func @advance_kernel_0\(([^)]*)\)", mlir).group(1)
    assert kernel.count(": i32") == 3 and kernel.count(": f32") == 1  # the state's 3 fields, the factor
    assert re.search(r"scf\.for .* iter_args\(.*, .*, .*\) -> \(i32, i32, i32\)", mlir)
    assert re.search(r"scf\.if .* -> \(i32, i32, i32\)", mlir)
    assert ".reqntid 32, 1, 1" in compiled.__ptx__ and ".minnctapersm 2" in compiled.__ptx__


def test_static_parts_of_a_structure_are_in_the_key():
    a = cute.compile(advance, torch.zeros(8), 1, 2.0, 3, 4)
    b = cute.compile(advance, torch.zeros(8), 1, 5.0, 3, 4)
    c = cute.compile(advance, torch.zeros(8), 1, 2.0, 7, 4)
    assert a.__ptx__ == b.__ptx__  # the factor is a run-time value
    assert a.__ptx__ != c.__ptx__  # tiles is compile-time


@cute.kernel
def layout_kernel(out: cute.Tensor, layout: cute.Layout):
    i = cute.arch.thread_idx()[0]
    if i < cute.size(layout):
        out[i] = layout(i)


@cute.jit
def pass_layout(out: cute.Tensor, m: cute.Int32):
    layout_kernel(out, cute.make_layout((m, 4), stride=(4, 1))).launch(grid=(1, 1, 1), block=(128, 1, 1))


def test_a_layout_with_run_time_leaves_is_a_kernel_argument():
    mlir = cute.compile(pass_layout, torch.zeros(128, dtype=torch.int32), 8).__mlir__
    assert re.search(r"gpu\.func @layout_kernel_0\(%\w+: !llvm\.ptr<1>, %\w+: i32\)", mlir)


@cute.kernel
def reshape_in_loop(out: cute.Tensor, start: PipelineState):
    state = start
    for _ in range(out.shape[0]):
        state = (state.index, state.phase)  # a different structure
    out[0] = cute.Float32(state[0])


@cute.jit
def bad_loop(out: cute.Tensor, first: cute.Int32):
    reshape_in_loop(out, PipelineState(first, first, first)).launch(grid=(1, 1, 1), block=(1, 1, 1))


def test_changing_a_carried_structure_is_an_error_at_the_users_line():
    with pytest.raises(DSLError) as err:
        cute.compile(bad_loop, torch.zeros(4), 1)
    assert err.value.code == "CUTE-E104"
    assert "'state' (PipelineState) changes its structure" in str(err.value)
    assert "test_dsl_structures.py" in str(err.value)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_min_blocks_per_mp_must_be_a_positive_int(bad):
    @cute.jit
    def host(out: cute.Tensor, first: cute.Int32):
        start = PipelineState(first, first, first)
        advance_kernel(out, start, Scale(cute.Float32(1.0), 1), 4).launch(block=(32, 1, 1), min_blocks_per_mp=bad)

    with pytest.raises(DSLError) as err:
        cute.compile(host, torch.zeros(8), 1)
    assert err.value.code == "CUTE-E113" and "min_blocks_per_mp must be a positive compile-time int" in str(err.value)
