// Issue #14, session 25: can the idle FP64 pipe take part of the base-field products?
// The small Q kernels are bound by the integer pipes (FMA-heavy 76-86% busy, ALU 61-64%, issue
// 62-68%: session 24's Nsight Compute). The FP64 pipe is idle there, so an exact 64x64 product mod p
// in doubles, run beside the integer one, could add throughput if it cost few enough issue slots.
// gl_mul_f64: a, b in 22/22/20-bit limbs, each limb a double by the 2^52 trick (bits 0x4330... | x,
// minus 2^52: exact), the nine limb products summed per column with DFMA onto 2^52 (every column
// < 2^46, so exact and its integer the mantissa's low 52 bits), the five columns shifted into a
// 128-bit (L, H) and reduced as gl_mul_portable does. The same function runs on the host (std::fma)
// and the device (__fma_rn); both are checked against __int128 (host) and gl_mul (device).
// Then register loops, 8 independent chains per thread as bench/fma_pipe.cu: NI chains gl_mul (the
// integer form of templates/gen_common.cuh), 8 - NI chains gl_mul_f64, for NI = 8, 7, 6, 4, 0:
// if no mix beats NI = 8 where the loops have ILP to spare, the FP64 pipe is no lever.
// nvcc -O3 -arch=sm_90 -std=c++17 -DGL64_PARTIALLY_REDUCED -I templates bench/fp64_pipe.cu -o /tmp/f64 && /tmp/f64
// (no GPU: the host check runs, then it says so and exits 0)
#include "m33_bench.cuh"
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

EXPS_HD double f64_of(uint64_t u) {
#ifdef __CUDA_ARCH__
    return __longlong_as_double((long long)u);
#else
    double d; std::memcpy(&d, &u, 8); return d;
#endif
}
EXPS_HD uint64_t bits_of(double d) {
#ifdef __CUDA_ARCH__
    return (uint64_t)__double_as_longlong(d);
#else
    uint64_t u; std::memcpy(&u, &d, 8); return u;
#endif
}
EXPS_HD double fma_rn(double a, double b, double c) {
#ifdef __CUDA_ARCH__
    return __fma_rn(a, b, c);
#else
    return std::fma(a, b, c);
#endif
}

// a * b mod p as some u64 congruent to it (the value path's contract), via the FP64 pipe.
EXPS_HD uint64_t gl_mul_f64(uint64_t a, uint64_t b) {
    const uint64_t MB = 0x4330000000000000ull, K = 0x3FFFFFull, M52 = 0xFFFFFFFFFFFFFull;
    const double M = 4503599627370496.0;  // 2^52
    const double a0 = f64_of(MB | (a & K)) - M, a1 = f64_of(MB | ((a >> 22) & K)) - M, a2 = f64_of(MB | (a >> 44)) - M;
    const double b0 = f64_of(MB | (b & K)) - M, b1 = f64_of(MB | ((b >> 22) & K)) - M, b2 = f64_of(MB | (b >> 44)) - M;
    const uint64_t C0 = bits_of(fma_rn(a0, b0, M)) & M52;
    const uint64_t C1 = bits_of(fma_rn(a0, b1, fma_rn(a1, b0, M))) & M52;
    const uint64_t C2 = bits_of(fma_rn(a0, b2, fma_rn(a1, b1, fma_rn(a2, b0, M)))) & M52;
    const uint64_t C3 = bits_of(fma_rn(a1, b2, fma_rn(a2, b1, M))) & M52;
    const uint64_t C4 = bits_of(fma_rn(a2, b2, M)) & M52;
    // Y = C0 + C1 2^22 + C2 2^44 + C3 2^66 + C4 2^88 = L + H 2^64 (Y = a b < 2^128: H cannot wrap)
    uint64_t L = C0, H = (C1 >> 42) + (C2 >> 20) + (C3 << 2) + (C4 << 24), t;
    t = C1 << 22; L += t; H += L < t;
    t = C2 << 44; L += t; H += L < t;
    const uint64_t hh = H >> 32, hl = H & EXPS_EPS;
    const uint64_t s = L + hl * EXPS_EPS;
    uint64_t r = s - hh;
    if (s < L) { if (s >= hh) r += EXPS_EPS; } else if (s < hh) r += EXPS_P;
    return r;
}

__device__ __forceinline__ uint64_t mul_int(uint64_t a, uint64_t b) { return gl_mul(a, b); }

// chain j < NI: gl_mul; the others gl_mul_f64 (bench/m33_bench.cuh's mul_chains8)
template <int NI> struct Mix {
    static __device__ __forceinline__ uint64_t f(int j, uint64_t x, uint64_t y) { return j < NI ? mul_int(x, y) : gl_mul_f64(x, y); }
};
__global__ void f64_one(const uint64_t* a, const uint64_t* b, uint64_t* o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = gl_canon(gl_mul_f64(a[i], b[i]));
}
__global__ void int_one(const uint64_t* a, const uint64_t* b, uint64_t* o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = gl_canon(mul_int(a[i], b[i]));
}

int main() {
    const uint64_t P = EXPS_P;
    std::vector<uint64_t> edge = {0, 1, 2, 3, 5, 0xFFFFFFFEull, 0xFFFFFFFFull, 0x100000000ull, 0x100000001ull, P - 2, P - 1, P,
                                  P + 1, P + 2, ~0ull, ~0ull - 1, 0x8000000000000000ull, 0xFFFFFFFF00000000ull,
                                  0x7FFFFFFFFFFFFFFFull, 0xFFFFFFFEFFFFFFFFull, 0x3FFFFFull, 0x400000ull, 0xFFFFF00000000000ull,
                                  0x00000FFFFFFFFFFFull, 0x0000100000000000ull};
    std::mt19937_64 rng(25);
    auto pick = [&]() {
        int r = rng() % 4;
        if (r == 0) return edge[rng() % edge.size()];
        if (r == 1) return (uint64_t)(rng() % 16);
        return (uint64_t)rng();
    };
    const int n = 1 << 22;
    std::vector<uint64_t> a(n), b(n);
    int e = edge.size(), k = 0;
    for (int x = 0; x < e; ++x) for (int y = 0; y < e; ++y) { a[k] = edge[x]; b[k] = edge[y]; ++k; }
    for (; k < n; ++k) { a[k] = pick(); b[k] = pick(); }
    long bad = 0;
    for (int i = 0; i < n; ++i) {
        const uint64_t want = (uint64_t)((unsigned __int128)a[i] * b[i] % P);
        bad += gl_canon(gl_mul_f64(a[i], b[i])) != want;
    }
    printf("host: gl_mul_f64 vs __int128 mod p: %d pairs (%d edge pairs), %ld wrong\n", n, e * e, bad);
    int dev = 0;
    if (cudaGetDeviceCount(&dev) != cudaSuccess || dev == 0) { printf("no GPU: host check only\n"); return bad ? 1 : 0; }
    uint64_t *da, *db, *o0, *o1; size_t sz = n * sizeof(uint64_t);
    cudaMalloc(&da, sz + 64); cudaMalloc(&db, sz); cudaMalloc(&o0, sz); cudaMalloc(&o1, sz);
    cudaMemcpy(da, a.data(), sz, cudaMemcpyHostToDevice); cudaMemcpy(db, b.data(), sz, cudaMemcpyHostToDevice);
    f64_one<<<n / 256, 256>>>(da, db, o0, n); int_one<<<n / 256, 256>>>(da, db, o1, n);
    std::vector<uint64_t> r0(n), r1(n);
    cudaMemcpy(r0.data(), o0, sz, cudaMemcpyDeviceToHost); cudaMemcpy(r1.data(), o1, sz, cudaMemcpyDeviceToHost);
    long dbad = 0; for (int i = 0; i < n; ++i) dbad += r0[i] != r1[i];
    printf("device: canon(gl_mul_f64) vs canon(gl_mul): %d pairs, %ld differing\n", n, dbad);
    const int blocks = 132 * 8, threads = 256, it = 512;
    const double thr = (double)blocks * threads;
    float ms[5] = {median_ms([&] { mul_chains8<Mix<8>><<<blocks, threads>>>(da, o0, it); }), median_ms([&] { mul_chains8<Mix<7>><<<blocks, threads>>>(da, o0, it); }),
                   median_ms([&] { mul_chains8<Mix<6>><<<blocks, threads>>>(da, o0, it); }), median_ms([&] { mul_chains8<Mix<4>><<<blocks, threads>>>(da, o0, it); }),
                   median_ms([&] { mul_chains8<Mix<0>><<<blocks, threads>>>(da, o0, it); })};
    const int ni[5] = {8, 7, 6, 4, 0};
    for (int j = 0; j < 5; ++j)
        printf("chains gl_mul %d / gl_mul_f64 %d: %.3f ms, %.0f G mults/s (%.3fx the all-integer loop)\n", ni[j], 8 - ni[j], ms[j],
               thr * it * 8 / ms[j] / 1e6, ms[0] / ms[j]);
    printf("%s\n", cudaGetErrorString(cudaGetLastError()));
    return bad || dbad ? 1 : 0;
}
