// RUN: cute-compile %s --arch=sm_90a --emit=ptx --backend=ptxas | FileCheck %s

// cp.async.bulk.tensor global -> shared::cluster (a TMA load), completing on an mbarrier, with and without multicast to the CTAs of a cluster.
// The NVVM op goes through the device pipeline, LLVM 19's NVPTX backend and ptxas (the
// backend flag makes cute-compile assemble the PTX too, so ptxas checks what is checked here).

// CHECK: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r{{[0-9]+}}], [%rd{{[0-9]+}}, {%r{{[0-9]+}},%r{{[0-9]+}}} ], [%r{{[0-9]+}}];
// CHECK: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%r{{[0-9]+}}], [%rd{{[0-9]+}}, {%r{{[0-9]+}},%r{{[0-9]+}}} ], [%r{{[0-9]+}}], %rs{{[0-9]+}};
module attributes {gpu.container_module} {
  gpu.module @m {
    llvm.mlir.global internal @tile() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<16384 x i8>
    llvm.mlir.global internal @bar() {addr_space = 3 : i32, alignment = 8 : i64} : i64
    gpu.func @k(%desc: !llvm.ptr, %x: i32, %y: i32, %mask: i16) kernel {
      %tile = llvm.mlir.addressof @tile : !llvm.ptr<3>
      %bar = llvm.mlir.addressof @bar : !llvm.ptr<3>
      nvvm.cp.async.bulk.tensor.shared.cluster.global %tile, %desc, %bar, box[%x, %y] : !llvm.ptr<3>, !llvm.ptr
      nvvm.cp.async.bulk.tensor.shared.cluster.global %tile, %desc, %bar, box[%x, %y] multicast_mask = %mask : !llvm.ptr<3>, !llvm.ptr
      gpu.return
    }
  }
}
