"""`gemm(..., tune=True)`: time a handful of kernel variants once per problem class and remember
the fastest, in memory and on disk next to the compiled kernels.

Without `tune`, gemm_sm90.host_arguments' heuristics (choose_tile_n, choose_schedule, short_tile_n,
wide_pingpong, plain_pingpong) pick the variant from the shape alone, and the first
call compiles one kernel (under a second). With it, the first call of a problem class compiles
and times each candidate (a few seconds), and every later call, in this process or another,
reads the choice. A problem class is what the best variant depends on: the device, the dtypes,
the operands' major modes, batching, the number of outputs, whether the epilogue reads inputs,
M, N and K rounded up to powers of two, and whether the outputs have M contiguous (gemm tunes a
problem it swaps, gemm_sm90.transposes, as the swapped one).

The choices live in `<cache dir>/gemm_tuning.json` (CUTE_TORCH_CACHE_DIR; the compiled kernels'
folder). A candidate that fails to compile or run is skipped; if none runs, the error of the
last is raised.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
from typing import Callable, NamedTuple

from cute_torch.env import knobs
from cute_torch.kernels.gemm_common import n_contiguous

_lock = threading.Lock()
_memory: dict = {}


class Candidate(NamedTuple):
    tile_n: int
    schedule: str = "cooperative"
    raster: str = "m"
    tile_m: int = 128


CANDIDATES = (Candidate(256), Candidate(128), Candidate(128, "pingpong"), Candidate(256, raster="n"),
              Candidate(128, "pingpong", "n"), Candidate(128, "pingpong", tile_m=64),
              Candidate(256, "pingpong", tile_m=64))


def _pow2(x: int) -> int:
    return 1 << max(int(x) - 1, 0).bit_length()


def problem_key(device_name: str, a, b, outs: tuple, epilogues: tuple, inputs: tuple) -> str:
    """The problem class of a GEMM (see the module docstring)."""
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    majors = ("k" if a.stride(-1) == 1 else "m") + ("k" if b.stride(-2) == 1 else "n")
    batched = a.dim() == 3 or b.dim() == 3
    dtypes = ",".join(str(t.dtype).removeprefix("torch.") for t in (a, *outs))
    swapped = "" if n_contiguous(outs[0]) else "|T"                       # M-contiguous outputs
    return (f"{device_name}|{dtypes}|{majors}|{'L' if batched else '-'}|{len(epilogues)}|{'x' if inputs else '-'}|"
            f"{_pow2(m)}x{_pow2(n)}x{_pow2(k)}{swapped}")


def _path() -> str:
    return os.path.join(knobs().cache_dir, "gemm_tuning.json")


def _load() -> dict:
    try:
        with open(_path()) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _store(key: str, choice: Candidate) -> None:
    """Adds one choice to the file (read, merge, write to a temporary, rename: concurrent
    tuners lose at most each other's entries, never the file)."""
    path = _path()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = _load()
    data[key] = list(choice)
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(temporary, path)


def remembered(key: str) -> Candidate | None:
    """The choice for `key` made before, in this process or (on disk) another, else None."""
    with _lock:
        if key not in _memory:
            stored = _load().get(key)
            if stored is None:
                return None
            _memory[key] = Candidate(*stored)
        return _memory[key]


def choose(key: str, time_ms: Callable[[Candidate], float], candidates=CANDIDATES,
           margin: float = 0.02) -> Candidate:
    """The remembered choice for `key`, else the fastest candidate by `time_ms` (remembered).
    The first candidate is the default: another must be faster by `margin` to replace it, so
    that timing noise does not flip the choice."""
    known = remembered(key)
    if known is not None:
        return known
    timings, error = {}, None
    for candidate in candidates:
        try:
            timings[candidate] = time_ms(candidate)
        except Exception as e:  # a variant that cannot compile or run here is skipped
            error = e
    if not timings:
        raise error
    best = min(timings, key=timings.get)
    default = candidates[0]
    if default in timings and timings[best] > timings[default] * (1 - margin):
        best = default
    with _lock:
        _memory[key] = best
        _store(key, best)
    return best


def cuda_time_ms(run: Callable[[], None], repeats: int = 10) -> float:
    """Median CUDA-event time of `run` after two warm-up calls (the first compiles)."""
    import torch
    for _ in range(2):
        run()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)
