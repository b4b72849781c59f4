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
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "tests"), ROOT]

import sanitizer  # noqa: E402 - after the path
import sanitizer_cases  # noqa: E402

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", nargs="+", default=list(TOOLS), choices=TOOLS)
    parser.add_argument("--families", nargs="+", default=list(sanitizer_cases.FAMILIES),
                        choices=list(sanitizer_cases.FAMILIES))
    args = parser.parse_args()
    failed = False
    found = sanitizer.find()
    if found is None:
        raise SystemExit("sanitize: compute-sanitizer is not installed")
    for tool in args.tools:
        start = time.time()
        dirty = []
        for family in args.families:
            script = f"import sanitizer_cases as c; c.FAMILIES[{family!r}]()"
            code, errors, report = sanitizer.run(found, tool, script)
            if code != 0 or errors != 0:
                dirty.append(f"{family} ({errors} errors, exit {code})")
                print(report[-2000:], file=sys.stderr)
        code, errors, report = sanitizer.run(found, tool, f"import sanitizer_cases as c; c.PLANTED[{tool!r}]()")
        seen = code == sanitizer.ERROR_EXIT and errors > 0
        if not seen:
            print(report[-2000:], file=sys.stderr)
        failed |= bool(dirty) or not seen
        clean = "clean" if not dirty else "REPORTS in " + ", ".join(dirty)
        planted = f"planted bug found ({errors} errors)" if seen else f"PLANTED BUG MISSED (exit {code})"
        print(f"{tool:10} {len(args.families)} families {clean}; {planted}; {time.time() - start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
