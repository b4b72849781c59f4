"""Line info: with `line_info` (CUTE_TORCH_LINE_INFO=1) device code maps to the user's Python
lines: `.loc` in the PTX (compile tier), SASS lines in `nvdisasm -g` (where nvdisasm exists), and
compute-sanitizer names the line of an out-of-bounds write (gpu tier)."""

import os
import re
import subprocess

import pytest
from conftest import run_under_sanitizer

import cute_torch as cute

torch = pytest.importorskip("torch")

HERE = os.path.abspath(__file__)
CUDA_HOME = os.environ.get("CUDA_HOME") or "/usr/local/cuda"


@cute.kernel
def planted_out_of_bounds(a: cute.Tensor, n: cute.Int32):
    i = cute.arch.thread_idx()[0]
    if i < n:
        a[i + n] = a[i] * 3.0  # PLANTED: a has n elements, this writes the n after them


@cute.jit
def launch_planted(a: cute.Tensor, n: cute.Int32):
    planted_out_of_bounds(a, n).launch(grid=(1, 1, 1), block=(32, 1, 1))


PLANTED_LINE = next(number for number, line in enumerate(open(HERE), start=1) if "# PLANTED" in line)


def compile_planted(line_info: bool):
    return cute.compile(launch_planted, torch.empty(32), 32,
                        options={"arch": "sm_90a", "line_info": line_info, "keep": ["ptx"]})


def test_ptx_carries_the_python_lines_only_with_line_info():
    ptx = compile_planted(line_info=True).__ptx__
    files = dict(re.findall(r'^\s*\.file\s+(\d+)\s+"([^"]+)"', ptx, re.MULTILINE))
    this = [number for number, path in files.items() if os.path.abspath(path) == HERE]
    assert this, f"no .file for {HERE} in {files}"
    # Each .loc covers the instructions up to the next one: the planted store is under its line.
    pieces = re.split(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+.*$", ptx, flags=re.MULTILINE)
    under = {(pieces[i], int(pieces[i + 1])): [] for i in range(1, len(pieces), 3)}
    for i in range(1, len(pieces), 3):
        under[pieces[i], int(pieces[i + 1])].append(pieces[i + 2])
    assert any("st.global.f32" in code for code in under.get((this[0], PLANTED_LINE), [])), ptx

    plain = compile_planted(line_info=False).__ptx__
    assert ".loc" not in plain and ".file" not in plain


@pytest.mark.skipif(not os.access(os.path.join(CUDA_HOME, "bin", "nvdisasm"), os.X_OK),
                    reason="nvdisasm is not in this CUDA toolkit")
def test_sass_maps_to_the_python_line(tmp_path):
    cubin = tmp_path / "planted.cubin"
    cubin.write_bytes(compile_planted(line_info=True).__cubin__)
    sass = subprocess.run([os.path.join(CUDA_HOME, "bin", "nvdisasm"), "-g", "-c", str(cubin)],
                          capture_output=True, text=True, check=True).stdout
    assert re.search(rf'File "{re.escape(HERE)}", line {PLANTED_LINE}\b', sass), sass[:2000]


def run_planted():
    """The planted kernel on a 32-element tensor (run under compute-sanitizer by the test)."""
    a = torch.randn(32, device="cuda", generator=torch.Generator(device="cuda").manual_seed(7))
    launch_planted(a, 32)
    torch.cuda.synchronize()


@pytest.mark.gpu
def test_compute_sanitizer_names_the_python_line_of_an_out_of_bounds_write():
    # One cudaMalloc per tensor, so the write past its end is outside any allocation.
    code, report = run_under_sanitizer("memcheck", "import test_line_info as t; t.run_planted()",
                                       CUTE_TORCH_LINE_INFO="1")
    assert code == 99, report[-3000:]
    assert "Invalid __global__ write of size 4 bytes" in report, report[-3000:]
    assert f"{os.path.basename(HERE)}:{PLANTED_LINE}" in report, report[-3000:]
