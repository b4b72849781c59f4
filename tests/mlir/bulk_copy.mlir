// Each block copies two 4 KB chunks of `src` to `dst` through one shared-memory buffer: a single
// thread arms an mbarrier with the chunk's byte count (mbarrier.arrive.expect_tx) and issues a
// bulk copy that completes on it; every thread waits on the barrier's phase (try_wait.parity:
// phase 0 for the first chunk, 1 for the second) and then writes its 16 bytes out.
// LLVM 19 has no intrinsic for the non-tensor bulk copy, so that one instruction is inline PTX;
// the mbarrier ops are NVVM ops.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    llvm.mlir.global internal @tile() {addr_space = 3 : i32, alignment = 128 : i64} : !llvm.array<4096 x i8>
    llvm.mlir.global internal @bar() {addr_space = 3 : i32, alignment = 8 : i64} : i64
    gpu.func @bulk_copy(%src: !llvm.ptr<1>, %dst: !llvm.ptr<1>) kernel attributes {nvvm.maxntid = array<i32: 256, 1, 1>} {
      %tile = llvm.mlir.addressof @tile : !llvm.ptr<3>
      %bar = llvm.mlir.addressof @bar : !llvm.ptr<3>
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %bid = nvvm.read.ptx.sreg.ctaid.x : i32
      %c0 = arith.constant 0 : i32
      %c1 = arith.constant 1 : i32
      %c2 = arith.constant 2 : i32
      %c16 = arith.constant 16 : i32
      %chunk = arith.constant 4096 : i32
      %ticks = arith.constant 10000000 : i32
      %leader = arith.cmpi eq, %tid, %c0 : i32
      scf.if %leader {
        nvvm.mbarrier.init.shared %bar, %c1 : !llvm.ptr<3>, i32
        nvvm.fence.mbarrier.init
      }
      nvvm.barrier0
      %tile32 = llvm.ptrtoint %tile : !llvm.ptr<3> to i32
      %bar32 = llvm.ptrtoint %bar : !llvm.ptr<3> to i32
      scf.for %phase = %c0 to %c2 step %c1 : i32 {
        // Byte offset of this block's chunk: (bid * 2 + phase) * 4096.
        %twice = arith.muli %bid, %c2 : i32
        %index = arith.addi %twice, %phase : i32
        %offset = arith.muli %index, %chunk : i32
        %offset64 = arith.extui %offset : i32 to i64
        scf.if %leader {
          %from = llvm.getelementptr %src[%offset64] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i8
          nvvm.mbarrier.arrive.expect_tx.shared %bar, %chunk : !llvm.ptr<3>, i32
          llvm.inline_asm has_side_effects
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], $2, [$3];",
            "r,l,r,r" %tile32, %from, %chunk, %bar32 : (i32, !llvm.ptr<1>, i32, i32) -> ()
        }
        nvvm.mbarrier.try_wait.parity.shared %bar, %phase, %ticks : !llvm.ptr<3>, i32, i32
        %mine = arith.muli %tid, %c16 : i32
        %in = llvm.getelementptr %tile[%mine] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        %v = llvm.load %in {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xf32>
        %at = arith.addi %offset, %mine : i32
        %at64 = arith.extui %at : i32 to i64
        %out = llvm.getelementptr %dst[%at64] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i8
        llvm.store %v, %out {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<1>
        // Everyone has read the buffer before the next chunk overwrites it.
        nvvm.barrier0
      }
      gpu.return
    }
  }

  func.func @bulk_copy(%src: !llvm.ptr<1>, %dst: !llvm.ptr<1>, %blocks: i32) {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    %b = arith.index_cast %blocks : i32 to index
    gpu.launch_func @kernels::@bulk_copy blocks in (%b, %c1, %c1) threads in (%c256, %c1, %c1)
        args(%src : !llvm.ptr<1>, %dst : !llvm.ptr<1>)
    return
  }
}
