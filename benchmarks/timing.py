"""Shared by the benchmark scripts: GPU time of a call, as METHOD.md asks (median of CUDA-event
timings after warm-up), host time per call, and a call's time in the power-capped steady state."""

import statistics
import subprocess
import time

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


def kernel_ms(fn, repeats: int, copies: bool = False) -> float:
    """Median over `repeats` calls of the device time of the kernels one call launches (CUPTI,
    through torch.profiler): the GPU's time alone, no host time in it, for comparing kernels
    whose host paths differ (a Python launch path against a C++ one). Memcpy/memset activities
    count only with `copies` (a same-dtype copy_ is a device-to-device memcpy, not a kernel)."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA], acc_events=True) as prof:
        for _ in range(repeats):
            fn()
        torch.cuda.synchronize()
    kernels = sorted((e for e in prof.profiler.kineto_results.events()
                      if e.device_type() == torch.autograd.DeviceType.CUDA
                      and (copies or not e.name().startswith(("Memcpy", "Memset")))),
                     key=lambda e: e.start_ns())
    if not kernels or len(kernels) % repeats:
        raise RuntimeError(f"kernel_ms: {len(kernels)} kernels for {repeats} calls; each call must launch the "
                           "same kernels")
    per_call = len(kernels) // repeats
    return statistics.median(sum(e.duration_ns() for e in kernels[i:i + per_call]) / 1e6
                             for i in range(0, len(kernels), per_call))


def interleaved_ms(fns, repeats: int, rounds: int = 3) -> list:
    """The least of `rounds` kernel_ms medians of each of `fns`, the rounds taken in turn (A B A B
    ..., not A A B B): under load an H200 lowers its clocks, and whichever side was timed after
    the other's burst read up to 13 % slower (8192^3, 2026-11-26)."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            best[i] = min(best[i], kernel_ms(fn, repeats))
    return best


def per_call_us(fn, calls: int, repeats: int, sync=torch.cuda.synchronize) -> float:
    """Median over `repeats` of the wall time of `calls` back-to-back calls and a `sync`, per
    call, in us: the host time of a call where the GPU keeps up."""
    for _ in range(100):
        fn()
    sync()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def steady(fn, seconds: float) -> tuple:
    """Per-call ms (CUDA events over 20 calls, median) of `fn` run back to back for `seconds`, and
    the medians of the SM clock (MHz) and board power (W) that nvidia-smi sampled meanwhile: the
    power-capped steady state a training step runs in, where kernel_ms times bursts that start
    from a cooler card (on an H200 the two put cuBLAS / ours 1-3 % apart, RESULTS.md)."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    smi = subprocess.Popen(["nvidia-smi", "-i", str(torch.cuda.current_device()), "--query-gpu=clocks.sm,power.draw",
                            "--format=csv,noheader,nounits", "-lms", "50"], stdout=subprocess.PIPE, text=True)
    times, end = [], time.time() + seconds
    while time.time() < end:
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 20)
    smi.terminate()
    samples = [line.split(",") for line in smi.communicate()[0].strip().splitlines()[5:]]   # (the ramp left out)
    samples = [(float(c), float(w)) for c, w in samples if c.strip() and w.strip()]
    if not samples:                                   # (a run too short for nvidia-smi's first samples)
        return statistics.median(times), float("nan"), float("nan")
    return (statistics.median(times), statistics.median(c for c, _ in samples),
            statistics.median(w for _, w in samples))


def interleaved_steady(fns, seconds: float, rounds: int = 2) -> list:
    """steady() of each of `fns` for `seconds`, the rounds taken in turn (as interleaved_ms does
    for bursts): each one's fastest (ms, MHz, W)."""
    best = [None] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            run = steady(fn, seconds)
            if best[i] is None or run[0] < best[i][0]:
                best[i] = run
    return best
