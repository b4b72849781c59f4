// RUN: cute-compile %s --arch=sm_90a --emit=ptx --backend=ptxas | FileCheck %s

// setmaxnreg: the producer warpgroup gives registers back, the consumers take them (needs launch bounds for ptxas to honour it: the kernel carries nvvm.maxntid).
// The NVVM op goes through the device pipeline, LLVM 19's NVPTX backend and ptxas (the
// backend flag makes cute-compile assemble the PTX too, so ptxas checks what is checked here).

// CHECK: .maxntid 384, 1, 1
// CHECK: setmaxnreg.dec.sync.aligned.u32 40;
// CHECK: setmaxnreg.inc.sync.aligned.u32 232;
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%producer: i1) kernel attributes {nvvm.maxntid = array<i32: 384, 1, 1>} {
      scf.if %producer {
        nvvm.setmaxregister decrease 40
      } else {
        nvvm.setmaxregister increase 232
      }
      gpu.return
    }
  }
}
