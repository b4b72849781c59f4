"""cute.pipeline: PipelineState carried through dynamic loops and ifs while advance() changes it
in place (the preprocessor carries locals changed in place), and PipelineTmaAsync in the
warp-specialized Hopper GEMM example. Compile tier: the states become iter_args, errors;
GPU tier: the states against a Python model, the example against float64, compute-sanitizer."""

import re

import pytest
import torch

import cute_torch as cute
from conftest import check_bf16_gemm, run_under_sanitizer

pipeline = cute.pipeline
needs_sm90a = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
                                 reason="needs an sm_90 GPU")


@cute.kernel
def _walk_states(out: cute.Tensor, steps: cute.Int32, stages: cute.Constexpr):
    producer = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, stages)
    consumer = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, stages)
    for k in range(steps):
        producer.advance()
        if k % 3 == 0:              # advanced in one branch only: the other keeps its own copy
            consumer.advance()
    out[0] = producer.index
    out[1] = producer.phase
    out[2] = producer.count
    out[3] = consumer.index
    out[4] = consumer.phase
    out[5] = consumer.count
    jumper = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, stages)
    jumper.advance_by(steps * 2 + 1)   # a run-time jump, as a ping-pong consumer skips the other's tiles
    out[6] = jumper.index
    out[7] = jumper.phase
    out[8] = jumper.count


@cute.jit
def _walk_host(out: cute.Tensor, steps: cute.Int32, stages: cute.Constexpr):
    _walk_states(out, steps, stages).launch(grid=(1, 1, 1), block=(1, 1, 1))


def _model(steps, stages):
    def walk(n, phase):
        return [n % stages, phase ^ ((n // stages) % 2), n]
    return walk(steps, 1) + walk(len(range(0, steps, 3)), 0) + walk(2 * steps + 1, 0)


def test_states_changed_in_place_become_loop_carried_values():
    text = cute.compile(_walk_host, torch.zeros(9, dtype=torch.int32), 5, 4, options={"arch": "sm_80"}).__mlir__
    loop = re.search(r"scf\.for .* iter_args\((.*)\) -> \((.*)\)", text)
    assert loop and loop.group(2).count("i32") == 6     # two states of (count, index, phase)
    assert "scf.if" in text


@pytest.mark.gpu
@pytest.mark.parametrize("steps,stages", [(0, 4), (1, 4), (7, 4), (13, 3), (40, 5)])
def test_states_match_a_python_model(steps, stages):
    out = torch.full((9,), -1, dtype=torch.int32, device="cuda")
    _walk_host(out, steps, stages)
    torch.cuda.synchronize()
    assert out.tolist() == _model(steps, stages)


def test_pipeline_misuse_is_an_error_at_the_users_line():
    @cute.kernel
    def bad(out: cute.Tensor):
        pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, 0)

    @cute.jit
    def host(out: cute.Tensor):
        bad(out).launch(grid=(1, 1, 1), block=(1, 1, 1))

    with pytest.raises(cute.DSLError) as err:
        cute.compile(host, torch.zeros(1), options={"arch": "sm_90a"})
    assert "stages >= 1" in str(err.value) and "test_pipeline.py" in str(err.value)


def test_warp_specialized_gemm_compiles_with_register_reallocation(load_example):
    example = load_example("gemm_sm90_ws")
    a, b = torch.randn(256, 448).bfloat16(), torch.randn(512, 448).bfloat16()
    ptx = cute.compile(example.gemm, a, b, torch.empty(256, 512).bfloat16(), options={"arch": "sm_90a"}).__ptx__
    assert "setmaxnreg.dec.sync.aligned.u32 40" in ptx and "setmaxnreg.inc.sync.aligned.u32 232" in ptx
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16") == 4
    assert ".reqntid 384, 1, 1" in ptx


def run_ws_gemm():
    import pathlib
    import runpy
    g = runpy.run_path(str(pathlib.Path(__file__).resolve().parents[1] / "examples" / "gemm_sm90_ws.py"))
    return g


@pytest.mark.gpu
@needs_sm90a
def test_warp_specialized_gemm_matches_matmul():
    check_bf16_gemm(run_ws_gemm()["gemm"], 384, 512, 704, seed=11)     # 11 k-tiles over 4 stages


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
def test_warp_specialized_gemm_is_clean_under_compute_sanitizer(tool):
    code, report = run_under_sanitizer(tool, "import test_pipeline as t; assert t.run_ws_gemm()['check']() < 1e-2")
    assert code == 0 and re.search(r"\b0 errors\b", report), report[-3000:]


@cute.kernel
def _scalar_methods(out: cute.Tensor, steps: cute.Int32):
    width = 12                       # a Python int whose method the loop calls: it stays a Python int
    for k in range(steps):
        out[k] = cute.Int32(width.bit_length())
    out[steps] = cute.Int32(width + 1)


@cute.jit
def _scalar_methods_host(out: cute.Tensor, steps: cute.Int32):
    _scalar_methods(out, steps).launch(grid=(1, 1, 1), block=(1, 1, 1))


def test_a_python_scalar_whose_method_a_loop_calls_is_not_carried():
    text = cute.compile(_scalar_methods_host, torch.zeros(8, dtype=torch.int32), 3, options={"arch": "sm_80"}).__mlir__
    assert "iter_args" not in text


# -- PipelineAsync: warp 0 produces into a 3-stage ring, warp 1 consumes ---------------------------

RING = 3


@cute.kernel
def _async_ring(out: cute.Tensor, rounds: cute.Int32):
    smem = cute.SmemAllocator()
    slots = smem.allocate_tensor(cute.Int32, cute.make_layout((32, RING)), 16)
    bars = smem.allocate_tensor(cute.Int64, cute.make_layout(2 * RING), 8)
    pipe = pipeline.PipelineAsync.create(num_stages=RING,
                                         producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32),
                                         consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32),
                                         barrier_storage=bars.iterator)
    tid = cute.arch.thread_idx()[0]
    lane = tid % 32
    if tid < 32:
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, RING)
        for r in range(rounds):
            pipe.producer_acquire(state)
            slots[lane, state.index] = r * 100 + lane
            pipe.producer_commit(state)
            state.advance()
    else:
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, RING)
        total = cute.Int32(0)
        for r in range(rounds):
            pipe.consumer_wait(state)
            total = total + slots[lane, state.index]
            pipe.consumer_release(state)
            state.advance()
        out[lane] = total


@cute.jit
def _async_ring_host(out: cute.Tensor, rounds: cute.Int32):
    _async_ring(out, rounds).launch(grid=(1, 1, 1), block=(64, 1, 1))


def test_async_pipeline_reaches_ptx():
    ptx = cute.compile(_async_ring_host, torch.zeros(32, dtype=torch.int32), 5, options={"arch": "sm_90a"}).__ptx__
    assert "mbarrier.arrive.shared.b64" in ptx and "mbarrier.try_wait.parity" in ptx


@pytest.mark.gpu
@needs_sm90a
@pytest.mark.parametrize("rounds", [1, 3, 10])
def test_async_pipeline_hands_every_round_over(rounds):
    out = torch.full((32,), -1, dtype=torch.int32, device="cuda")
    _async_ring_host(out, rounds)
    torch.cuda.synchronize()
    want = torch.arange(32) * rounds + 100 * sum(range(rounds))
    assert torch.equal(out.cpu(), want.to(torch.int32))


def test_tma_store_pipeline_waits_for_the_oldest_buffer():
    @cute.kernel
    def store_ring(out: cute.Tensor):
        ring = pipeline.PipelineTmaStore.create(num_stages=2)
        ring.producer_acquire()
        ring.producer_commit()
        ring.producer_tail()

    @cute.jit
    def host(out: cute.Tensor):
        store_ring(out).launch(grid=(1, 1, 1), block=(32, 1, 1))

    ptx = cute.compile(host, torch.zeros(1), options={"arch": "sm_90a"}).__ptx__
    assert "cp.async.bulk.wait_group.read 1" in ptx and "cp.async.bulk.wait_group.read 0" in ptx
    assert "cp.async.bulk.commit_group" in ptx


@cute.kernel
def _cluster_pipeline(out: cute.Tensor):
    bars = cute.arch.alloc_smem(cute.Int64, (4,))
    pipe = pipeline.PipelineTmaAsync.create(
        num_stages=2, producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 128), tx_count=1024,
        barrier_storage=bars.iterator, cta_layout_vmnk=cute.make_layout((1, 2, 2, 1)))
    state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, 2)
    pipe.consumer_release(state)


@cute.jit
def _cluster_pipeline_host(out: cute.Tensor):
    _cluster_pipeline(out).launch(grid=(2, 2, 1), block=(128, 1, 1), cluster=(2, 2, 1))


def test_a_cluster_pipeline_releases_stages_in_its_row_and_column():
    ptx = cute.compile(_cluster_pipeline_host, torch.zeros(1), options={"arch": "sm_90a"}).__ptx__
    # In a 2x2 cluster a stage is filled by 3 CTAs: released here and in the 2 peers.
    assert ptx.count("mapa.shared::cluster.u32") == 2
    assert ptx.count("mbarrier.arrive.shared::cluster.b64") == 2
    assert "mov.b32 \t%r3, 384;" in ptx or ", 384;" in ptx      # empty: 128 consumers x 3 CTAs
    assert "barrier.cluster.wait" in ptx


def test_a_remote_arrive_below_sm90_is_an_error_at_the_users_line():
    with pytest.raises(cute.DSLError) as err:
        cute.compile(_cluster_pipeline_host, torch.zeros(1), options={"arch": "sm_80"})
    assert "sm_90" in str(err.value) and "test_pipeline.py" in str(err.value)
