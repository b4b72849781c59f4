//===- HostJit.h - host code to a native entry point --------------*- C++ -*-===//

#ifndef CUTE_TORCH_HOSTJIT_H
#define CUTE_TORCH_HOSTJIT_H

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <memory>
#include <string>

namespace cute_torch {

/// JIT-compiles a host module in the LLVM dialect (MLIR's ExecutionEngine, ORC underneath).
/// `symbols` resolves the external functions the host code calls. Throws CompileFailure.
std::unique_ptr<mlir::ExecutionEngine> jitHostModule(mlir::ModuleOp module, int optLevel,
                                                     const std::map<std::string, void *> &symbols);

} // namespace cute_torch

#endif // CUTE_TORCH_HOSTJIT_H
