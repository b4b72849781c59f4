"""Shared by the benchmark scripts: GPU time of a call, as METHOD.md asks (median of CUDA-event
timings after warm-up)."""

import statistics

import torch


def median_ms(fn, repeats: int, calls: int = 1) -> float:
    """Median over `repeats` of the time of `calls` back-to-back calls, per call. With calls=1 on
    an idle GPU this counts the host time before the launch; with several queued calls the
    host keeps ahead and what is left is the GPU time."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / calls)
    return statistics.median(samples)
