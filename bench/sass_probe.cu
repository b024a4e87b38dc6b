// One field op per kernel, for reading and counting its SASS (bench/sass_count.sh).
#if defined(EXPS_GL_MUL_V050) || defined(EXPS_GL_MUL_W5)
#include "gl_mul_variants.cuh"   // bench/baseline: the gl_mul forms not adopted
#endif
#include "gen_common.cuh"
extern "C" __global__ void k_add(const uint64_t* a, const uint64_t* b, uint64_t* o) { int i = threadIdx.x; o[i] = gl_add(a[i], b[i]); }
extern "C" __global__ void k_sub(const uint64_t* a, const uint64_t* b, uint64_t* o) { int i = threadIdx.x; o[i] = gl_sub(a[i], b[i]); }
extern "C" __global__ void k_mul(const uint64_t* a, const uint64_t* b, uint64_t* o) { int i = threadIdx.x; o[i] = gl_mul(a[i], b[i]); }
extern "C" __global__ void k_mul3(const gl3* a, const gl3* b, gl3* o) { int i = threadIdx.x; o[i] = gl3_mul(a[i], b[i]); }
