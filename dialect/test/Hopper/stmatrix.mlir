// RUN: cute-compile %s --arch=sm_90a --emit=ptx --backend=ptxas | FileCheck %s

// stmatrix: four 8x8 b16 matrices from registers to shared memory (the epilogue's path to a TMA store).
// The NVVM op goes through the device pipeline, LLVM 19's NVPTX backend and ptxas (the
// backend flag makes cute-compile assemble the PTX too, so ptxas checks what is checked here).

// CHECK: stmatrix.sync.aligned.x4.m8n8.shared.b16 [%r{{[0-9]+}}], {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}};
// CHECK: stmatrix.sync.aligned.x4.trans.m8n8.shared.b16 [%r{{[0-9]+}}], {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}};
module attributes {gpu.container_module} {
  gpu.module @m {
    llvm.mlir.global internal @tile() {addr_space = 3 : i32, alignment = 128 : i64} : !llvm.array<2048 x i8>
    gpu.func @k(%a: i32, %b: i32, %c: i32, %d: i32, %offset: i32) kernel {
      %base = llvm.mlir.addressof @tile : !llvm.ptr<3>
      %p = llvm.getelementptr %base[%offset] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      nvvm.stmatrix %p, %a, %b, %c, %d {layout = #nvvm.mma_layout<row>} : !llvm.ptr<3>, i32, i32, i32, i32
      nvvm.stmatrix %p, %a, %b, %c, %d {layout = #nvvm.mma_layout<col>} : !llvm.ptr<3>, i32, i32, i32, i32
      gpu.return
    }
  }
}
