//===- HostJit.h - host code to native entry points ----------------*- C++ -*-===//

#ifndef CUTE_TORCH_HOSTJIT_H
#define CUTE_TORCH_HOSTJIT_H

#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace llvm::orc {
class JITDylib;
} // namespace llvm::orc

namespace cute_torch {

/// One module's host code in the process-wide JIT (its own JITDylib): the packed entries of
/// its public functions, `void entry(void **args)` (args[i] points at argument i; a result
/// goes where args[n] points). The code is freed with this object.
class HostCode {
public:
  explicit HostCode(llvm::orc::JITDylib &dylib) : dylib(dylib) {}
  ~HostCode();
  HostCode(const HostCode &) = delete;
  HostCode &operator=(const HostCode &) = delete;

  std::map<std::string, void *> entries;

private:
  llvm::orc::JITDylib &dylib;
};

/// JIT-compiles the public functions `names` of a host module in the LLVM dialect, without
/// optimization (host code only computes launch shapes and calls the runtime). `symbols`
/// resolves the external functions it calls, the process the rest (libc). One LLJIT serves
/// the process: creating one per module (MLIR's ExecutionEngine) cost most of a cached
/// kernel's load. Throws CompileFailure.
std::unique_ptr<HostCode> jitHostModule(mlir::ModuleOp module,
                                        const std::vector<std::string> &names,
                                        const std::map<std::string, void *> &symbols);

} // namespace cute_torch

#endif // CUTE_TORCH_HOSTJIT_H
