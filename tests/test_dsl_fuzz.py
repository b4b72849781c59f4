"""Differential fuzzing of the DSL (issue 19; programs from tests/dsl_fuzz.py). CPU tier: random
valid programs must compile through ptxas, or fail with a DSLError that carries a code and a
line of the generated file; never an internal error or a crash. GPU tier: integer-only programs
run on the GPU and must equal the same source run as Python per thread (dsl_fuzz.reference),
element by element. A fixed corpus of seeds runs every time; `CUTE_TORCH_FUZZ_SEEDS=N` adds N
fresh ones."""

import importlib.util
import os
import random
import sys

import pytest
import torch

import cute_torch as cute
from cute_torch.dsl.diagnostics import DSLError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dsl_fuzz import Program, reference  # noqa: E402

CORPUS = list(range(60))
FRESH = [random.randrange(1 << 30) for _ in range(int(os.environ.get("CUTE_TORCH_FUZZ_SEEDS", "0")))]


def load(seed: int, folder, floats: bool = True):
    path = folder / f"fuzz_{seed}.py"
    path.write_text(Program(seed, floats=floats).source())
    spec = importlib.util.spec_from_file_location(f"fuzz_{seed}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


@pytest.mark.parametrize("seed", CORPUS + FRESH)
def test_a_random_program_compiles_or_fails_cleanly(seed, tmp_path):
    module, path = load(seed, tmp_path)
    args = (torch.zeros(32), torch.randn(32), 5)
    try:
        ptx = cute.compile(module.fuzz_host, *args, options={"arch": "sm_80"}).__ptx__
    except DSLError as e:
        assert e.code.startswith("CUTE-E") and e.file == str(path), f"seed {seed}: {e}"
        return
    assert ".entry fuzz_kernel" in ptx, f"seed {seed}"


def test_the_reference_runs_integer_programs():
    for seed in CORPUS[:20]:
        out = reference(Program(seed, floats=False).source(), 5)
        assert len(out) == 32 and all(isinstance(v, float) for v in out), seed


@pytest.mark.gpu
@pytest.mark.parametrize("seed", CORPUS[:40] + FRESH)
def test_integer_programs_match_python_on_the_gpu(seed, tmp_path):
    module, path = load(seed, tmp_path, floats=False)
    out = torch.full((32,), float("nan"), device="cuda")
    module.fuzz_host(out, torch.zeros(32, device="cuda"), 5)
    torch.cuda.synchronize()
    want = reference(path.read_text(), 5)
    assert out.cpu().tolist() == want, f"seed {seed}: {path.read_text()}"
