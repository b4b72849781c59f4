// RUN: cute-compile %s --arch=sm_90a --emit=ptx --backend=ptxas | FileCheck %s

// ldmatrix: four 8x8 b16 matrices from shared memory into mma.sync fragments (the Ampere path).
// The NVVM op goes through the device pipeline, LLVM 19's NVPTX backend and ptxas (the
// backend flag makes cute-compile assemble the PTX too, so ptxas checks what is checked here).

// CHECK: ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, [%rd{{[0-9]+}}];
module attributes {gpu.container_module} {
  gpu.module @m {
    llvm.mlir.global internal @tile() {addr_space = 3 : i32, alignment = 128 : i64} : !llvm.array<2048 x i8>
    gpu.func @k(%offset: i32, %out: !llvm.ptr<1>) kernel {
      %base = llvm.mlir.addressof @tile : !llvm.ptr<3>
      %p = llvm.getelementptr %base[%offset] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      %r = nvvm.ldmatrix %p {num = 4 : i32, layout = #nvvm.mma_layout<row>} : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32, i32, i32)>
      %r3 = llvm.extractvalue %r[3] : !llvm.struct<(i32, i32, i32, i32)>
      llvm.store %r3, %out : i32, !llvm.ptr<1>
      gpu.return
    }
  }
}
