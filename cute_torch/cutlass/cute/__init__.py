"""`cutlass.cute`: cute_torch's DSL under CuTe DSL's module path, with `runtime` and `testing`."""

from cute_torch import *  # noqa: F401,F403 - the whole DSL, as CuTe DSL's `cute`
from cute_torch import __all__ as _dsl_names

from . import runtime, testing  # noqa: E402,F401

__all__ = [*_dsl_names, "runtime", "testing"]
