// RUN: cute-opt %s -cute-lower-launches | FileCheck %s

// A launch becomes a runtime call with the kernel's index, 64-bit grid/block dims, the cluster
// dims, the dynamic smem size and an array of pointers to stack copies of the arguments.
// CHECK-NOT: gpu.module
// CHECK: llvm.func @cute_rt_launch(i32, i64, i64, i64, i64, i64, i64, i32, i32, i32, i32, !llvm.ptr) -> i32
// CHECK-LABEL: func.func @host
// CHECK-DAG: %[[PARAMS:.*]] = llvm.alloca %{{.*}} x !llvm.ptr
// CHECK-DAG: %[[SLOT:.*]] = llvm.alloca %{{.*}} x i32
// CHECK-DAG: %[[SMEM:.*]] = arith.constant 1024 : i32
// CHECK-DAG: %[[INDEX:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[CX:.*]] = arith.constant 2 : i32
// CHECK: llvm.store %{{.*}}, %[[SLOT]]
// CHECK: %[[ENTRY:.*]] = llvm.getelementptr %[[PARAMS]][0]
// CHECK: llvm.store %[[SLOT]], %[[ENTRY]]
// CHECK: llvm.call @cute_rt_launch(%[[INDEX]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[CX]], %{{.*}}, %{{.*}}, %[[SMEM]], %[[PARAMS]])
module attributes {gpu.container_module} {
  gpu.module @first {
    gpu.func @a(%x: i32) kernel { gpu.return }
  }
  gpu.module @second {
    gpu.func @b(%x: i32) kernel { gpu.return }
  }
  func.func @host(%x: i32) {
    %c1 = arith.constant 1 : index
    %smem = arith.constant 1024 : i32
    gpu.launch_func @second::@b blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
        dynamic_shared_memory_size %smem args(%x : i32) {cute.cluster = array<i32: 2, 1, 1>}
    return
  }
}
