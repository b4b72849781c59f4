"""Shared by the benchmark scripts: GPU time of a call, as METHOD.md asks (median of CUDA-event
timings after warm-up)."""

import statistics

import torch


def median_ms(fn, repeats: int) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def back_to_back_ms(fn, repeats: int, calls: int = 10) -> float:
    """Per-call time of `calls` calls queued back to back (median over `repeats`): the GPU time
    when the host keeps ahead of it, where median_ms also counts the host time before the launch."""
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
