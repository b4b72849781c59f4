// RUN: cute-opt %s -cute-common-pipeline -cute-device-pipeline | FileCheck %s

// Kernels reach the NVVM and LLVM dialects; cute layout math becomes index arithmetic first.
// CHECK: gpu.module @kernels
// CHECK: llvm.func @scale(%{{.*}}: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel}
// CHECK: nvvm.read.ptx.sreg.tid.x
// CHECK-NOT: cute.
// CHECK-NOT: scf.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @scale(%p: !llvm.ptr) kernel {
      %tid = gpu.thread_id x
      %l = cute.static_layout : !cute.layout<"(32,4):(4,1)">
      %o = cute.crd2idx %l[%tid] {coord = "?"} : !cute.layout<"(32,4):(4,1)">, (index) -> index
      %c0 = arith.constant 0 : index
      %cond = arith.cmpi ne, %o, %c0 : index
      scf.if %cond {
        %i = arith.index_cast %o : index to i64
        %q = llvm.getelementptr %p[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
        %v = llvm.load %q : !llvm.ptr -> f32
        %w = arith.mulf %v, %v : f32
        llvm.store %w, %q : f32, !llvm.ptr
      }
      gpu.return
    }
  }
}
