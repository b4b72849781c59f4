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

// Run-time leaves come from cute.make_layout: size = m * 8, offset = i * ld + j.
// CHECK-LABEL: func.func @dynamic
// FOLD-LABEL: func.func @dynamic
// CHECK-SAME: (%[[M:.*]]: index, %[[LD:.*]]: index, %[[I:.*]]: index, %[[J:.*]]: index)
// CHECK-DAG: arith.muli %[[M]], %c8
// CHECK-DAG: arith.muli %[[I]], %[[LD]]
// CHECK-NOT: cute.
func.func @dynamic(%m: index, %ld: index, %i: index, %j: index) -> (index, index) {
  %l = cute.make_layout(%m, %ld) : !cute.layout<"(?,8):(?,1)">
  %s = cute.size %l : !cute.layout<"(?,8):(?,1)">
  %o = cute.crd2idx(%i, %j), %l : !cute.layout<"(?,8):(?,1)">
  return %s, %o : index, index
}

// Two contiguous runs of 4 floats, 16-byte aligned: two 16-byte vector loads.
// CHECK-LABEL: func.func @vector_load
// CHECK-COUNT-2: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
// CHECK-NOT: llvm.load
func.func @vector_load(%g: !llvm.ptr<1>, %i: i32) -> vector<8xf32> {
  %v = cute.load %g[%i] {layout = "(4,2):(1,8)", align = 16, divisibility = 4} : !llvm.ptr<1>, i32 -> vector<8xf32>
  return %v : vector<8xf32>
}

// An offset only known to be even: 8-byte vectors.
// CHECK-LABEL: func.func @half_aligned
// CHECK-COUNT-4: llvm.store %{{.*}}, %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<1>
func.func @half_aligned(%g: !llvm.ptr<1>, %i: i32, %v: vector<8xf32>) {
  cute.store %v, %g[%i] {layout = "8:1", align = 16, divisibility = 2} : vector<8xf32>, !llvm.ptr<1>, i32
  return
}

// A strided (column) access cannot be vectorized: one scalar per element.
// CHECK-LABEL: func.func @strided
// CHECK-COUNT-4: llvm.load %{{.*}} {alignment = 2 : i64} : !llvm.ptr<1> -> i16
func.func @strided(%g: !llvm.ptr<1>, %i: i64) -> vector<4xi16> {
  %v = cute.load %g[%i] {layout = "4:64", align = 16, divisibility = 64} : !llvm.ptr<1>, i64 -> vector<4xi16>
  return %v : vector<4xi16>
}

// A swizzle keeps 2^base elements together: Sw<3,2,3> allows 4 floats, and each group's
// offset is XORed: o ^ ((o & 0xe0) >> 3).
// CHECK-LABEL: func.func @swizzled
// CHECK: arith.andi %{{.*}}, %c224
// CHECK: arith.shrui %{{.*}}, %c3
// CHECK: arith.xori
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<3>
func.func @swizzled(%s: !llvm.ptr<3>, %i: i32, %v: vector<8xf32>) {
  cute.store %v, %s[%i] {layout = "8:1", align = 16, divisibility = 8, swizzle = array<i64: 3, 2, 3>} : vector<8xf32>, !llvm.ptr<3>, i32
  return
}

// Eight 16-bit elements move as one 16-byte access of four words, in PTX that LLVM cannot
// split back into 16-bit vectors.
// CHECK-LABEL: func.func @halves
// CHECK: llvm.inline_asm has_side_effects "ld.global.v4.b32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,l"
// CHECK: llvm.bitcast %{{.*}} : vector<4xi32> to vector<8xi16>
func.func @halves(%g: !llvm.ptr<1>, %i: i32) -> vector<8xi16> {
  %v = cute.load %g[%i] {layout = "8:1", align = 16, divisibility = 8} : !llvm.ptr<1>, i32 -> vector<8xi16>
  return %v : vector<8xi16>
}
