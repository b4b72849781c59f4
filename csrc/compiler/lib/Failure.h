//===- Failure.h - how compile errors travel inside the library ---*- C++ -*-===//
//
// Thrown inside libcute_compiler and turned into JSON at the C API; never crosses it.
//
//===----------------------------------------------------------------------===//

#ifndef CUTE_TORCH_FAILURE_H
#define CUTE_TORCH_FAILURE_H

#include <string>
#include <vector>

namespace cute_torch {

struct Diagnostic {
  std::string file;
  int line = 0, col = 0;
  std::string severity, message;
};

struct CompileFailure {
  std::string kind; // parse, pass, codegen, ptxas, toolkit, jit, options, internal
  std::string message;
  std::vector<Diagnostic> diagnostics;
  std::string ptxPath, command;
};

} // namespace cute_torch

#endif // CUTE_TORCH_FAILURE_H
