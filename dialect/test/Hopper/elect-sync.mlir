// RUN: cute-compile %s --arch=sm_90a --emit=ptx --backend=ptxas | FileCheck %s

// elect.sync: one lane of a warp is chosen (to issue TMA, arrive on a barrier).
// The NVVM op goes through the device pipeline, LLVM 19's NVPTX backend and ptxas (the
// backend flag makes cute-compile assemble the PTX too, so ptxas checks what is checked here).

// CHECK: elect.sync {{.*}}, 0xFFFFFFFF;
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%out: !llvm.ptr<1>) kernel {
      %elected = nvvm.elect.sync -> i1
      %v = arith.extui %elected : i1 to i32
      llvm.store %v, %out : i32, !llvm.ptr<1>
      gpu.return
    }
  }
}
