// RUN: cute-opt %s -cute-lower-to-arith | FileCheck %s
// RUN: cute-opt %s -canonicalize | FileCheck %s --check-prefix=FOLD

// CHECK-LABEL: func.func @measures
// CHECK-DAG: %[[SIZE:.*]] = arith.constant 32 : index
// CHECK-DAG: %[[COSIZE:.*]] = arith.constant 4 : index
// CHECK: return %[[SIZE]], %[[COSIZE]]
func.func @measures() -> (index, index) {
  %l = cute.static_layout : !cute.layout<"(4,8):(8,1)">
  %b = cute.static_layout : !cute.layout<"(4,8):(1,0)">
  %s = cute.size %l : !cute.layout<"(4,8):(8,1)">
  %c = cute.cosize %b : !cute.layout<"(4,8):(1,0)">
  return %s, %c : index, index
}

// Per-mode coordinates: i * 8 + j.
// CHECK-LABEL: func.func @coords
// CHECK-SAME: (%[[I:.*]]: index, %[[J:.*]]: index)
// CHECK: %[[MUL:.*]] = arith.muli %[[I]], %c8
// CHECK: %[[SUM:.*]] = arith.addi %[[MUL]], %[[J]]
// CHECK: return %[[SUM]]
// CHECK-NOT: cute.
func.func @coords(%i: index, %j: index) -> index {
  %l = cute.static_layout : !cute.layout<"(4,8):(8,1)">
  %o = cute.crd2idx(%i, %j), %l : !cute.layout<"(4,8):(8,1)">
  return %o : index
}

// A linear coordinate is split colexicographically: (k % 4) * 8 + k / 4.
// CHECK-LABEL: func.func @linear
// CHECK-SAME: (%[[K:.*]]: index)
// CHECK-DAG: %[[REM:.*]] = arith.remsi %[[K]], %c4
// CHECK-DAG: %[[DIV:.*]] = arith.divsi %[[K]], %c4
// CHECK: arith.muli %[[REM]], %c8
func.func @linear(%k: index) -> index {
  %l = cute.static_layout : !cute.layout<"(4,8):(8,1)">
  %o = cute.crd2idx(%k), %l : !cute.layout<"(4,8):(8,1)">
  return %o : index
}

// Constant coordinates fold while tracing: (3, 5) -> 29, linear 5 -> 9.
// FOLD-LABEL: func.func @folds
// FOLD-DAG: arith.constant 29 : index
// FOLD-DAG: arith.constant 9 : index
// FOLD-NOT: cute.crd2idx
func.func @folds() -> (index, index) {
  %l = cute.static_layout : !cute.layout<"(4,8):(8,1)">
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %a = cute.crd2idx(%c3, %c5), %l : !cute.layout<"(4,8):(8,1)">
  %b = cute.crd2idx(%c5), %l : !cute.layout<"(4,8):(8,1)">
  return %a, %b : index, index
}
