// Shared by bench/mul33_forms.cu and bench/fma_pipe.cu: the 3x3 product + add kernels they compare
// forms with, and their timer. Op is a struct with `static gl3 f(gl3 a, gl3 b, gl3 c)` (a * b + c
// right mod p, in the form under test).
#ifndef EXPS_M33_BENCH_CUH
#define EXPS_M33_BENCH_CUH
#include "gen_common.cuh"
#include <algorithm>
#include <vector>

// Register-only loop: 4 independent chains per thread, x_k = x_k * y_k + z with y_k the chain's
// previous x (row-varying, so nothing is hoisted).
template <class Op> __global__ void m33_chain(const gl3* in, gl3* out, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    gl3 x0 = in[4*i], x1 = in[4*i+1], x2 = in[4*i+2], x3 = in[4*i+3];
    gl3 y0 = x3, y1 = x2, y2 = x1, y3 = x0;
    gl3 z = gl3_make(gl_add(x0.v0, 7), x1.v1, x2.v2);
    for (int k = 0; k < iters; ++k) {
        gl3 n0 = Op::f(x0, y0, z), n1 = Op::f(x1, y1, z), n2 = Op::f(x2, y2, z), n3 = Op::f(x3, y3, z);
        y0 = x0; y1 = x1; y2 = x2; y3 = x3;
        x0 = n0; x1 = n1; x2 = n2; x3 = n3;
    }
    out[i] = gl3_add(gl3_add(x0, x1), gl3_add(x2, x3));
}

// Register-only loop of base-field products: 8 independent chains per thread, x_j = Op::f(j, x_j, y)
// with y the row's input word (bench/fma_pipe.cu, bench/fp64_pipe.cu).
template <class Op> __global__ void mul_chains8(const uint64_t* in, uint64_t* out, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    uint64_t x[8], y = in[i] | 1;
    for (int j = 0; j < 8; ++j) x[j] = in[i + j];
    for (int k = 0; k < iters; ++k)
#pragma unroll
        for (int j = 0; j < 8; ++j) x[j] = Op::f(j, x[j], y);
    uint64_t s = 0;
    for (int j = 0; j < 8; ++j) s ^= x[j];
    out[i] = s;
}

// One product + add per row, stored canonical (forms that are right mod p compare equal).
template <class Op> __global__ void m33_once(const gl3* a, const gl3* b, const gl3* c, gl3* o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { gl3 r = Op::f(a[i], b[i], c[i]); o[i] = gl3_make(gl_canon(r.v0), gl_canon(r.v1), gl_canon(r.v2)); }
}

// Median of 7 timed launches (CUDA events) after one warm-up.
template <typename F> float median_ms(F launch) {
    cudaEvent_t s, t; cudaEventCreate(&s); cudaEventCreate(&t); std::vector<float> ms;
    launch();
    for (int r = 0; r < 7; ++r) { cudaEventRecord(s); launch(); cudaEventRecord(t); cudaEventSynchronize(t); float m; cudaEventElapsedTime(&m, s, t); ms.push_back(m); }
    std::sort(ms.begin(), ms.end()); return ms[3];
}
#endif
