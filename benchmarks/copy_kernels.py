"""Copy-bound DSL kernels against torch's copy bandwidth, in the same run.

    python benchmarks/copy_kernels.py [--rows 8192 --cols 8192 --repeats 50]

Bytes moved: add reads two tensors and writes one (3 x size); transpose and copy read one and
write one (2 x size). Each row is the median over `repeats` CUDA-event timings of one call after
warm-up; GB/s = bytes / time; "vs copy" divides by torch's own copy (dst.copy_(src)) bandwidth
measured here, the ceiling a copy-bound kernel can reach. Competitors: torch eager (a + b into
out; out.copy_(src.t())), and torch.compile for the add.
"""

import argparse

import torch
from timing import median_ms

from cute_torch.kernels import elementwise_add, transpose


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--cols", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    shape = (args.rows, args.cols)
    print(f"{torch.cuda.get_device_name()}, shape {shape}, median of {args.repeats}")
    print(f"{'kernel':34} {'dtype':9} {'ms':>8} {'GB/s':>8} {'vs copy':>8}")
    compiled_add = torch.compile(lambda x, y: x + y)
    for dtype in (torch.float32, torch.bfloat16):
        a = torch.randn(shape, device="cuda").to(dtype)
        b = torch.randn(shape, device="cuda").to(dtype)
        out = torch.empty_like(a)
        out_t = torch.empty((shape[1], shape[0]), device="cuda", dtype=dtype)
        nbytes = a.numel() * a.element_size()
        copy_ms = median_ms(lambda: out.copy_(a), args.repeats)
        copy_gbs = 2 * nbytes / copy_ms / 1e6
        rows = [
            ("torch copy (ceiling)", copy_ms, 2),
            ("cute elementwise_add", median_ms(lambda: elementwise_add(a, b, out), args.repeats), 3),
            ("torch add (eager)", median_ms(lambda: torch.add(a, b, out=out), args.repeats), 3),
            ("torch.compile add", median_ms(lambda: compiled_add(a, b), args.repeats), 3),
            ("cute transpose (swizzled smem)", median_ms(lambda: transpose(a, out_t), args.repeats), 2),
            ("torch transpose copy", median_ms(lambda: out_t.copy_(a.t()), args.repeats), 2),
        ]
        for name, ms, factor in rows:
            gbs = factor * nbytes / ms / 1e6
            print(f"{name:34} {str(dtype).replace('torch.', ''):9} {ms:8.3f} {gbs:8.0f} {gbs / copy_gbs:8.2f}")
    # Correctness of what was timed, every element.
    torch.testing.assert_close(elementwise_add(a, b), (a.double() + b.double()).to(a.dtype), rtol=0, atol=0)
    assert torch.equal(transpose(a), a.t().contiguous())


if __name__ == "__main__":
    main()
