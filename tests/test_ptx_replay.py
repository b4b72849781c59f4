"""Compile-only tier: the PTX of every example and library kernel equals the committed baseline
(tests/ptx_replay/). A change that alters generated code fails here with the diff; when the
change is intended, `python scripts/ptx_replay.py --update` rewrites the baseline, and the diff
of the .ptx files shows reviewers what it did to the kernels."""

import os
import subprocess
import sys

from conftest import ROOT


def test_generated_ptx_matches_the_baseline():
    run = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "ptx_replay.py")],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert "0 changed, 0 new, 0 stale" in run.stdout
