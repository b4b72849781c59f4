//===- CuteDialect.h - the cute dialect ---------------------------*- C++ -*-===//

#ifndef CUTE_DIALECT_CUTEDIALECT_H
#define CUTE_DIALECT_CUTEDIALECT_H

#include "cute/Layout/Layout.h"
#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "cute/Dialect/CuteDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "cute/Dialect/CuteTypes.h.inc"

namespace mlir::cute {
/// Result type of a layout-algebra op, computed with the layout library.
LogicalResult inferAlgebra(StringRef opName, MLIRContext *context, std::optional<Location> location,
                           ValueRange operands, DictionaryAttr attributes,
                           SmallVectorImpl<Type> &inferred);
/// A static result folds (to cute.static_layout, through the constant materializer).
OpFoldResult foldAlgebra(Operation *op);
} // namespace mlir::cute

#define GET_OP_CLASSES
#include "cute/Dialect/CuteOps.h.inc"

#endif // CUTE_DIALECT_CUTEDIALECT_H
