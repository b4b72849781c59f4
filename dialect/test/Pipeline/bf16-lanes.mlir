// RUN: cute-compile %s --arch=sm_90a --emit=ptx --backend=ptxas | FileCheck %s

// bf16 -> f32 of a loaded vector's lanes after LLVM's O3 (DeviceCodegen.cpp's widenBf16Lanes):
// integer operations on the vector's 32-bit words, the high lane masked in place, the low one
// shifted there; no cvt.f32.bf16, which ptxas makes two instructions for a high lane. (The
// DSL's vector copies load words, as the volatile load here, which O3 cannot split into bf16
// loads.) A bf16 that is no vector's lane keeps its cvt.

// CHECK-LABEL: .entry lanes(
// CHECK: ld.volatile.global.v4.u32
// CHECK-NOT: cvt.f32.bf16
// CHECK-DAG: shl.b32 %r{{[0-9]+}}, %r{{[0-9]+}}, 16;
// CHECK-DAG: and.b32 %r{{[0-9]+}}, %r{{[0-9]+}}, -65536;
// CHECK: ret;
// CHECK-LABEL: .entry scalar(
// CHECK: cvt.f32.bf16
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @lanes(%in: !llvm.ptr<1>, %out: !llvm.ptr<1>) kernel {
      %words = llvm.load volatile %in {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xi32>
      %v = llvm.bitcast %words : vector<4xi32> to vector<8xbf16>
      %c0 = llvm.mlir.constant(0 : i32) : i32
      %e0 = llvm.extractelement %v[%c0 : i32] : vector<8xbf16>
      %f0 = arith.extf %e0 : bf16 to f32
      %c1 = llvm.mlir.constant(1 : i32) : i32
      %e1 = llvm.extractelement %v[%c1 : i32] : vector<8xbf16>
      %f1 = arith.extf %e1 : bf16 to f32
      %c2 = llvm.mlir.constant(2 : i32) : i32
      %e2 = llvm.extractelement %v[%c2 : i32] : vector<8xbf16>
      %f2 = arith.extf %e2 : bf16 to f32
      %c3 = llvm.mlir.constant(3 : i32) : i32
      %e3 = llvm.extractelement %v[%c3 : i32] : vector<8xbf16>
      %f3 = arith.extf %e3 : bf16 to f32
      %c4 = llvm.mlir.constant(4 : i32) : i32
      %e4 = llvm.extractelement %v[%c4 : i32] : vector<8xbf16>
      %f4 = arith.extf %e4 : bf16 to f32
      %c5 = llvm.mlir.constant(5 : i32) : i32
      %e5 = llvm.extractelement %v[%c5 : i32] : vector<8xbf16>
      %f5 = arith.extf %e5 : bf16 to f32
      %c6 = llvm.mlir.constant(6 : i32) : i32
      %e6 = llvm.extractelement %v[%c6 : i32] : vector<8xbf16>
      %f6 = arith.extf %e6 : bf16 to f32
      %c7 = llvm.mlir.constant(7 : i32) : i32
      %e7 = llvm.extractelement %v[%c7 : i32] : vector<8xbf16>
      %f7 = arith.extf %e7 : bf16 to f32
      %p1 = arith.mulf %f0, %f1 : f32
      %p2 = arith.mulf %p1, %f2 : f32
      %p3 = arith.mulf %p2, %f3 : f32
      %p4 = arith.mulf %p3, %f4 : f32
      %p5 = arith.mulf %p4, %f5 : f32
      %p6 = arith.mulf %p5, %f6 : f32
      %p7 = arith.mulf %p6, %f7 : f32
      llvm.store %p7, %out : f32, !llvm.ptr<1>
      gpu.return
    }
    gpu.func @scalar(%in: !llvm.ptr<1>, %out: !llvm.ptr<1>) kernel {
      %x = llvm.load %in : !llvm.ptr<1> -> bf16
      %a = arith.extf %x : bf16 to f32
      %s = arith.mulf %a, %a : f32
      llvm.store %s, %out : f32, !llvm.ptr<1>
      gpu.return
    }
  }
}
