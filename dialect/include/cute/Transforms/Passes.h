//===- Passes.h - cute dialect passes -----------------------------*- C++ -*-===//

#ifndef CUTE_TRANSFORMS_PASSES_H
#define CUTE_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Pass/Pass.h"
#include <memory>

namespace mlir::cute {
std::unique_ptr<Pass> createLowerToArithPass();

#define GEN_PASS_REGISTRATION
#include "cute/Transforms/Passes.h.inc"
} // namespace mlir::cute

#endif // CUTE_TRANSFORMS_PASSES_H
