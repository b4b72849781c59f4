// RUN: cute-opt %s -cute-lower-to-arith | FileCheck %s
// RUN: cute-opt %s -canonicalize | FileCheck %s --check-prefix=FOLD

// CHECK-LABEL: func.func @measures
// CHECK-DAG: %[[SIZE:.*]] = arith.constant 32 : index
// CHECK-DAG: %[[COSIZE:.*]] = arith.constant 4 : index
// CHECK: return %[[SIZE]], %[[COSIZE]]
func.func @measures() -> (index, index) {
  %l = cute.static_layout : !cute.layout<"(4,8):(8,1)">
  %b = cute.static_layout : !cute.layout<"(4,8):(1,0)">
  %s = cute.size %l : !cute.layout<"(4,8):(8,1)"> -> index
  %c = cute.cosize %b : !cute.layout<"(4,8):(1,0)"> -> index
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
  %o = cute.crd2idx %l[%i, %j] {coord = "(?,?)"} : !cute.layout<"(4,8):(8,1)">, (index, index) -> index
  return %o : index
}

// A linear coordinate is split colexicographically: (k % 4) * 8 + k / 4.
// CHECK-LABEL: func.func @linear
// CHECK-SAME: (%[[K:.*]]: index)
// CHECK: %[[REM:.*]] = arith.remsi %[[K]], %c4
// CHECK: %[[MUL:.*]] = arith.muli %[[REM]], %c8
// CHECK: %[[DIV:.*]] = arith.divsi %[[K]], %c4
// CHECK: arith.addi %[[MUL]], %[[DIV]]
func.func @linear(%k: index) -> index {
  %l = cute.static_layout : !cute.layout<"(4,8):(8,1)">
  %o = cute.crd2idx %l[%k] {coord = "?"} : !cute.layout<"(4,8):(8,1)">, (index) -> index
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
  %a = cute.crd2idx %l[%c3, %c5] {coord = "(?,?)"} : !cute.layout<"(4,8):(8,1)">, (index, index) -> index
  %b = cute.crd2idx %l[%c5] {coord = "?"} : !cute.layout<"(4,8):(8,1)">, (index) -> index
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
  %l = cute.make_layout(%m, %ld) : (index, index) -> !cute.layout<"(?,8):(?,1)">
  %s = cute.size %l : !cute.layout<"(?,8):(?,1)"> -> index
  %o = cute.crd2idx %l[%i, %j] {coord = "(?,?)"} : !cute.layout<"(?,8):(?,1)">, (index, index) -> index
  return %s, %o : index, index
}

// i32 leaves and coordinates stay i32; a hole contributes nothing, a static coordinate is a
// constant, an integer coordinate against a tuple mode splits: (_, (2, j)) over
// (4,(3,?)):(1,(4,?)) is 2 * 4 + j * d.
// CHECK-LABEL: func.func @hierarchical
// CHECK-SAME: (%[[N:.*]]: i32, %[[D:.*]]: i32, %[[J:.*]]: i32)
// CHECK: %[[JD:.*]] = arith.muli %[[J]], %[[D]] : i32
// CHECK: arith.addi %[[JD]], %c8_i32 : i32
// CHECK-NOT: index
func.func @hierarchical(%n: i32, %d: i32, %j: i32) -> i32 {
  %l = cute.make_layout(%n, %d) : (i32, i32) -> !cute.layout<"(4,(3,?)):(1,(4,?))">
  %o = cute.crd2idx %l[%j] {coord = "(_,(2,?))"} : !cute.layout<"(4,(3,?)):(1,(4,?))">, (i32) -> i32
  return %o : i32
}

// A dynamic extent divided by a static tile 128: the tile is 128:d, the rest (m+127)/128 of
// stride d*128; get_leaf reads the rest's extent, crd2idx goes through both.
// CHECK-LABEL: func.func @dynamic_divide
// CHECK-SAME: (%[[M:.*]]: i32, %[[T:.*]]: i32, %[[B:.*]]: i32)
// CHECK: %[[SUM:.*]] = arith.addi %[[M]], %c127_i32
// CHECK: %[[REST:.*]] = arith.divsi %[[SUM]], %c128_i32
// CHECK: %[[BT:.*]] = arith.muli %[[B]], %c128_i32
// CHECK: %[[OFF:.*]] = arith.addi %[[T]], %[[BT]]
// CHECK: return %[[REST]], %[[OFF]]
// CHECK-NOT: cute.
func.func @dynamic_divide(%m: i32, %t: i32, %b: i32) -> (i32, i32) {
  %l = cute.make_layout(%m) : (i32) -> !cute.layout<"?:1">
  %tile = cute.static_layout : !cute.layout<"(128):(1)">
  %z = cute.zipped_divide %l, %tile {by_mode} : !cute.layout<"?:1">, !cute.layout<"(128):(1)">
  %rest = cute.get_leaf %z {index = 1} : !cute.layout<"((128),(?)):((1),(128))"> -> i32
  %o = cute.crd2idx %z[%t, %b] {coord = "(?,?)"} : !cute.layout<"((128),(?)):((1),(128))">, (i32, i32) -> i32
  return %rest, %o : i32, i32
}

// A swizzle of a run-time offset: o ^ ((o & 0x380) >> 3).
// CHECK-LABEL: func.func @swizzle
// CHECK: arith.andi %{{.*}}, %c896_i32
// CHECK: arith.shrui %{{.*}}, %c3_i32
// CHECK: arith.xori
// FOLD-LABEL: func.func @swizzle
// FOLD: arith.constant 144 : i32
func.func @swizzle(%o: i32) -> (i32, i32) {
  %s = cute.swizzle %o {swizzle = array<i64: 3, 4, 3>} : i32
  %c = arith.constant 128 : i32
  %f = cute.swizzle %c {swizzle = array<i64: 3, 4, 3>} : i32
  return %s, %f : i32, i32
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

// A swizzle acts on byte addresses and keeps 2^base bytes together: Sw<3,4,3> allows 16-byte
// groups of 4 floats, and each group's element offset o becomes
// ((o << 2) ^ (((o << 2) & 0x380) >> 3)) >> 2.
// CHECK-LABEL: func.func @swizzled
// CHECK: arith.shli %{{.*}}, %c2
// CHECK: arith.andi %{{.*}}, %c896
// CHECK: arith.shrui %{{.*}}, %c3
// CHECK: arith.xori
// CHECK: arith.shrui %{{.*}}, %c2
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<3>
func.func @swizzled(%s: !llvm.ptr<3>, %i: i32, %v: vector<8xf32>) {
  cute.store %v, %s[%i] {layout = "8:1", align = 16, divisibility = 8, swizzle = array<i64: 3, 4, 3>} : vector<8xf32>, !llvm.ptr<3>, i32
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
