// Field-op check and register-only micro-benchmark of one version of the arithmetic header.
//
// Compiled once per variant by bench/fieldops.py into one shared library, each TU in its own
// namespace (FO_NS) so the variants' inline functions never meet:
//   cur   templates/gen_common.cuh           (device carry-chain forms)
//   port  templates/gen_common.cuh -DEXPS_PORTABLE   (the portable C forms, run on the device:
//                                                     the arithmetic the host check runs)
//
// <ns>_check(op, a, b, out, n): out[i] = op(a[i], b[i]) on the GPU (host buffers in and out;
//   extension ops read and write 3 words per element).
// <ns>_bench(op, blocks, iters, reps, ms): register-only loop, no memory traffic but one store per
//   thread at the end; `reps` timed launches (CUDA events) into ms[]. Returns 0 or a cudaError_t.
#include <stdint.h>
#include <stddef.h>
#include <cuda_runtime.h>

#ifndef FO_NS
#define FO_NS cur
#endif
#define FO_CAT2(a, b) a##b
#define FO_CAT(a, b) FO_CAT2(a, b)

namespace FO_NS {
#include "gen_common.cuh"
#define FO_MUL33(x, y) gl3_mul(x, y)
#define FO_MULADD33(x, y, z) gl3_add(gl3_mul(x, y), z)

enum { ADD = 0, SUB = 1, MUL = 2, NEG = 3, MUL33 = 4, MUL31 = 5, ADD33 = 6, SUB33 = 7, INV = 8, MIX = 9,
       MULADD33 = 10 };

template <int OP>
__global__ void check_k(const uint64_t* __restrict__ a, const uint64_t* __restrict__ b, uint64_t* __restrict__ o,
                        size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        if (OP == ADD) o[i] = gl_add(a[i], b[i]);
        if (OP == SUB) o[i] = gl_sub(a[i], b[i]);
        if (OP == MUL) o[i] = gl_mul(a[i], b[i]);
        if (OP == NEG) o[i] = gl_neg(a[i]);
        if (OP == INV) o[i] = gl_inv(a[i]);
        if (OP == MUL33 || OP == MUL31 || OP == ADD33 || OP == SUB33 || OP == MULADD33) {
            gl3 x = gl3_make(a[3 * i], a[3 * i + 1], a[3 * i + 2]);
            gl3 y = gl3_make(b[3 * i], b[3 * i + 1], b[3 * i + 2]);
            gl3 r = OP == MUL33 ? FO_MUL33(x, y) : OP == MUL31 ? gl3_mul31(x, b[3 * i])
                  : OP == ADD33 ? gl3_add(x, y) : OP == SUB33 ? gl3_sub(x, y) : FO_MULADD33(x, y, x);
            o[3 * i] = r.v0; o[3 * i + 1] = r.v1; o[3 * i + 2] = r.v2;
        }
    }
}

__device__ __forceinline__ uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Independent chains in registers; every operand changes every iteration (nothing to hoist), except
// in MIX, which is the anchors' Q-like loop (c, s fixed as a challenge operand would be).
template <int OP>
__global__ void __launch_bounds__(256) bench_k(uint64_t* sink, uint64_t seed, int iters) {
    const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint64_t x[9];
#pragma unroll
    for (int j = 0; j < 9; ++j) x[j] = mix64(seed + 9 * tid + j);
    uint64_t acc = 0;
    if (OP == ADD || OP == SUB || OP == MUL) {
        for (int it = 0; it < iters; ++it) {
            uint64_t y[8];
#pragma unroll
            for (int j = 0; j < 8; ++j)
                y[j] = OP == ADD ? gl_add(x[j], x[(j + 1) & 7]) : OP == SUB ? gl_sub(x[j], x[(j + 3) & 7])
                                                                : gl_mul(x[j], x[(j + 1) & 7]);
#pragma unroll
            for (int j = 0; j < 8; ++j) x[j] = y[j];
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) acc ^= x[j];
    } else if (OP == MUL33) {
        gl3 a = gl3_make(x[0], x[1], x[2]), b = gl3_make(x[3], x[4], x[5]), c = gl3_make(x[6], x[7], x[8]);
        for (int it = 0; it < iters; ++it) {
            gl3 a2 = FO_MUL33(a, b), b2 = FO_MUL33(b, c), c2 = FO_MUL33(c, a);
            a = a2; b = b2; c = c2;
        }
        acc = a.v0 ^ a.v1 ^ a.v2 ^ b.v0 ^ b.v1 ^ b.v2 ^ c.v0 ^ c.v1 ^ c.v2;
    } else if (OP == MIX) {
        gl3 a = gl3_make(x[0], x[1], x[2]), b = gl3_make(x[3], x[4], x[5]), c = gl3_make(x[6], x[7], x[8]);
        gl3 a1 = gl3_make(x[8], x[0], x[4]), b1 = gl3_make(x[2], x[6], x[1]);
        const uint64_t s = x[5] ^ x[7];
        for (int it = 0; it < iters; ++it) {
            a = FO_MULADD33(a, c, b);
            b = gl3_add(gl3_mul31(b, s), a);
            a1 = FO_MULADD33(a1, c, b1);
            b1 = gl3_add(gl3_mul31(b1, s), a1);
        }
        acc = a.v0 ^ a.v1 ^ a.v2 ^ b.v0 ^ b.v1 ^ b.v2 ^ a1.v0 ^ a1.v1 ^ a1.v2 ^ b1.v0 ^ b1.v1 ^ b1.v2;
    }
    sink[tid] = acc;
}

template <int OP>
static int check_run(const uint64_t* ha, const uint64_t* hb, uint64_t* ho, size_t n) {
    const size_t w = (OP == MUL33 || OP == MUL31 || OP == ADD33 || OP == SUB33 || OP == MULADD33) ? 3 : 1;
    uint64_t *a = 0, *b = 0, *o = 0;
    cudaError_t e = cudaMalloc(&a, w * n * 8);
    if (!e) e = cudaMalloc(&b, w * n * 8);
    if (!e) e = cudaMalloc(&o, w * n * 8);
    if (!e) e = cudaMemcpy(a, ha, w * n * 8, cudaMemcpyHostToDevice);
    if (!e) e = cudaMemcpy(b, hb, w * n * 8, cudaMemcpyHostToDevice);
    if (!e) e = cudaMemset(o, 0xA5, w * n * 8);     // poison: every word must be written
    if (!e) {
        check_k<OP><<<4096, 256>>>(a, b, o, n);
        e = cudaGetLastError();
    }
    if (!e) e = cudaDeviceSynchronize();
    if (!e) e = cudaMemcpy(ho, o, w * n * 8, cudaMemcpyDeviceToHost);
    cudaFree(a); cudaFree(b); cudaFree(o);
    return (int)e;
}

template <int OP>
static int bench_run(int blocks, int iters, int reps, float* ms) {
    uint64_t* sink = 0;
    cudaEvent_t t0, t1;
    cudaError_t e = cudaMalloc(&sink, (size_t)blocks * 256 * 8);
    if (e) return (int)e;
    cudaEventCreate(&t0);
    cudaEventCreate(&t1);
    bench_k<OP><<<blocks, 256>>>(sink, 1, iters);        // warm-up (module load)
    e = cudaGetLastError();
    for (int r = 0; !e && r < reps; ++r) {
        cudaEventRecord(t0);
        bench_k<OP><<<blocks, 256>>>(sink, 2 + r, iters);
        cudaEventRecord(t1);
        e = cudaGetLastError();
        if (!e) e = cudaEventSynchronize(t1);
        if (!e) e = cudaEventElapsedTime(&ms[r], t0, t1);
    }
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    cudaFree(sink);
    return (int)e;
}
}  // namespace FO_NS

extern "C" {
__attribute__((visibility("default"))) int FO_CAT(FO_NS, _check)(int op, const uint64_t* a, const uint64_t* b,
                                                                 uint64_t* o, size_t n) {
    using namespace FO_NS;
    switch (op) {
    case ADD: return check_run<ADD>(a, b, o, n);
    case SUB: return check_run<SUB>(a, b, o, n);
    case MUL: return check_run<MUL>(a, b, o, n);
    case NEG: return check_run<NEG>(a, b, o, n);
    case MUL33: return check_run<MUL33>(a, b, o, n);
    case MUL31: return check_run<MUL31>(a, b, o, n);
    case ADD33: return check_run<ADD33>(a, b, o, n);
    case SUB33: return check_run<SUB33>(a, b, o, n);
    case INV: return check_run<INV>(a, b, o, n);
    case MULADD33: return check_run<MULADD33>(a, b, o, n);
    default: return -1;
    }
}

__attribute__((visibility("default"))) int FO_CAT(FO_NS, _sms)(void) {
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) return -1;
    return sms;
}

__attribute__((visibility("default"))) int FO_CAT(FO_NS, _bench)(int op, int blocks, int iters, int reps,
                                                                 float* ms) {
    using namespace FO_NS;
    switch (op) {
    case ADD: return bench_run<ADD>(blocks, iters, reps, ms);
    case SUB: return bench_run<SUB>(blocks, iters, reps, ms);
    case MUL: return bench_run<MUL>(blocks, iters, reps, ms);
    case MUL33: return bench_run<MUL33>(blocks, iters, reps, ms);
    case MIX: return bench_run<MIX>(blocks, iters, reps, ms);
    default: return -1;
    }
}
}
