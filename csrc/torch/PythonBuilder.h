//===- PythonBuilder.h - the Python side of a cache miss ----------*- C++ -*-===//
//
// Ops keep their compiled kernels in C++ caches; a miss asks Python (cute_torch.ops installs
// the builder when it loads this library) to parse, trace and compile. Only misses take the
// GIL. Python exceptions come back as torch errors of the same kind (ValueError stays a
// ValueError), with Python's message.
//
//===----------------------------------------------------------------------===//

#ifndef CUTE_TORCH_OPS_PYTHONBUILDER_H
#define CUTE_TORCH_OPS_PYTHONBUILDER_H

#include <cstdint>
#include <string>
#include <vector>

namespace cute_torch::ops {

/// One argument of a builder call: a string, an int, a bool or None.
struct BuilderArg {
  enum Kind { String, Int, Bool, None } kind;
  std::string text;
  int64_t number = 0;

  BuilderArg(std::string s) : kind(String), text(std::move(s)) {}
  BuilderArg(const char *s) : kind(String), text(s) {}
  BuilderArg(int64_t n) : kind(Int), number(n) {}
  BuilderArg(int n) : kind(Int), number(n) {}
  BuilderArg(bool b) : kind(Bool), number(b) {}
  static BuilderArg none() { return BuilderArg(None); }

private:
  explicit BuilderArg(Kind k) : kind(k) {}
};

/// What the builder returned: a string, or a tuple of ints (the first `ints.size()`
/// elements); the rest of a tuple is kept alive forever (it owns the compiled kernel).
struct BuilderResult {
  std::string text;
  std::vector<uintptr_t> ints;
  bool isNone = false;
};

/// Calls builder(kind, *args) with the GIL held. Throws a c10::Error (subclass matching the
/// Python exception) if it raises or if no builder is installed.
BuilderResult callBuilder(const char *kind, const std::vector<BuilderArg> &args);

} // namespace cute_torch::ops

#endif // CUTE_TORCH_OPS_PYTHONBUILDER_H
