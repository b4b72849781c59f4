# Link MLIR and LLVM from their static archives only.
#
# Debian's LLVM 19 is built with LLVM_LINK_LLVM_DYLIB, so MLIR's exported CMake targets drag in
# libLLVM.so.19 (which needs libz3, absent on the GPU machine). Linking both the dylib and the
# archives aborts at load time (duplicate cl::opt registrations), so we never use MLIR's targets
# for linking: only their include directories, and a linker group over the archives.
find_package(MLIR REQUIRED CONFIG)
message(STATUS "Using MLIRConfig.cmake in: ${MLIR_DIR} (LLVM ${LLVM_PACKAGE_VERSION})")
if(NOT LLVM_PACKAGE_VERSION VERSION_GREATER_EQUAL 19 OR LLVM_PACKAGE_VERSION VERSION_GREATER_EQUAL 20)
  message(FATAL_ERROR "cute_torch needs LLVM/MLIR 19, found ${LLVM_PACKAGE_VERSION}")
endif()
list(APPEND CMAKE_MODULE_PATH "${MLIR_CMAKE_DIR}" "${LLVM_CMAKE_DIR}")
include(TableGen)
include(AddLLVM)
include(AddMLIR)

include_directories(SYSTEM ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
add_definitions(${LLVM_DEFINITIONS})
if(NOT LLVM_ENABLE_RTTI)
  set(CUTE_NO_RTTI_FLAGS -fno-rtti)
endif()

file(GLOB CUTE_MLIR_ARCHIVES "${LLVM_LIBRARY_DIR}/libMLIR*.a")
# Test-only and C-API archives are never needed and only slow the link down.
list(FILTER CUTE_MLIR_ARCHIVES EXCLUDE REGEX "(TestPasses|TestDialect|libMLIRCAPI|libMLIRTest)")
file(GLOB CUTE_LLVM_ARCHIVES "${LLVM_LIBRARY_DIR}/libLLVM*.a")
list(FILTER CUTE_LLVM_ARCHIVES EXCLUDE REGEX "(BOLT|Exegesis|TableGen|FuzzerCLI|libLLVMTest)")

set(CUTE_MLIR_LINK
  -Wl,--start-group ${CUTE_MLIR_ARCHIVES} ${CUTE_LLVM_ARCHIVES} -Wl,--end-group
  z zstd tinfo pthread dl m)

# Used by the compiler library and by cute-opt alike.
function(cute_link_mlir_static target)
  target_link_libraries(${target} PRIVATE ${CUTE_MLIR_LINK})
  target_compile_options(${target} PRIVATE ${CUTE_NO_RTTI_FLAGS})
endfunction()
