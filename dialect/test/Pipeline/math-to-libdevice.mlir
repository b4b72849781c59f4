// RUN: cute-opt %s --pass-pipeline='builtin.module(gpu.module(cute-math-to-libdevice))' | FileCheck %s

// math.erf has no NVVM lowering in MLIR 16: it becomes a libdevice call, one declaration
// per function however many uses.

module attributes {gpu.container_module} {
  gpu.module @kernels {
    // CHECK: llvm.func @__nv_erf(f64) -> f64
    // CHECK: llvm.func @__nv_erff(f32) -> f32
    // CHECK-LABEL: gpu.func @k
    gpu.func @k(%a: f32, %b: f64) kernel {
      // CHECK: llvm.call @__nv_erff(%{{.*}}) : (f32) -> f32
      // CHECK: llvm.call @__nv_erff(%{{.*}}) : (f32) -> f32
      // CHECK: llvm.call @__nv_erf(%{{.*}}) : (f64) -> f64
      // CHECK-NOT: math.erf
      %0 = math.erf %a : f32
      %1 = math.erf %0 : f32
      %2 = math.erf %b : f64
      gpu.return
    }
  }
}
