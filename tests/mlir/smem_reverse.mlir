// Reverses each block's elements through dynamic shared memory. Launched with more than 48 KB
// of dynamic smem so the runtime must raise the kernel's limit; optionally as 2-CTA clusters.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x f32>
    gpu.func @reverse(%x: !llvm.ptr, %y: !llvm.ptr) kernel {
      %tid = gpu.thread_id x
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %c1 = arith.constant 1 : index
      %base = arith.muli %bid, %bdim : index
      %i = arith.addi %base, %tid : index
      %i64 = arith.index_cast %i : index to i64
      %t64 = arith.index_cast %tid : index to i64
      %last = arith.subi %bdim, %c1 : index
      %r = arith.subi %last, %tid : index
      %r64 = arith.index_cast %r : index to i64
      %shared = llvm.mlir.addressof @smem : !llvm.ptr<3>
      %px = llvm.getelementptr %x[%i64] : (!llvm.ptr, i64) -> !llvm.ptr, f32
      %v = llvm.load %px : !llvm.ptr -> f32
      %ps = llvm.getelementptr %shared[%t64] : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, f32
      llvm.store %v, %ps : f32, !llvm.ptr<3>
      gpu.barrier
      %pr = llvm.getelementptr %shared[%r64] : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, f32
      %w = llvm.load %pr : !llvm.ptr<3> -> f32
      %py = llvm.getelementptr %y[%i64] : (!llvm.ptr, i64) -> !llvm.ptr, f32
      llvm.store %w, %py : f32, !llvm.ptr
      gpu.return
    }
  }

  func.func @reverse_blocks(%x: !llvm.ptr, %y: !llvm.ptr, %blocks: i32, %threads: i32, %smem: i32) {
    %c1 = arith.constant 1 : index
    %b = arith.index_cast %blocks : i32 to index
    %t = arith.index_cast %threads : i32 to index
    gpu.launch_func @kernels::@reverse blocks in (%b, %c1, %c1) threads in (%t, %c1, %c1)
        dynamic_shared_memory_size %smem args(%x : !llvm.ptr, %y : !llvm.ptr)
    return
  }

  func.func @reverse_clusters(%x: !llvm.ptr, %y: !llvm.ptr, %blocks: i32, %threads: i32, %smem: i32) {
    %c1 = arith.constant 1 : index
    %b = arith.index_cast %blocks : i32 to index
    %t = arith.index_cast %threads : i32 to index
    gpu.launch_func @kernels::@reverse blocks in (%b, %c1, %c1) threads in (%t, %c1, %c1)
        dynamic_shared_memory_size %smem args(%x : !llvm.ptr, %y : !llvm.ptr) {cute.cluster = array<i32: 2, 1, 1>}
    return
  }
}
