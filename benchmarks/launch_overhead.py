"""Host time per call on 1024 fp32 elements (c = a + b), in one process:

  torch.add               torch's own launch path
  triton                  a @triton.jit kernel (if triton is installed)
  cute.jit (memory hit)   a @cute.jit call: key from the arguments, in-memory cache, host entry
                          (keyed and launched in C++ from the second call: dsl/dispatch.py)
  cute.compile handle     the handle cute.compile returns: its first call's argument types, in C++

    python benchmarks/launch_overhead.py [--calls 20000] [--repeats 7] [--host-only]

Each row is the median over `repeats` of (wall time of `calls` back-to-back calls) / calls,
synchronized before and after. Targets: memory hit <= 1.2x torch.add (issue 19), handle <=
torch.add. `--host-only` (no GPU needed) times the Python path of a cute.jit call before its
launch, on CPU tensors with the launch stubbed out: the key and the memory-cache lookup; and the
C++ dispatch's key and lookup of the same arguments.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

import cute_torch as cute  # noqa: E402
from timing import per_call_us  # noqa: E402


@cute.kernel
def add_kernel(a, b, c):
    i = cute.arch.block_idx()[0] * 256 + cute.arch.thread_idx()[0]
    if i < cute.size(c):
        c[i] = a[i] + b[i]


@cute.jit
def add(a, b, c):
    add_kernel(a, b, c).launch(grid=((cute.size(c) + 255) // 256, 1, 1), block=(256, 1, 1))


def host_only(args) -> None:
    from cute_torch.dsl import jit as jit_module
    jit_module.Specialization.run = lambda self, call_args: None    # the launch, stubbed out
    a, b, c = (torch.zeros(1024) for _ in range(3))
    us = per_call_us(lambda: add(a, b, c), args.calls, args.repeats, sync=lambda: None)
    base = per_call_us(lambda: torch.add(a, b, out=c), args.calls, args.repeats, sync=lambda: None)
    print(f"host only (CPU tensors, launch stubbed), median of {args.repeats} x {args.calls} calls: cute.jit key + "
          f"memory-cache lookup {us:.2f} us (Python path); torch.add on CPU (the whole add) {base:.2f} us")
    from cute_torch.dsl import dispatch
    fast = dispatch.make(lambda key: None)
    if fast is not None:  # a CPU specialization is never registered: this times its key and a miss
        miss = per_call_us(lambda: fast.call((a, b, c)), args.calls, args.repeats, sync=lambda: None)
        print(f"C++ dispatch key + lookup of the same three tensors (what a hit adds to its launch): {miss:.2f} us")


def triton_add():
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def kernel(a, b, c, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(c + offsets, tl.load(a + offsets, mask=mask) + tl.load(b + offsets, mask=mask), mask=mask)

    def run(a, b, c):
        kernel[(triton.cdiv(c.numel(), 256),)](a, b, c, c.numel(), BLOCK=256)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--host-only", action="store_true")
    args = parser.parse_args()
    if args.host_only:
        host_only(args)
        return
    a, b = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda")
    c = torch.empty_like(a)
    handle = cute.compile(add, a, b, c)
    rows = [("torch.add", lambda: torch.add(a, b, out=c))]
    triton_run = triton_add()
    if triton_run is not None:
        rows.append(("triton", lambda: triton_run(a, b, c)))
    rows += [("cute.jit (memory hit)", lambda: add(a, b, c)), ("cute.compile handle", lambda: handle(a, b, c))]
    results = {name: per_call_us(fn, args.calls, args.repeats) for name, fn in rows}
    add(a, b, c)
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)
    base = results["torch.add"]
    print(f"host time per call, 1024 fp32 elements, {torch.cuda.get_device_name()}, median of {args.repeats} x "
          f"{args.calls} calls")
    print(f"| {'path':<22} | {'us/call':>8} | {'vs torch.add':>12} |")
    print(f"|{'-' * 24}|{'-' * 10}|{'-' * 14}|")
    for name, us in results.items():
        print(f"| {name:<22} | {us:8.2f} | {us / base:11.2f}x |")


if __name__ == "__main__":
    main()
