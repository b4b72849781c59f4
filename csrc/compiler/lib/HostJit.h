//===- HostJit.h - host code to native entry points ----------------*- C++ -*-===//

#ifndef CUTE_TORCH_HOSTJIT_H
#define CUTE_TORCH_HOSTJIT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

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
/// goes where args[n] points), and the object code they came from (what a disk-cache entry
/// keeps). The code is freed with this object.
class HostCode {
public:
  explicit HostCode(llvm::orc::JITDylib &dylib) : dylib(dylib) {}
  ~HostCode();
  HostCode(const HostCode &) = delete;
  HostCode &operator=(const HostCode &) = delete;

  std::map<std::string, void *> entries;
  std::string object;

private:
  llvm::orc::JITDylib &dylib;
};

/// Compiles the public functions `names` of a host module in the LLVM dialect to an object,
/// without optimization (host code only computes launch shapes and calls the runtime), for
/// the generic CPU of this triple (a cached object may run on another machine), and loads it.
/// `symbols` resolves the external functions it calls, the process the rest (libc). One LLJIT
/// serves the process: one per module (MLIR's ExecutionEngine) cost most of a cached kernel's
/// load. Throws CompileFailure.
std::unique_ptr<HostCode> jitHostModule(mlir::ModuleOp module,
                                        const std::vector<std::string> &names,
                                        const std::map<std::string, void *> &symbols);

/// Loads an object jitHostModule made (HostCode::object): a disk-cache hit links it, no
/// parsing or code generation. Throws CompileFailure.
std::unique_ptr<HostCode> loadHostObject(llvm::StringRef object,
                                         const std::vector<std::string> &names,
                                         const std::map<std::string, void *> &symbols);

} // namespace cute_torch

#endif // CUTE_TORCH_HOSTJIT_H
