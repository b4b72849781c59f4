// RUN: cute-opt %s -cute-device-pipeline | FileCheck %s

// Every math op the DSL emits (cute_torch/dsl/math.py) reaches the LLVM dialect in the device
// stage: MLIR 19's GPU-to-NVVM conversion calls libdevice for the transcendental ones (erf
// included, which needed a pass of our own on MLIR 16) and LLVM intrinsics for the rest.

module attributes {gpu.container_module} {
  gpu.module @kernels {
    // CHECK-DAG: llvm.func @__nv_erff(f32) -> f32
    // CHECK-DAG: llvm.func @__nv_erf(f64) -> f64
    // CHECK-DAG: llvm.func @__nv_expf(f32) -> f32
    // CHECK-DAG: llvm.func @__nv_tanhf(f32) -> f32
    // CHECK-DAG: llvm.func @__nv_rsqrtf(f32) -> f32
    // CHECK-DAG: llvm.func @__nv_powf(f32, f32) -> f32
    // CHECK-LABEL: llvm.func @k
    // CHECK-NOT: math.
    // CHECK: llvm.intr.fma
    // CHECK-NOT: math.
    gpu.func @k(%a: f32, %b: f64, %p: !llvm.ptr) kernel {
      %0 = math.erf %a : f32
      %1 = math.exp %0 : f32
      %2 = math.exp2 %1 : f32
      %3 = math.log %2 : f32
      %4 = math.log2 %3 : f32
      %5 = math.sqrt %4 : f32
      %6 = math.rsqrt %5 : f32
      %7 = math.tanh %6 : f32
      %8 = math.sin %7 : f32
      %9 = math.cos %8 : f32
      %10 = math.floor %9 : f32
      %11 = math.ceil %10 : f32
      %12 = math.absf %11 : f32
      %13 = math.powf %12, %a : f32
      %14 = math.fma %13, %a, %a : f32
      llvm.store %14, %p : f32, !llvm.ptr
      %15 = math.erf %b : f64
      llvm.store %15, %p : f64, !llvm.ptr
      gpu.return
    }
  }
}
