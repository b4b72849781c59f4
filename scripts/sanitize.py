"""The compute-sanitizer tier: memcheck, racecheck, synccheck and initcheck over a small instance of
every kernel family (tests/sanitizer_cases.py), and each tool over its planted bug, which it
must report. One line per tool; exit status 1 if a family has a report or a plant goes unseen.

    python scripts/sanitize.py [--tools memcheck racecheck ...] [--families gemm rows ...]

Each run is a fresh process with the disk cache off (every kernel compiled inside the tool).
initcheck runs over the families too: the kernels read only what they or torch wrote.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")
sys.path[:0] = [TESTS, ROOT]

import sanitizer_cases  # noqa: E402 - after the path

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")


def sanitizer() -> str:
    cuda_home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    found = shutil.which("compute-sanitizer") or os.path.join(cuda_home, "bin", "compute-sanitizer")
    if not os.access(found, os.X_OK):
        raise SystemExit("sanitize: compute-sanitizer is not installed")
    return found


def run(tool: str, call: str) -> tuple[int, int, str]:
    """(exit code, errors reported, report) of `import sanitizer_cases as c; c.<call>()` under `tool`."""
    env = dict(os.environ, CUTE_TORCH_NO_CACHE="1", PYTHONPATH=os.pathsep.join([TESTS, ROOT]))
    result = subprocess.run([sanitizer(), "--tool", tool, "--error-exitcode", "99", sys.executable, "-c",
                             f"import sanitizer_cases as c; c.{call}()"], capture_output=True, text=True, env=env,
                            timeout=600)
    report = result.stdout + result.stderr
    summary = re.search(r"ERROR SUMMARY: (\d+) error", report)
    return result.returncode, int(summary.group(1)) if summary else -1, report


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", nargs="+", default=list(TOOLS), choices=TOOLS)
    parser.add_argument("--families", nargs="+", default=list(sanitizer_cases.FAMILIES),
                        choices=list(sanitizer_cases.FAMILIES))
    args = parser.parse_args()
    failed = False
    for tool in args.tools:
        start = time.time()
        dirty = []
        for family in args.families:
            code, errors, report = run(tool, f"FAMILIES[{family!r}]")
            if code != 0 or errors != 0:
                dirty.append(f"{family} ({errors} errors, exit {code})")
                print(report[-2000:], file=sys.stderr)
        code, errors, report = run(tool, f"PLANTED[{tool!r}]")
        seen = code == 99 and errors > 0
        failed |= bool(dirty) or not seen
        clean = "clean" if not dirty else "REPORTS in " + ", ".join(dirty)
        planted = f"planted bug found ({errors} errors)" if seen else f"PLANTED BUG MISSED (exit {code})"
        print(f"{tool:10} {len(args.families)} families {clean}; {planted}; {time.time() - start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
