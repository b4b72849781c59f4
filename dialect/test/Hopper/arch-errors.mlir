// RUN: not cute-compile %s --arch=sm_90 2>&1 | FileCheck %s --check-prefix=SM90
// RUN: not cute-compile %s --arch=sm_80 2>&1 | FileCheck %s --check-prefix=SM80

// Instructions the target lacks are errors at the op's location, before LLVM's instruction
// selection (which would abort the process on setmaxnreg for sm_90) or ptxas see them.

// SM90: "line":16,"message":"setmaxnreg (nvvm.setmaxregister) needs sm_90a, Hopper's arch-specific target; this module is compiled for sm_90"
// SM90-NOT: elect.sync
// SM80: "line":16,"message":"setmaxnreg (nvvm.setmaxregister) needs sm_90a, Hopper's arch-specific target; this module is compiled for sm_80"
// SM80: "line":17,"message":"elect.sync (nvvm.elect.sync) needs sm_90 or newer; this module is compiled for sm_80"
// SM80: "line":18,"message":"cluster registers (nvvm.read.ptx.sreg.clusterid.x) needs sm_90 or newer; this module is compiled for sm_80"
// SM80: "kind":"codegen","message":"the module uses instructions sm_80 does not have
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%out: !llvm.ptr<1>) kernel attributes {nvvm.maxntid = array<i32: 128, 1, 1>} {
      nvvm.setmaxregister increase 232
      %elected = nvvm.elect.sync -> i1
      %cluster = nvvm.read.ptx.sreg.clusterid.x : i32
      %v = arith.extui %elected : i1 to i32
      %w = arith.addi %v, %cluster : i32
      llvm.store %w, %out : i32, !llvm.ptr<1>
      gpu.return
    }
  }
}
