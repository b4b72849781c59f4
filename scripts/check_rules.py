"""The project's code rules, checked by scripts/test.sh (CI) before the tests:

- no source file over its line cap (1,000 lines of Python, 1,500 of C++), offenders listed;
- ruff: pyflakes (unused imports and variables, undefined and redefined names) and lines over
  120 columns (pyproject.toml's [tool.ruff]);
- clang-format (.clang-format, LLVM style): every C++ file formatted.

    python scripts/check_rules.py          # exit 1 and a list of what breaks a rule
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CAPS = {".py": 1000, ".cpp": 1500, ".h": 1500}
CXX = (".cpp", ".h")


def tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [f for f in out.splitlines() if os.path.splitext(f)[1] in CAPS and os.path.exists(os.path.join(ROOT, f))]


def line_counts(files: list[str]) -> dict[str, int]:
    counts = {}
    for f in files:
        with open(os.path.join(ROOT, f), encoding="utf-8") as handle:
            counts[f] = sum(1 for _ in handle)
    return counts


def line_caps(counts: dict[str, int]) -> list[str]:
    return [f"{f}: {n} lines (cap {CAPS[os.path.splitext(f)[1]]})" for f, n in counts.items()
            if n > CAPS[os.path.splitext(f)[1]]]


def tool(command: list[str]) -> list[str]:
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if run.returncode == 0:
        return []
    return [line for line in (run.stdout + run.stderr).splitlines() if line.strip()][:60]


def main() -> int:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the output, not with a traceback
    files = tracked()
    counts = line_counts(files)
    checks = {
        "line caps": line_caps(counts),
        "ruff": tool([sys.executable, "-m", "ruff", "check", "--quiet", "--output-format", "concise",
                      *[f for f in files if f.endswith(".py")]]),
        "clang-format": tool([shutil.which("clang-format") or "clang-format", "--dry-run", "-Werror",
                              *[f for f in files if f.endswith(CXX)]]),
    }
    failed = False
    for name, problems in checks.items():
        print(f"check_rules: {name}: {'ok' if not problems else f'{len(problems)} problem(s)'}")
        for problem in problems:
            print(f"  {problem}")
        failed |= bool(problems)
    largest = sorted(((n, f) for f, n in counts.items()), reverse=True)[:3]
    print("check_rules: largest files: " + ", ".join(f"{f} ({n})" for n, f in largest))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
