// RUN: cute-opt %s --cute-device-pipeline="line-info=true" --mlir-print-debuginfo | FileCheck %s --check-prefix=SCOPES
// RUN: cute-compile %s --arch=sm_90a --line-info --emit=ptx --backend=ptxas | FileCheck %s --check-prefix=PTX
// RUN: cute-compile %s --arch=sm_90a --emit=ptx | FileCheck %s --check-prefix=OFF

// With line info, the kernel gets a debug scope from its location (the Python `def`), ops
// keep the user's lines, and an op from another file (a helper) is scoped by its own file;
// the PTX carries .file/.loc directives (no DWARF sections), which `ptxas -lineinfo` maps to
// SASS. Without it, locations are stripped and the PTX has no .loc.

// SCOPES-DAG: #[[FILE:.+]] = #llvm.di_file<"kernel.py" in "/home/user">
// SCOPES-DAG: #[[HELPER:.+]] = #llvm.di_file<"helpers.py" in "/home/user">
// SCOPES-DAG: #[[UNIT:.+]] = #llvm.di_compile_unit<{{.*}}sourceLanguage = DW_LANG_Python, file = #[[FILE]], producer = "cute_torch", isOptimized = true, emissionKind = DebugDirectivesOnly>
// SCOPES-DAG: #[[SP:.+]] = #llvm.di_subprogram<{{.*}}compileUnit = #[[UNIT]], scope = #[[FILE]], name = "scale", linkageName = "scale", file = #[[FILE]], line = 10
// SCOPES-DAG: #llvm.di_lexical_block_file<scope = #[[SP]], file = #[[HELPER]], discriminator = 0>

// PTX: .loc 1 10 0
// PTX: .loc 1 12 7
// PTX: ld.global.f32
// PTX: .loc 2 40 3
// PTX: mul.rn.f32
// PTX-DAG: .file 1 "/home/user/kernel.py"
// PTX-DAG: .file 2 "/home/user/helpers.py"

// OFF-NOT: .loc
// OFF-NOT: .file
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @scale(%p: !llvm.ptr<1>, %q: !llvm.ptr<1>, %s: f32) kernel {
      %v = llvm.load %p : !llvm.ptr<1> -> f32 loc("/home/user/kernel.py":12:7)
      %w = arith.mulf %v, %s : f32 loc("/home/user/helpers.py":40:3)
      llvm.store %w, %q : f32, !llvm.ptr<1> loc("/home/user/kernel.py":13:5)
      gpu.return loc("/home/user/kernel.py":10:1)
    } loc("/home/user/kernel.py":10:1)
  }
}
