// RUN: cute-opt %s -cute-device-pipeline | FileCheck %s --check-prefix=DEVICE
// RUN: cute-opt %s -cute-device-pipeline -cute-lower-launches | FileCheck %s
// RUN: cute-compile %s --arch=sm_90a --emit=ptx | FileCheck %s --check-prefix=PTX

// A kernel argument listed in cute.grid_constant (a TMA descriptor) becomes a 128-byte,
// 64-byte aligned by-value parameter with __grid_constant__, and the launch passes the host's
// pointer to those bytes instead of a stack copy of the pointer.
// DEVICE: llvm.func @k(%{{.*}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant}, %{{.*}}: i32)
// DEVICE-NOT: cute.grid_constant
// CHECK-LABEL: func.func @host
// CHECK-DAG: %[[PARAMS:.*]] = llvm.alloca %{{.*}} x !llvm.ptr
// CHECK-DAG: %[[SLOT:.*]] = llvm.alloca %{{.*}} x i32
// CHECK: %[[E0:.*]] = llvm.getelementptr %[[PARAMS]][0]
// CHECK: llvm.store %[[DESC:.*]], %[[E0]]
// CHECK: llvm.store %{{.*}}, %[[SLOT]]
// CHECK: %[[E1:.*]] = llvm.getelementptr %[[PARAMS]][1]
// CHECK: llvm.store %[[SLOT]], %[[E1]]
// PTX: .param .align 64 .b8 k_param_0[128]
// PTX: cvta.param.u64
// PTX: prefetch.tensormap
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @k(%desc: !llvm.ptr, %x: i32) kernel attributes {cute.grid_constant = array<i32: 0>} {
      nvvm.prefetch.tensormap %desc : !llvm.ptr
      gpu.return
    }
  }
  func.func @host(%desc: !llvm.ptr, %x: i32) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @kernels::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%desc : !llvm.ptr, %x : i32)
    return
  }
}
