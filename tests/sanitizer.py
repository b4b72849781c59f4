"""Runs a Python snippet under one compute-sanitizer tool: the one runner behind the sanitizer tests
and scripts/sanitize.py. No pytest here, so the script can import it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")
ERROR_EXIT = 99


def find() -> str | None:
    """compute-sanitizer's path, or None where the CUDA toolkit is not installed."""
    cuda_home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    found = shutil.which("compute-sanitizer") or os.path.join(cuda_home, "bin", "compute-sanitizer")
    return found if os.access(found, os.X_OK) else None


def errors_reported(report: str) -> int:
    """The error count of the report's summary; -1 when it has none (the tool did not finish).
    memcheck, synccheck and initcheck end with "ERROR SUMMARY: N errors", racecheck with
    "RACECHECK SUMMARY: H hazard(s) displayed (N errors, W warnings)"."""
    summary = re.search(r"(?:ERROR SUMMARY: |hazards? displayed \()(\d+) error", report)
    return int(summary.group(1)) if summary else -1


def run(sanitizer: str, tool: str, script: str, timeout: float = 600, **env) -> tuple[int, int, str]:
    """(exit code, errors reported, report) of `python -c script` under `tool`, with tests/ and the
    repository on the path; the exit code is ERROR_EXIT when the tool found errors."""
    # The disk cache off: every kernel is compiled inside the tool. Without torch's caching
    # allocator every tensor is its own cudaMalloc, so memcheck sees an overrun of a few elements
    # instead of a write into the pool's slack.
    env = {**os.environ, "CUTE_TORCH_NO_CACHE": "1", "PYTORCH_NO_CUDA_MEMORY_CACHING": "1",
           "PYTHONPATH": os.pathsep.join([TESTS, ROOT]), **env}
    result = subprocess.run([sanitizer, "--tool", tool, "--error-exitcode", str(ERROR_EXIT), sys.executable, "-c",
                             script], capture_output=True, text=True, env=env, timeout=timeout)
    report = result.stdout + result.stderr
    return result.returncode, errors_reported(report), report
