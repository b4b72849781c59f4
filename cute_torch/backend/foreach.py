"""Decompositions of the pointwise `aten._foreach_*` ops into one op per tensor of their lists.

torch's optimizers take their foreach path by default on CUDA, so a compiled `opt.step()`
arrives as `_foreach_mul`, `_foreach_addcmul`, ... over every parameter at once: ops the
pointwise fusion does not know, which would run as ATen's multi-tensor kernels, one pass over
every parameter per op. Split, each parameter's chain of ops is a pointwise region like the
single-tensor path's, and fuses into one kernel per parameter (written in place by
in_place.py). Parameters of different shapes are not fused together: a step of P parameters
is P update launches (and one for all the 0-dim step counts: fusion.MAX_SCALAR_GROUP), where
Inductor's foreach lowering launches about one.

Kept whole: the reductions (`_foreach_max`, `_foreach_norm`, `_foreach_powsum`), `_foreach_mm`,
and `addcmul`/`addcdiv` whose scalars come as one tensor (its elements are not Scalars)."""

from __future__ import annotations

import functools

import torch

_PREFIX = "aten::_foreach_"
_KEPT = {"max", "norm", "powsum", "mm"}
_KEPT_OVERLOADS = {("addcmul", "Tensor"), ("addcdiv", "Tensor")}
# Per-tensor ops spelled otherwise: aten.maximum/minimum take no Scalar.
_RENAMED = {("maximum", "Scalar"): "clamp_min", ("maximum", "ScalarList"): "clamp_min",
            ("minimum", "Scalar"): "clamp_max", ("minimum", "ScalarList"): "clamp_max"}
# Per-tensor keywords named otherwise: addcmul/addcdiv's ScalarList `scalars` is their `value`.
_KEYWORDS = {"scalars": "value"}


def _positional_count(name: str) -> int:
    """How many leading arguments every overload of the op takes positionally (add.Tensor's
    alpha is keyword-only where add.Scalar's is not: passed by name, it binds to either)."""
    return min(sum(not a.kwarg_only for a in s.arguments) for s in torch._C._jit_get_schemas_for_operator(name))


def _per_tensor(schema, base_name: str):
    """The decomposition of one foreach overload: its arguments bound by name, list arguments
    indexed, the rest passed as they are; as many positionally as every per-tensor overload
    takes, the rest by name (addcmul's `value` is positional in the foreach schema,
    keyword-only in addcmul's). The packet picks the per-tensor overload for each tensor's arguments."""
    base = getattr(torch.ops.aten, base_name)
    names = [a.name for a in schema.arguments]
    positional = _positional_count(f"aten::{base_name}")

    def split(*args, **kwargs):
        bound = list(zip(names, args)) + [(n, kwargs[n]) for n in names[len(args):] if n in kwargs]
        count = len(next(v for _, v in bound if isinstance(v, (list, tuple))))
        pick = lambda v, i: v[i] if isinstance(v, (list, tuple)) else v   # noqa: E731
        return [base(*(pick(v, i) for _, v in bound[:positional]),
                     **{_KEYWORDS.get(n, n): pick(v, i) for n, v in bound[positional:]}) for i in range(count)]
    return split


@functools.lru_cache(maxsize=1)
def foreach_decompositions() -> dict:
    """{OpOverload: decomposition} for every functional pointwise `aten._foreach_*` overload
    of this torch (the in-place ones arrive functionalized)."""
    table = {}
    for schema in torch._C._jit_get_all_schemas():
        name, overload = schema.name, schema.overload_name
        if not name.startswith(_PREFIX) or name.endswith("_") or overload.endswith("out"):
            continue
        short = name[len(_PREFIX):]
        base_name = _RENAMED.get((short, overload), short)
        if short in _KEPT or (short, overload) in _KEPT_OVERLOADS or not hasattr(torch.ops.aten, base_name):
            continue
        op = getattr(getattr(torch.ops.aten, f"_foreach_{short}"), overload or "default")
        table[op] = _per_tensor(schema, base_name)
    return table
