"""The compute-sanitizer tier (scripts/sanitize.py, tests/sanitizer_cases.py): the planted bugs
compile on the CPU; on the GPU each tool reports its plant, the proof that it is looking."""

import pytest
import sanitizer
from conftest import run_under_sanitizer
from sanitizer_cases import LAUNCHES

import cute_torch as cute


@pytest.mark.parametrize("tool", sorted(LAUNCHES))
def test_the_planted_bugs_compile(tool):
    launch, args = LAUNCHES[tool]
    ptx = cute.compile(launch, *args(), options={"arch": "sm_90a"}).__ptx__
    assert ".entry" in ptx
    if tool == "synccheck":
        assert "bar.sync" in ptx
    if tool == "racecheck":   # the race needs the shared-memory round trip to survive optimization
        assert "st.shared" in ptx and "ld.shared" in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("tool", sorted(LAUNCHES))
def test_each_tool_reports_its_planted_bug(tool):
    code, report = run_under_sanitizer(tool, f"import sanitizer_cases as c; c.PLANTED[{tool!r}]()")
    assert code == sanitizer.ERROR_EXIT and sanitizer.errors_reported(report) > 0, report[-3000:]
