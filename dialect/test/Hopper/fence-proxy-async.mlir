// RUN: cute-compile %s --arch=sm_90a --emit=ptx --backend=ptxas | FileCheck %s

// fence.proxy.async: generic-proxy writes to shared memory become visible to TMA (the async proxy).
// The NVVM op goes through the device pipeline, LLVM 19's NVPTX backend and ptxas (the
// backend flag makes cute-compile assemble the PTX too, so ptxas checks what is checked here).

// CHECK: fence.proxy.async.shared::cta;
// CHECK: fence.proxy.async;
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @k() kernel {
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async>}
      gpu.return
    }
  }
}
