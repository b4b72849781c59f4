// RUN: cute-opt %s | cute-opt | FileCheck %s

// CHECK-LABEL: func.func @types
// CHECK-SAME: !cute.layout<"(4,8):(8,1)">
// CHECK-SAME: !cute.ptr<f32, gmem, align 16>
// CHECK-SAME: !cute.ptr<f16, smem, align 128>
func.func @types(%l: !cute.layout<"(4,8):(8,1)">, %p: !cute.ptr<f32, gmem, align 16>,
                 %s: !cute.ptr<f16, smem, align 128>) {
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
// CHECK: cute.size %{{.*}} : !cute.layout<"(4,8):(8,1)">
// CHECK: cute.cosize %{{.*}} : !cute.layout<"(4,8):(8,1)">
// CHECK: cute.crd2idx(%{{.*}}, %{{.*}}), %{{.*}} : !cute.layout<"(4,8):(8,1)">
func.func @ops(%i: index, %j: index) -> (index, index, index) {
  %l = cute.static_layout : !cute.layout<"(4,8):(8,1)">
  %s = cute.size %l : !cute.layout<"(4,8):(8,1)">
  %c = cute.cosize %l : !cute.layout<"(4,8):(8,1)">
  %o = cute.crd2idx(%i, %j), %l : !cute.layout<"(4,8):(8,1)">
  return %s, %c, %o : index, index, index
}
