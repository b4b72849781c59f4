"""The seed's "Understanding Stages" example: `print` runs while the function is traced, so
dynamic values print as `?` and compile-time ones print their value.

    python examples/stages.py
    [add_dynamicexpr] result = ?
    [add_constexpr] result = 7.0
    [add_hybrid] result = ?
"""

import os

# `print` runs while tracing; a disk-cache hit skips tracing (and so the prints). This example
# is about tracing, so it asks for a fresh trace every run.
os.environ.setdefault("CUTE_TORCH_NO_CACHE", "1")

import cute_torch as cute  # noqa: E402


@cute.jit
def add_dynamicexpr(b: cute.Float32):
    a = cute.Float32(2.0)
    result = a + b
    print("[add_dynamicexpr] result =", result)


@cute.jit
def add_constexpr(b: cute.Constexpr):
    a = 2.0
    result = a + b
    print("[add_constexpr] result =", result)


@cute.jit
def add_hybrid(b: cute.Constexpr):
    a = cute.Float32(2.0)
    result = a + b
    print("[add_hybrid] result =", result)


if __name__ == "__main__":
    b = 5.0
    # cute.compile traces and compiles without running (no GPU needed); calling the functions
    # directly does the same and then runs them.
    run = cute.compile if not cute.gpu_available() else (lambda f, *args: f(*args))
    run(add_dynamicexpr, b)
    run(add_constexpr, b)
    run(add_hybrid, b)
