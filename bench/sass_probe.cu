// One field op per kernel, for reading and counting its SASS (`python3 bench/sass_pipes.py probe`).
#include "gen_common.cuh"
extern "C" __global__ void k_add(const uint64_t* a, const uint64_t* b, uint64_t* o) { int i = threadIdx.x; o[i] = gl_add(a[i], b[i]); }
extern "C" __global__ void k_sub(const uint64_t* a, const uint64_t* b, uint64_t* o) { int i = threadIdx.x; o[i] = gl_sub(a[i], b[i]); }
extern "C" __global__ void k_mul(const uint64_t* a, const uint64_t* b, uint64_t* o) { int i = threadIdx.x; o[i] = gl_mul(a[i], b[i]); }
extern "C" __global__ void k_mul3(const gl3* a, const gl3* b, gl3* o) { int i = threadIdx.x; o[i] = gl3_mul(a[i], b[i]); }
// The value path's forms: a 3x3 product as gl3_mul_v + canon of each component, and a base-field
// product left as an accumulator (gl_acc_mul: the leanest exact product here).
extern "C" __global__ void k_mul3v(const gl3* a, const gl3* b, gl3* o) {
    int i = threadIdx.x; const gl3 r = gl3_mul_v(a[i], b[i]); o[i] = gl3_make(gl_canon(r.v0), gl_canon(r.v1), gl_canon(r.v2));
}
extern "C" __global__ void k_accmul(const uint64_t* a, const uint64_t* b, uint64_t* o) {
    int i = threadIdx.x; const gl_acc r = gl_acc_mul(a[i], b[i]); o[i] = r.lo ^ r.hi;   // 12 + the xor
}
