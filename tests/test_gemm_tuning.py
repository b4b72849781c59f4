"""gemm(..., tune=True)'s choice (kernels/gemm_tuning.py): CPU tier with a fake timer (the
choice, the default's margin, failures skipped, the disk file shared between processes and
surviving a corrupt one); GPU tier: a tuned call matches matmul and the second call times
nothing."""

import json
import os
import re
import subprocess
import sys

import pytest
import torch

from cute_torch.kernels import gemm_tuning as tuning

needs_sm90a = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
                                 reason="needs an sm_90 GPU")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUTE_TORCH_CACHE_DIR", str(tmp_path))
    tuning._memory.clear()
    yield tmp_path
    tuning._memory.clear()


def test_the_fastest_candidate_is_chosen_once_and_remembered(cache):
    times = {tuning.Candidate(256): 1.0, tuning.Candidate(128): 0.8, tuning.Candidate(128, "pingpong"): 0.9}
    calls = []

    def time_ms(candidate):
        calls.append(candidate)
        if candidate not in times:
            raise RuntimeError("does not compile here")
        return times[candidate]
    assert tuning.choose("k1", time_ms) == tuning.Candidate(128)
    assert len(calls) == len(tuning.CANDIDATES)
    assert tuning.choose("k1", time_ms) == tuning.Candidate(128) and len(calls) == len(tuning.CANDIDATES)
    assert json.loads((cache / "gemm_tuning.json").read_text()) == {"k1": [128, "cooperative", "m", 128]}
    tuning._memory.clear()                         # a new process reads the file
    assert tuning.choose("k1", lambda c: pytest.fail("timed again")) == tuning.Candidate(128)


def test_the_default_stays_unless_another_is_clearly_faster(cache):
    default = tuning.Candidate(256)
    near = {default: 1.0, tuning.Candidate(128): 0.99}
    assert tuning.choose("k2", lambda c: near.get(c, 5.0), (default, tuning.Candidate(128))) == default
    far = {default: 1.0, tuning.Candidate(128): 0.9}
    assert tuning.choose("k3", lambda c: far.get(c, 5.0), (default, tuning.Candidate(128))) == tuning.Candidate(128)


def test_a_corrupt_file_is_ignored_and_rewritten(cache):
    (cache / "gemm_tuning.json").write_text("{not json")
    assert tuning.choose("k4", lambda c: 1.0 if c == tuning.Candidate(128) else 2.0) == tuning.Candidate(128)
    assert "k4" in json.loads((cache / "gemm_tuning.json").read_text())


def test_when_no_candidate_runs_the_last_error_is_raised(cache):
    def broken(candidate):
        raise ValueError(f"no {candidate}")
    with pytest.raises(ValueError, match=re.escape(f"no {tuning.CANDIDATES[-1]}")):
        tuning.choose("k5", broken)


def test_problem_classes_round_sizes_and_tell_layouts_apart():
    a, b = torch.empty(1000, 300).bfloat16(), torch.empty(300, 4000).bfloat16()
    c = torch.empty(1000, 4000).bfloat16()
    key = tuning.problem_key("H100", a, b, (c,), (None,), ())
    assert key.endswith("1024x4096x512") and "|kn|" in key
    assert tuning.problem_key("H100", a, b.t().contiguous().t(), (c,), (None,), ()) != key
    assert tuning.problem_key("H100", a, b, (c,), ("acc + x0",), (torch.empty(4000),)) != key
    assert tuning.problem_key("H100", a, b, (c.t().contiguous().t(),), (None,), ()) == key + "|T"   # M-contiguous


def _tuned_call(cache, m: int, n: int, k: int, seed: int) -> str:
    """A tuned bf16 gemm of fresh operands, checked against float64; the one key it stored."""
    from cute_torch.kernels.gemm_sm90 import gemm
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(m, k, generator=g).bfloat16().cuda(), torch.randn(k, n, generator=g).bfloat16().cuda()
    c = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm(a, b, c, tune=True)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.double(), (a.double() @ b.double()).to(torch.bfloat16).double(), rtol=8e-3,
                               atol=1e-2)
    (key,) = json.loads((cache / "gemm_tuning.json").read_text())
    return key


@pytest.mark.gpu
@needs_sm90a
def test_a_tuned_few_tile_gemm_tunes_its_swapped_problem(cache):
    """3072 x 1024 runs as 1024 x 3072 (gemm_sm90.transposes) with or without `tune`: the tuned
    class is the swapped problem's (M-contiguous output, "|T")."""
    assert _tuned_call(cache, 3072, 1024, 320, seed=62).endswith("1024x4096x512|T")


@pytest.mark.gpu
@needs_sm90a
def test_a_tuned_gemm_matches_matmul_and_times_once(cache):
    _tuned_call(cache, 512, 640, 384, seed=61)
    code = ("import torch, sys; from cute_torch.kernels import gemm_tuning as t; "
            "t.cuda_time_ms = lambda *a: sys.exit('timed again'); from cute_torch.kernels.gemm_sm90 import gemm; "
            "a = torch.randn(512, 384).bfloat16().cuda(); b = torch.randn(384, 640).bfloat16().cuda(); "
            "gemm(a, b, torch.empty(512, 640, dtype=torch.bfloat16, device='cuda'), tune=True)")
    assert subprocess.run([sys.executable, "-c", code], env=dict(os.environ)).returncode == 0
