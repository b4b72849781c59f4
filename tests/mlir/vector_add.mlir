// c[i] = a[i] + b[i] for i < n: a kernel in a gpu.module and the host function launching it.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @vadd(%a: !llvm.ptr, %b: !llvm.ptr, %c: !llvm.ptr, %n: i32) kernel {
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %tid = gpu.thread_id x
      %base = arith.muli %bid, %bdim : index
      %i = arith.addi %base, %tid : index
      %i32 = arith.index_cast %i : index to i32
      %inside = arith.cmpi slt, %i32, %n : i32
      scf.if %inside {
        %i64 = arith.index_cast %i : index to i64
        %pa = llvm.getelementptr %a[%i64] : (!llvm.ptr, i64) -> !llvm.ptr, f32
        %pb = llvm.getelementptr %b[%i64] : (!llvm.ptr, i64) -> !llvm.ptr, f32
        %pc = llvm.getelementptr %c[%i64] : (!llvm.ptr, i64) -> !llvm.ptr, f32
        %x = llvm.load %pa : !llvm.ptr -> f32
        %y = llvm.load %pb : !llvm.ptr -> f32
        %z = arith.addf %x, %y : f32
        llvm.store %z, %pc : f32, !llvm.ptr
      }
      gpu.return
    }
  }

  func.func @vector_add(%a: !llvm.ptr, %b: !llvm.ptr, %c: !llvm.ptr, %n: i32) {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    %c255 = arith.constant 255 : index
    %n_index = arith.index_cast %n : i32 to index
    %padded = arith.addi %n_index, %c255 : index
    %blocks = arith.divui %padded, %c256 : index
    gpu.launch_func @kernels::@vadd blocks in (%blocks, %c1, %c1) threads in (%c256, %c1, %c1)
        args(%a : !llvm.ptr, %b : !llvm.ptr, %c : !llvm.ptr, %n : i32)
    return
  }
}
