"""The DSL front end: `@cute.jit` / `@cute.kernel`, the preprocessor, the tracer, numeric
types, tensors and layouts, `cute.arch`, `cute.math`, `cute.printf`, specialization caches."""
