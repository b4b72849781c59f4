// RUN: cute-opt %s | cute-opt | FileCheck %s

// CHECK-LABEL: func.func @types
// CHECK-SAME: !cute.layout<"(4,8):(8,1)">
// CHECK-SAME: !cute.layout<"((128),(?)):((1),(128))">
func.func @types(%l: !cute.layout<"(4,8):(8,1)">, %d: !cute.layout<"((128),(?)):((1),(128))">) {
  return
}

// A shape without a stride gets the compact column-major stride, spelled out.
// CHECK-LABEL: func.func @canonical
// CHECK: cute.static_layout : !cute.layout<"(4,(2,8)):(1,(4,8))">
func.func @canonical() -> !cute.layout<"(4,(2,8))"> {
  %l = cute.static_layout : !cute.layout<"(4,(2,8))">
  return %l : !cute.layout<"(4,(2,8))">
}

// CHECK-LABEL: func.func @ops
// CHECK: cute.size %{{.*}} : !cute.layout<"(4,8):(8,1)"> -> index
// CHECK: cute.cosize %{{.*}} : !cute.layout<"(4,8):(8,1)"> -> i32
// CHECK: cute.crd2idx %{{.*}}[%{{.*}}, %{{.*}}] {coord = "(?,?)"} : !cute.layout<"(4,8):(8,1)">, (index, index) -> index
// CHECK: cute.crd2idx %{{.*}}[] {coord = "(3,_)"} : !cute.layout<"(4,8):(8,1)"> -> i32
// CHECK: cute.get_leaf %{{.*}} {index = 3 : i64} : !cute.layout<"(4,8):(8,1)"> -> i64
// CHECK: cute.swizzle %{{.*}} {swizzle = array<i64: 3, 4, 3>} : i32
func.func @ops(%i: index, %j: index, %k: i32) -> (index, i32, index, i64, i32) {
  %l = cute.static_layout : !cute.layout<"(4,8):(8,1)">
  %s = cute.size %l : !cute.layout<"(4,8):(8,1)"> -> index
  %c = cute.cosize %l : !cute.layout<"(4,8):(8,1)"> -> i32
  %o = cute.crd2idx %l[%i, %j] {coord = "(?,?)"} : !cute.layout<"(4,8):(8,1)">, (index, index) -> index
  %n = cute.crd2idx %l[] {coord = "(3,_)"} : !cute.layout<"(4,8):(8,1)"> -> i32
  %g = cute.get_leaf %l {index = 3} : !cute.layout<"(4,8):(8,1)"> -> i64
  %w = cute.swizzle %k {swizzle = array<i64: 3, 4, 3>} : i32
  return %s, %c, %o, %g, %w : index, i32, index, i64, i32
}
