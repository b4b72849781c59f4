// RUN: cute-compile %s --arch=sm_90a --emit=ptx --backend=ptxas | FileCheck %s

// mbarrier.init / fence.mbarrier_init / mbarrier.try_wait.parity: a consumer waiting on a phase.
// The NVVM op goes through the device pipeline, LLVM 19's NVPTX backend and ptxas (the
// backend flag makes cute-compile assemble the PTX too, so ptxas checks what is checked here).

// CHECK: .target sm_90a
// CHECK: mbarrier.init.shared.b64 [%rd{{[0-9]+}}], %r{{[0-9]+}};
// CHECK: fence.mbarrier_init.release.cluster;
// CHECK: LAB_WAIT:
// CHECK-NEXT: mbarrier.try_wait.parity.shared.b64 P1, [%r{{[0-9]+}}], %r{{[0-9]+}}, 10000000;
// CHECK-NEXT: @P1 bra.uni DONE;
// CHECK-NEXT: bra.uni LAB_WAIT;
module attributes {gpu.container_module} {
  gpu.module @m {
    llvm.mlir.global internal @bar() {addr_space = 3 : i32, alignment = 8 : i64} : i64
    gpu.func @k(%phase: i32) kernel {
      %bar = llvm.mlir.addressof @bar : !llvm.ptr<3>
      %one = arith.constant 1 : i32
      %ticks = arith.constant 10000000 : i32
      nvvm.mbarrier.init.shared %bar, %one : !llvm.ptr<3>, i32
      nvvm.fence.mbarrier.init
      nvvm.mbarrier.try_wait.parity.shared %bar, %phase, %ticks : !llvm.ptr<3>, i32, i32
      gpu.return
    }
  }
}
