// RUN: cute-compile %s --arch=sm_90a --emit=ptx --backend=ptxas | FileCheck %s

// mma.sync m16n8k16 with fp32 accumulators (the Ampere tensor-core instruction). f16 operands go
// through the NVVM op. For bf16, MLIR 19's verifier of nvvm.mma.sync wrongly asks for f16 fragments
// (fixed upstream after 19), so the kernel library calls LLVM's intrinsic for it directly.
// The NVVM op goes through the device pipeline, LLVM 19's NVPTX backend and ptxas (the
// backend flag makes cute-compile assemble the PTX too, so ptxas checks what is checked here).

// CHECK: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// CHECK-NEXT: {%f{{[0-9]+}}, %f{{[0-9]+}}, %f{{[0-9]+}}, %f{{[0-9]+}}},
// CHECK-NEXT: {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}},
// CHECK-NEXT: {%r{{[0-9]+}}, %r{{[0-9]+}}},
// CHECK-NEXT: {%f{{[0-9]+}}, %f{{[0-9]+}}, %f{{[0-9]+}}, %f{{[0-9]+}}};
// CHECK: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// CHECK-NEXT: {%f{{[0-9]+}}, %f{{[0-9]+}}, %f{{[0-9]+}}, %f{{[0-9]+}}},
// CHECK-NEXT: {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}},
// CHECK-NEXT: {%r{{[0-9]+}}, %r{{[0-9]+}}},
// CHECK-NEXT: {%f{{[0-9]+}}, %f{{[0-9]+}}, %f{{[0-9]+}}, %f{{[0-9]+}}};
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%h: vector<2xf16>, %a0: i32, %a1: i32, %a2: i32, %a3: i32, %b0: i32, %b1: i32, %c: f32, %out: !llvm.ptr<1>) kernel {
      %d = nvvm.mma.sync A[%h, %h, %h, %h] B[%h, %h] C[%c, %c, %c, %c]
             {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>,
              shape = #nvvm.shape<m = 16, n = 8, k = 16>}
             : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
      %d3 = llvm.extractvalue %d[3] : !llvm.struct<(f32, f32, f32, f32)>
      %e = llvm.call_intrinsic "llvm.nvvm.mma.m16n8k16.row.col.bf16"(%a0, %a1, %a2, %a3, %b0, %b1, %d3, %c, %c, %c)
             : (i32, i32, i32, i32, i32, i32, f32, f32, f32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
      %e3 = llvm.extractvalue %e[3] : !llvm.struct<(f32, f32, f32, f32)>
      llvm.store %e3, %out : f32, !llvm.ptr<1>
      gpu.return
    }
  }
}
