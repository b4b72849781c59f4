// RUN: cute-opt %s | cute-opt | FileCheck %s
// RUN: cute-opt %s -canonicalize | FileCheck %s --check-prefix=FOLD

// Result types are inferred by the layout library (CuTe's documented examples); static
// results fold to the static layout they name.
// CHECK-LABEL: func.func @inference
// CHECK: cute.zipped_divide %{{.*}}, %{{.*}} {by_mode}
// CHECK: cute.logical_divide %{{.*}}, %{{.*}} :
// FOLD-LABEL: func.func @inference
// FOLD-DAG: cute.static_layout : !cute.layout<"((3,(2,4)),(3,(2,2))):((177,(13,2)),(59,(26,1)))">
// FOLD-DAG: cute.static_layout : !cute.layout<"((2,2),(2,3)):((4,1),(2,8))">
// FOLD-NOT: cute.zipped_divide
func.func @inference() -> (!cute.layout<"((3,(2,4)),(3,(2,2))):((177,(13,2)),(59,(26,1)))">,
                           !cute.layout<"((2,2),(2,3)):((4,1),(2,8))">) {
  %m = cute.static_layout : !cute.layout<"(9,(4,8)):(59,(13,1))">
  %t = cute.static_layout : !cute.layout<"(3,(2,4)):(3,(1,8))">
  %z = cute.zipped_divide %m, %t {by_mode} : !cute.layout<"(9,(4,8)):(59,(13,1))">, !cute.layout<"(3,(2,4)):(3,(1,8))">
  %a = cute.static_layout : !cute.layout<"(4,2,3):(2,1,8)">
  %b = cute.static_layout : !cute.layout<"4:2">
  %d = cute.logical_divide %a, %b : !cute.layout<"(4,2,3):(2,1,8)">, !cute.layout<"4:2">
  return %z, %d : !cute.layout<"((3,(2,4)),(3,(2,2))):((177,(13,2)),(59,(26,1)))">,
                  !cute.layout<"((2,2),(2,3)):((4,1),(2,8))">
}

// Run-time leaves: '?' in the type, values from cute.make_layout.
// CHECK-LABEL: func.func @dynamic
// FOLD-LABEL: func.func @dynamic
// CHECK: cute.make_layout(%{{.*}}, %{{.*}}) : (index, index) -> !cute.layout<"(?,8):(?,1)">
func.func @dynamic(%m: index, %ld: index) -> index {
  %l = cute.make_layout(%m, %ld) : (index, index) -> !cute.layout<"(?,8):(?,1)">
  %s = cute.size %l : !cute.layout<"(?,8):(?,1)"> -> index
  return %s : index
}

// Dividing run-time extents by static tiles infers the result's structure (DynamicLayout.cpp):
// each tiled leaf s:d becomes n:d and ceil(s/n):(d*n).
// CHECK-LABEL: func.func @dynamic_divides
// CHECK: cute.zipped_divide %{{.*}}, %{{.*}} {by_mode} : !cute.layout<"(?,?):(1,?)">, !cute.layout<"(16,128):(1,1)">
// CHECK: cute.logical_divide %{{.*}}, %{{.*}} {by_mode} : !cute.layout<"(?,?):(1,?)">, !cute.layout<"(16):(1)">
func.func @dynamic_divides(%m: i32, %n: i32, %ld: i32) -> (!cute.layout<"((16,128),(?,?)):((1,?),(16,?))">, !cute.layout<"((16,?),?):((1,16),?)">) {
  %l = cute.make_layout(%m, %n, %ld) : (i32, i32, i32) -> !cute.layout<"(?,?):(1,?)">
  %t = cute.static_layout : !cute.layout<"(16,128):(1,1)">
  %z = cute.zipped_divide %l, %t {by_mode} : !cute.layout<"(?,?):(1,?)">, !cute.layout<"(16,128):(1,1)">
  %t1 = cute.static_layout : !cute.layout<"(16):(1)">
  %d = cute.logical_divide %l, %t1 {by_mode} : !cute.layout<"(?,?):(1,?)">, !cute.layout<"(16):(1)">
  return %z, %d : !cute.layout<"((16,128),(?,?)):((1,?),(16,?))">, !cute.layout<"((16,?),?):((1,16),?)">
}

// CHECK-LABEL: func.func @memory
// CHECK: cute.load %{{.*}}[%{{.*}}] {align = 16 : i64, divisibility = 4 : i64, layout = "(4,2):(1,8)"} : !llvm.ptr<1>, i32 -> vector<8xf32>
// CHECK: cute.store %{{.*}}, %{{.*}}[%{{.*}}] {align = 16 : i64, divisibility = 8 : i64, layout = "8:1", swizzle = array<i64: 3, 3, 3>} : vector<8xf32>, !llvm.ptr<3>, i32
func.func @memory(%g: !llvm.ptr<1>, %s: !llvm.ptr<3>, %i: i32) {
  %v = cute.load %g[%i] {layout = "(4,2):(1,8)", align = 16, divisibility = 4} : !llvm.ptr<1>, i32 -> vector<8xf32>
  cute.store %v, %s[%i] {layout = "8:1", align = 16, divisibility = 8, swizzle = array<i64: 3, 3, 3>} : vector<8xf32>, !llvm.ptr<3>, i32
  return
}
