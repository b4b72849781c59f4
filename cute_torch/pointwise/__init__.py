"""cute::pointwise: an expression language (expr), its torch semantics (dtypes), its DSL code
(emit, kernel) and its derivatives (grad). The op itself is csrc/torch/Pointwise.cpp."""
