// RUN: cute-compile %s --arch=sm_90a --emit=ptx --backend=ptxas | FileCheck %s

// cp.async.bulk.tensor shared::cta -> global (a TMA store) in a bulk group, after the proxy fence that makes the threads' shared-memory writes visible to the async proxy.
// The NVVM op goes through the device pipeline, LLVM 19's NVPTX backend and ptxas (the
// backend flag makes cute-compile assemble the PTX too, so ptxas checks what is checked here).

// CHECK: fence.proxy.async.shared::cta;
// CHECK: cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd{{[0-9]+}}, {%r{{[0-9]+}}, %r{{[0-9]+}}} ], [%r{{[0-9]+}}];
// CHECK: cp.async.bulk.commit_group;
// CHECK: cp.async.bulk.wait_group.read 0;
module attributes {gpu.container_module} {
  gpu.module @m {
    llvm.mlir.global internal @tile() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<16384 x i8>
    gpu.func @k(%desc: !llvm.ptr, %x: i32, %y: i32) kernel {
      %tile = llvm.mlir.addressof @tile : !llvm.ptr<3>
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      nvvm.cp.async.bulk.tensor.global.shared.cta %desc, %tile, box[%x, %y] : !llvm.ptr, !llvm.ptr<3>, i32, i32
      nvvm.cp.async.bulk.commit.group
      nvvm.cp.async.bulk.wait_group 0 {read}
      gpu.return
    }
  }
}
