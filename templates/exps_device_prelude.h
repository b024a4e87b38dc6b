// exps-codegen: the device prelude. A device-only compile (`nvcc -c -fatbin` / `-cubin`
// of a generated TU) sees this file as `cuda_runtime.h`: nvcc force-includes that name
// (`-include cuda_runtime.h` in its preprocessing step) and gen_common.cuh includes it, and both
// find this one first (`-Iexps_prelude`, a directory of the compile's work dir). The full header is
// ~37,000 lines (the runtime API, every math and intrinsic declaration, the C++ library), which
// costs ~0.2 s of gcc and cicc on every compile; the device code of a generated TU needs only the
// CUDA keywords, the built-in variables and the three intrinsics below.
//
// The words stay nvcc's: a build uses this prelude only after `codegen/build/prelude.py` has
// compiled a probe TU with it and with the full header and got the same bytes (otherwise, e.g.
// another CUDA release, every compile includes the full header), and
// tests/test_prelude.py compiles real kernels both ways and compares the fatbins byte for byte.
#ifndef EXPS_DEVICE_PRELUDE_H
#define EXPS_DEVICE_PRELUDE_H

#include <stddef.h>

// __device__, __global__, __forceinline__, __launch_bounds__, ... and the vector types of the
// built-in variables (threadIdx, blockIdx, blockDim, gridDim), as cuda_runtime.h includes them
#define __CUDA_INCLUDE_COMPILER_INTERNAL_HEADERS__
#include "crt/host_defines.h"
#include "builtin_types.h"
#include "device_launch_parameters.h"
#undef __CUDA_INCLUDE_COMPILER_INTERNAL_HEADERS__

// The intrinsics gen_common.cuh uses, declared as crt/device_functions.h and sm_32_intrinsics.hpp
// declare them (the first two are compiler built-ins; __ldg of a u64 is this asm statement).
extern "C++" {
__device__ __cudart_builtin__ __device_builtin__ unsigned long long int __umul64hi(unsigned long long int x,
                                                                                   unsigned long long int y);
__device__ __cudart_builtin__ __device_builtin__ int __clzll(long long int x);
static __device__ __inline__ unsigned long __ldg(const unsigned long* ptr) {
    unsigned long ret;
    asm volatile("ld.global.nc.u64 %0, [%1];" : "=l"(ret) : "l"(ptr));
    return ret;
}
}

#endif
