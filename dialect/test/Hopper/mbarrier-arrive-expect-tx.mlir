// RUN: cute-compile %s --arch=sm_90a --emit=ptx --backend=ptxas | FileCheck %s

// mbarrier.arrive.expect_tx: the producer's arrival with the byte count a TMA copy will complete.
// The NVVM op goes through the device pipeline, LLVM 19's NVPTX backend and ptxas (the
// backend flag makes cute-compile assemble the PTX too, so ptxas checks what is checked here).

// CHECK: mbarrier.arrive.expect_tx.shared.b64 _, [%r{{[0-9]+}}], %r{{[0-9]+}};
module attributes {gpu.container_module} {
  gpu.module @m {
    llvm.mlir.global internal @bar() {addr_space = 3 : i32, alignment = 8 : i64} : i64
    gpu.func @k(%bytes: i32) kernel {
      %bar = llvm.mlir.addressof @bar : !llvm.ptr<3>
      nvvm.mbarrier.arrive.expect_tx.shared %bar, %bytes : !llvm.ptr<3>, i32
      gpu.return
    }
  }
}
