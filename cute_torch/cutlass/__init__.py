"""CuTe DSL's `cutlass` namespace over cute_torch, so that a CuTe DSL program ports by changing its
import lines only:

    import cutlass                         ->  import cute_torch.cutlass as cutlass
    import cutlass.cute as cute            ->  import cute_torch.cutlass.cute as cute
    from cutlass.cute.runtime import from_dlpack
                                           ->  from cute_torch.cutlass.cute.runtime import from_dlpack
    import cutlass.torch as cutlass_torch  ->  import cute_torch.cutlass.torch as cutlass_torch

What is here: the numeric types, `Constexpr`, `range`, `range_constexpr`, `const_expr`,
`dynamic_expr`, and the submodules `cute` (all of cute_torch's DSL, plus `cute.runtime` and
`cute.testing`) and `torch`. The differences from CuTe DSL that remain are listed in
docs/language.md ("CuTe DSL compatibility").
"""

from cute_torch import (BFloat16, Boolean, Constexpr, Float, Float8E4M3FN, Float8E5M2, Float16, Float32,  # noqa: F401
                        Float64, Int8, Int16, Int32, Int64, Integer, Numeric, Uint8, Uint16, Uint32, Uint64,
                        const_expr, range, range_constexpr)


def dynamic_expr(value):
    """CuTe DSL's marker for a condition evaluated at run time: what a plain condition is here."""
    return value


from . import cute, torch  # noqa: E402,F401 - the submodules, as `cutlass.cute` and `cutlass.torch`
