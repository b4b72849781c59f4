//===- CuteDialect.h - the cute dialect ---------------------------*- C++ -*-===//

#ifndef CUTE_DIALECT_CUTEDIALECT_H
#define CUTE_DIALECT_CUTEDIALECT_H

#include "cute/Layout/Layout.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "cute/Dialect/CuteDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "cute/Dialect/CuteTypes.h.inc"

#define GET_OP_CLASSES
#include "cute/Dialect/CuteOps.h.inc"

#endif // CUTE_DIALECT_CUTEDIALECT_H
