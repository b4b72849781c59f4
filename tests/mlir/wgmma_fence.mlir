// A Hopper-only instruction (wgmma.fence) as inline PTX: compiles for sm_90a only.
module attributes {gpu.container_module} {
  gpu.module @hopper {
    gpu.func @fence(%out: !llvm.ptr) kernel {
      llvm.inline_asm has_side_effects "wgmma.fence.sync.aligned;", "" : () -> ()
      %one = arith.constant 1 : i32
      llvm.store %one, %out : i32, !llvm.ptr
      gpu.return
    }
  }
}
