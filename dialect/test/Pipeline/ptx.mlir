// RUN: cute-compile %s --arch=sm_90a --emit=ptx --backend=ptxas | FileCheck %s --check-prefix=HOPPER
// RUN: cute-compile %s --arch=sm_80 --emit=ptx --backend=ptxas | FileCheck %s --check-prefix=AMPERE
// RUN: not cute-compile %s --arch=sm_70 2>&1 | FileCheck %s --check-prefix=BADARCH

// LLVM 19 emits sm_90a natively (no header rewriting), with PTX 8.5 for every arch.
// HOPPER: .version 8.5
// HOPPER-NEXT: .target sm_90a
// HOPPER: .visible .entry k(
// HOPPER: mul.rn.f32
// AMPERE: .version 8.5
// AMPERE-NEXT: .target sm_80
// BADARCH: unsupported arch 'sm_70'
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%p: !llvm.ptr) kernel {
      %v = llvm.load %p : !llvm.ptr -> f32
      %w = arith.mulf %v, %v : f32
      llvm.store %w, %p : f32, !llvm.ptr
      gpu.return
    }
  }
}
