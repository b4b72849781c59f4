/*===- cute_torch/compiler.h - the compiler library's public API ---------===*
 *
 * A C API on purpose: libcute_compiler carries its own (static, hidden) copy of libstdc++ and
 * of LLVM/MLIR, so nothing C++ (exceptions, std::string, MLIR types) may cross this boundary.
 * Everything structured crosses as JSON.
 *
 *===----------------------------------------------------------------------===*/

#ifndef CUTE_TORCH_COMPILER_H
#define CUTE_TORCH_COMPILER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUTE_COMPILER_API __attribute__((visibility("default")))

typedef struct CuteArtifact CuteArtifact;

/* Compiles a module of host `func.func`s and `gpu.module`s of kernels.
 *
 * options_json (all optional):
 *   arch           "sm_80" | "sm_86" | "sm_89" | "sm_90" | "sm_90a" (default "sm_90a")
 *   opt_level      0..3 for device code (LLVM and ptxas -O), default 3; host code is always
 *                  compiled unoptimized
 *   fmad           bool: a float multiply and an add of its result may become one fma (one
 *                  rounding), as nvcc's --fmad; default false
 *   ptxas_options  list of extra ptxas/nvJitLink options, e.g. ["-O3"]
 *   line_info      bool: keep source lines in the CUBIN (ptxas -lineinfo)
 *   cuda_home      toolkit root, default $CUDA_HOME or /usr/local/cuda
 *   cubin_backend  "nvjitlink" | "ptxas" | "auto" (nvJitLink when its library loads, except
 *                  ptxas for setmaxnreg kernels, or where ptxas's CUBIN spills less)
 *   nvjitlink_path path of libnvJitLink.so (default: found under cuda_home)
 *   nvdisasm_path  the "sass" stage's disassembler (default: cuda_home's nvdisasm or cuobjdump)
 *   keep           stages kept in memory: "mlir", "nvvm", "llvm", "ptx", "cubin", "host", "sass"
 *                  ("ptx" and "host_object" are always kept)
 *   dump_dir       if set, kept stages are also written there as <name>.<ext>
 *   name           base name for dumps and messages, default "module"
 *   source_name    file name given to locations of the MLIR text, default "<mlir>"
 *
 * host symbols: external functions the host code may call (the runtime's launch entry).
 * Returns an artifact, or NULL and a JSON error in *error_json (free it with cute_free_string):
 *   {"kind": "parse"|"pass"|"codegen"|"ptxas"|"toolkit"|"jit"|"options"|"internal",
 *    "message": "...", "diagnostics": [{"file","line","col","severity","message"}],
 *    "ptx_path": "...", "command": "..."}
 */
CUTE_COMPILER_API CuteArtifact *cute_compile(const char *mlir, size_t mlir_size,
                                             const char *options_json,
                                             const char *const *symbol_names,
                                             void *const *symbol_addresses, size_t num_symbols,
                                             char **error_json);

/* Rebuilds an artifact from the host code of an earlier compile, the metadata JSON and the
 * CUBINs (what the disk cache stores). The host code is its "host_object" stage (an ELF object:
 * linked, nothing compiled) or its "host" stage (LLVM dialect MLIR: JIT-compiled again).
 * Errors as for cute_compile. */
CUTE_COMPILER_API CuteArtifact *
cute_load_artifact(const char *host_code, size_t host_size, const char *metadata_json,
                   const void *const *cubins, const size_t *cubin_sizes,
                   const char *const *module_names, size_t num_cubins,
                   const char *const *symbol_names, void *const *symbol_addresses,
                   size_t num_symbols, char **error_json);

/* Metadata as JSON: kernels (module, name, index, params [{type,size,align}], registers,
 * spill_stores, spill_loads, static_smem, stack_frame, block_dims, cluster_dims), host functions
 * (name, args [types], result), arch, cubin backend, stages, per-stage timings in ms. Owned by
 * the artifact. */
CUTE_COMPILER_API const char *cute_artifact_metadata(const CuteArtifact *artifact);

CUTE_COMPILER_API size_t cute_artifact_num_cubins(const CuteArtifact *artifact);
/* The CUBIN of the index-th gpu.module, with the module's name. */
CUTE_COMPILER_API const void *cute_artifact_cubin(const CuteArtifact *artifact, size_t index,
                                                  size_t *size, const char **module_name);
/* A kept stage's text or bytes, or NULL if that stage was not kept. */
CUTE_COMPILER_API const char *cute_artifact_stage(const CuteArtifact *artifact, const char *stage,
                                                  size_t *size);
/* The packed host entry of a host function: void entry(void **args), where args[i] points at
 * the i-th argument. NULL if there is no such function. */
CUTE_COMPILER_API void *cute_artifact_host_entry(const CuteArtifact *artifact,
                                                 const char *function);
CUTE_COMPILER_API void cute_artifact_destroy(CuteArtifact *artifact);
CUTE_COMPILER_API void cute_free_string(char *string);
CUTE_COMPILER_API const char *cute_compiler_version(void);
/* The stages `keep` accepts, in pipeline order, comma-separated ("mlir,nvvm,...,sass"). */
CUTE_COMPILER_API const char *cute_compiler_stages(void);
/* The archs `arch` accepts, comma-separated ("sm_80,...,sm_90a"). */
CUTE_COMPILER_API const char *cute_compiler_archs(void);

#ifdef __cplusplus
}
#endif

#endif /* CUTE_TORCH_COMPILER_H */
