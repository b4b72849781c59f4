"""The package imports and reports clearly on a machine without a GPU."""

import cute_torch
from cute_torch import _C


def test_import_works_without_a_driver():
    ok, why = _C.driver_available()
    if ok:
        assert why == ""  # nothing to explain
    else:
        assert "libcuda" in why or "cuInit" in why
        assert not cute_torch.gpu_available()
    assert ok or not cute_torch.gpu_available()


def test_compiler_version_names_llvm():
    assert "MLIR 19" in cute_torch.compiler_version()
