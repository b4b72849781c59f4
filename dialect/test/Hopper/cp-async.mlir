// RUN: cute-compile %s --arch=sm_90a --emit=ptx --backend=ptxas | FileCheck %s

// cp.async.cg: a 16-byte asynchronous global -> shared copy that bypasses L1, with its group commit and wait (the Ampere multistage pipeline).
// The NVVM op goes through the device pipeline, LLVM 19's NVPTX backend and ptxas (the
// backend flag makes cute-compile assemble the PTX too, so ptxas checks what is checked here).

// CHECK: cp.async.cg.shared.global [%rd{{[0-9]+}}], [%rd{{[0-9]+}}], 16;
// CHECK: cp.async.commit_group;
// CHECK: cp.async.wait_group 0;
module attributes {gpu.container_module} {
  gpu.module @m {
    llvm.mlir.global internal @tile() {addr_space = 3 : i32, alignment = 128 : i64} : !llvm.array<2048 x i8>
    gpu.func @k(%src: !llvm.ptr<1>) kernel {
      %dst = llvm.mlir.addressof @tile : !llvm.ptr<3>
      nvvm.cp.async.shared.global %dst, %src, 16, cache = cg : !llvm.ptr<3>, !llvm.ptr<1>
      nvvm.cp.async.commit.group
      nvvm.cp.async.wait.group 0
      gpu.return
    }
  }
}
