"""`cutlass.cute.testing`: `benchmark` and `JitArguments`, as CuTe DSL's.

    t_us = cute.testing.benchmark(compiled, kernel_arguments=cute.testing.JitArguments(a, b, c),
                                  warmup_iterations=5, iterations=100)
"""

from __future__ import annotations

from typing import Callable


class JitArguments:
    """The positional and keyword arguments of the benchmarked call."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


def benchmark(callable_: Callable, *, kernel_arguments: JitArguments | None = None, warmup_iterations: int = 10,
              iterations: int = 100, stream=None) -> float:
    """The mean time of one call in microseconds, timed with CUDA events on `stream` (the
    current stream by default) after `warmup_iterations` calls, as CuTe DSL's benchmark."""
    import torch
    arguments = kernel_arguments or JitArguments()
    if iterations < 1:
        raise ValueError(f"benchmark: iterations must be at least 1, got {iterations}")
    context = torch.cuda.stream(stream) if isinstance(stream, torch.cuda.Stream) else torch.cuda.stream(None)
    with context:
        for _ in range(warmup_iterations):
            callable_(*arguments.args, **arguments.kwargs)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iterations):
            callable_(*arguments.args, **arguments.kwargs)
        end.record()
        end.synchronize()
    return start.elapsed_time(end) * 1e3 / iterations
