// A math op lowers to a libdevice call (__nv_expf), linked and inlined before PTX.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @exp(%x: !llvm.ptr, %y: !llvm.ptr) kernel {
      %tid = gpu.thread_id x
      %i = arith.index_cast %tid : index to i64
      %px = llvm.getelementptr %x[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
      %py = llvm.getelementptr %y[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
      %v = llvm.load %px : !llvm.ptr -> f32
      %e = math.exp %v : f32
      llvm.store %e, %py : f32, !llvm.ptr
      gpu.return
    }
  }
}
