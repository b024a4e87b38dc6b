// Issue #13, session 11: is the multiply-heavy code bound by the FMA pipe's wide multiplies?
// (1) throughput of one instruction kind in register loops (8 independent chains per thread):
//     IADD3 (add.u32), IMAD (mad.lo.u32), IMAD.WIDE.U32 (mul.wide.u32), IMAD.HI.U32 (mul.hi.u32);
//     ptxas folds two of the add loop's adds into one IADD3 (x + y + y; cuobjdump), so its printed
//     rate counts two adds per instruction: IADD3 itself ran at half of it (H200: 58.6 lanes/clk/SM,
//     as IMAD's 62.6; IMAD.WIDE and IMAD.HI 30-32, a quarter of a warp instruction per clock);
// (2) gl_mul (templates/gen_common.cuh: 3 IMAD.WIDE + 2 IMAD.HI + 2 IMAD + 8 ALU) vs gl_mul_e4: the
//     reduction's hl * EPS as (hl << 32) - hl on the ALU pipe (4 FMA-heavy instructions, not 5);
//     the same words (checked on 2^22 pairs: edge words, small integers, uniform words);
// (3) the value path's 3x3 product + add + reduction with gl_acc_mul vs gl_acc_mul_e4 (canon equal).
// Result (session 11, docs/BENCHMARKS.md): the same rate in these loops (1.001x, 0.996x) and slower
// in real kernels (Q 0.96x, expressions 0.96x: a longer carry chain on the critical path); rejected.
// nvcc -O3 -arch=sm_90 -std=c++17 -DGL64_PARTIALLY_REDUCED -I templates bench/fma_pipe.cu -o /tmp/f && /tmp/f
#include "m33_bench.cuh"
#include <cstdio>
#include <random>

__device__ __forceinline__ uint64_t gl_mul_e4(uint64_t a, uint64_t b) {
    uint64_t r;
    asm("{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb, k, s0, s1, sh;\n\t"
        "mov.b64 {a0, a1}, %1;\n\t"
        "mov.b64 {b0, b1}, %2;\n\t"
        "mul.lo.u32 r0, a0, b0;\n\t"
        "mul.hi.u32 r1, a0, b0;\n\t"
        "mul.lo.u32 r2, a1, b1;\n\t"
        "mul.hi.u32 r3, a1, b1;\n\t"
        "mad.lo.cc.u32 r1, a0, b1, r1;\n\t"
        "madc.hi.cc.u32 r2, a0, b1, r2;\n\t"
        "addc.u32 r3, r3, 0;\n\t"
        "mad.lo.cc.u32 r1, a1, b0, r1;\n\t"
        "madc.hi.cc.u32 r2, a1, b0, r2;\n\t"
        "addc.u32 r3, r3, 0;\n\t"
        // Y = lo - (hh + hl) + hl 2^32 (= lo + hl EPS - hh), k = floor(Y / 2^64) in {-1, 0, 1}
        "add.cc.u32 sh, r3, r2;\n\t"       // m = hh + hl (33 bits: sh, s1)
        "addc.u32 s1, 0, 0;\n\t"
        "sub.cc.u32 r0, r0, sh;\n\t"
        "subc.cc.u32 r1, r1, s1;\n\t"
        "subc.u32 nb, 0, 0;\n\t"           // -borrow
        "add.cc.u32 r1, r1, r2;\n\t"
        "addc.u32 k, nb, 0;\n\t"
        "shr.s32 sh, k, 31;\n\t"
        "sub.cc.u32 s0, r0, k;\n\t"        // s - sext(k) ...
        "subc.u32 s1, r1, sh;\n\t"
        "add.u32 s1, s1, k;\n\t"           // ... + (k << 32)
        "mov.b64 %0, {s0, s1};\n\t"
        "}"
        : "=l"(r) : "l"(a), "l"(b));
    return r;
}

__device__ __forceinline__ gl_acc gl_acc_mul_e4(uint64_t a, uint64_t b) {
    gl_acc r;
    asm("{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb, m0, m1;\n\t"
        "mov.b64 {a0, a1}, %2;\n\t"
        "mov.b64 {b0, b1}, %3;\n\t"
        "mul.lo.u32 r0, a0, b0;\n\t"
        "mul.hi.u32 r1, a0, b0;\n\t"
        "mul.lo.u32 r2, a1, b1;\n\t"
        "mul.hi.u32 r3, a1, b1;\n\t"
        "mad.lo.cc.u32 r1, a0, b1, r1;\n\t"
        "madc.hi.cc.u32 r2, a0, b1, r2;\n\t"
        "addc.u32 r3, r3, 0;\n\t"
        "mad.lo.cc.u32 r1, a1, b0, r1;\n\t"
        "madc.hi.cc.u32 r2, a1, b0, r2;\n\t"
        "addc.u32 r3, r3, 0;\n\t"
        "add.cc.u32 m0, r3, r2;\n\t"
        "addc.u32 m1, 0, 0;\n\t"
        "sub.cc.u32 r0, r0, m0;\n\t"
        "subc.cc.u32 r1, r1, m1;\n\t"
        "subc.u32 nb, 0, 0;\n\t"
        "add.cc.u32 r1, r1, r2;\n\t"
        "addc.u32 %1, nb, 0;\n\t"
        "mov.b64 %0, {r0, r1};\n\t"
        "}"
        : "=l"(r.lo), "=r"(r.hi) : "l"(a), "l"(b));
    return r;
}

template <int E> __device__ __forceinline__ gl_acc accm(uint64_t a, uint64_t b) { return E ? gl_acc_mul_e4(a, b) : gl_acc_mul(a, b); }
template <int E> __device__ __forceinline__ uint64_t mulx(uint64_t a, uint64_t b) { return E ? gl_mul_e4(a, b) : gl_mul(a, b); }

// emitter 0.17's value-path 3x3 product with either gl_acc_mul
template <int E> __device__ __forceinline__ gl3 mul33_add(gl3 a, gl3 b, gl3 c) {
    const uint64_t A01 = gl_add(a.v0, a.v1), A02 = gl_add(a.v0, a.v2), A12 = gl_add(a.v1, a.v2);
    const uint64_t B01 = gl_add(b.v0, b.v1), B02 = gl_add(b.v0, b.v2), B12 = gl_add(b.v1, b.v2);
    const gl_acc D = accm<E>(a.v0, b.v0), Ee = accm<E>(a.v1, b.v1), F = accm<E>(a.v2, b.v2);
    const gl_acc R0 = accm<E>(A12, B12), R1 = accm<E>(A01, B01), R2 = accm<E>(A02, B02);
    const gl_acc G = gl_acc_sub(D, Ee);
    const gl3_acc x = gl3_acc_make(gl_acc_sub(gl_acc_add(R0, G), F),
                                   gl_acc_sub(gl_acc_sub(gl_acc_sub(gl_acc_add(R1, R0), Ee), Ee), D),
                                   gl_acc_sub(R2, G));
    return gl3_acc_red(gl3_acc_addw(x, c));
}

template <int E> struct M33 {
    static __device__ __forceinline__ gl3 f(gl3 a, gl3 b, gl3 c) { return mul33_add<E>(a, b, c); }
};

template <int K> __device__ __forceinline__ uint32_t prim(uint32_t x, uint32_t y) {
    uint32_t r;
    if (K == 0) asm volatile("add.u32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(y));
    if (K == 1) asm volatile("mad.lo.u32 %0, %1, %2, %1;" : "=r"(r) : "r"(x), "r"(y));
    if (K == 2) { uint64_t w; asm volatile("mul.wide.u32 %0, %1, %2;" : "=l"(w) : "r"(x), "r"(y)); r = (uint32_t)w ^ (uint32_t)(w >> 32); }
    if (K == 3) asm volatile("mul.hi.u32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(y));
    return r;
}
template <int K> __global__ void prim_loop(uint32_t* out, int iters) {
    uint32_t x[8], y = threadIdx.x | 1;
    for (int j = 0; j < 8; ++j) x[j] = threadIdx.x * 7 + j;
    for (int i = 0; i < iters; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) x[j] = prim<K>(x[j], y);
    uint32_t s = 0;
    for (int j = 0; j < 8; ++j) s ^= x[j];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
template <int E> struct MulX {
    static __device__ __forceinline__ uint64_t f(int, uint64_t x, uint64_t y) { return mulx<E>(x, y); }
};
template <int E> __global__ void mul_one(const uint64_t* a, const uint64_t* b, uint64_t* o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = mulx<E>(a[i], b[i]);
}
int main() {
    const uint64_t P = 0xFFFFFFFF00000001ull;
    std::vector<uint64_t> edge = {0,1,2,3,5,0xFFFFFFFEull,0xFFFFFFFFull,0x100000000ull,0x100000001ull,P-2,P-1,P,P+1,P+2,~0ull,~0ull-1,
                                  0x8000000000000000ull,0xFFFFFFFF00000000ull,0x7FFFFFFFFFFFFFFFull,0xFFFFFFFEFFFFFFFFull};
    std::mt19937_64 rng(11);
    const int n = 1 << 22;
    auto pick = [&]() { int r = rng() % 4; if (r == 0) return edge[rng() % edge.size()]; if (r == 1) return (uint64_t)(rng() % 16); return (uint64_t)rng(); };
    std::vector<uint64_t> a(3 * n), b(3 * n), c(3 * n);
    for (int i = 0; i < 3 * n; ++i) { a[i] = pick(); b[i] = pick(); c[i] = pick(); }
    int e = edge.size(), k = 0;
    for (int x = 0; x < e; ++x) for (int y = 0; y < e; ++y) { a[k] = edge[x]; b[k] = edge[y]; ++k; }
    uint64_t *da, *db, *dc, *o0, *o1; size_t sz = 3 * n * sizeof(uint64_t);
    cudaMalloc(&da, sz); cudaMalloc(&db, sz); cudaMalloc(&dc, sz); cudaMalloc(&o0, sz); cudaMalloc(&o1, sz);
    cudaMemcpy(da, a.data(), sz, cudaMemcpyHostToDevice); cudaMemcpy(db, b.data(), sz, cudaMemcpyHostToDevice); cudaMemcpy(dc, c.data(), sz, cudaMemcpyHostToDevice);
    std::vector<uint64_t> r0(3 * n), r1(3 * n);
    mul_one<0><<<3 * n / 256, 256>>>(da, db, o0, 3 * n); mul_one<1><<<3 * n / 256, 256>>>(da, db, o1, 3 * n);
    cudaMemcpy(r0.data(), o0, sz, cudaMemcpyDeviceToHost); cudaMemcpy(r1.data(), o1, sz, cudaMemcpyDeviceToHost);
    long bad = 0; for (int i = 0; i < 3 * n; ++i) bad += r0[i] != r1[i];
    printf("gl_mul_e4 vs gl_mul: %d pairs (%d edge pairs), %ld differing words\n", 3 * n, e * e, bad);
    m33_once<M33<0>><<<n / 256, 256>>>((gl3*)da, (gl3*)db, (gl3*)dc, (gl3*)o0, n); m33_once<M33<1>><<<n / 256, 256>>>((gl3*)da, (gl3*)db, (gl3*)dc, (gl3*)o1, n);
    cudaMemcpy(r0.data(), o0, sz, cudaMemcpyDeviceToHost); cudaMemcpy(r1.data(), o1, sz, cudaMemcpyDeviceToHost);
    bad = 0; for (int i = 0; i < 3 * n; ++i) bad += r0[i] != r1[i];
    printf("3x3 value product with gl_acc_mul_e4 vs gl_acc_mul: %d triples, %ld differing canonical words\n", n, bad);
    const int blocks = 132 * 8, threads = 256, it = 512;
    const double thr = (double)blocks * threads;
    uint32_t* po; cudaMalloc(&po, blocks * threads * 4);
    const char* pn[4] = {"IADD3 (add.u32)", "IMAD (mad.lo.u32)", "IMAD.WIDE.U32 (mul.wide.u32)", "IMAD.HI.U32 (mul.hi.u32)"};
    float pm[4] = {median_ms([&] { prim_loop<0><<<blocks, threads>>>(po, it * 8); }), median_ms([&] { prim_loop<1><<<blocks, threads>>>(po, it * 8); }),
                   median_ms([&] { prim_loop<2><<<blocks, threads>>>(po, it * 8); }), median_ms([&] { prim_loop<3><<<blocks, threads>>>(po, it * 8); })};
    for (int j = 0; j < 4; ++j) printf("%-30s %.3f ms  %.0f G warp-instr/s per SM-clock basis: %.2f lanes/clk/SM\n", pn[j], pm[j],
                                        thr * it * 64 / pm[j] / 1e6 / 32, thr * it * 64 / (pm[j] * 1e-3) / 132 / 1.98e9);
    float m0 = median_ms([&] { mul_chains8<MulX<0>><<<blocks, threads>>>(da, o0, it); }), m1 = median_ms([&] { mul_chains8<MulX<1>><<<blocks, threads>>>(da, o0, it); });
    printf("gl_mul    %.3f ms %.0f G mults/s\ngl_mul_e4 %.3f ms %.0f G mults/s (%.3fx)\n", m0, thr * it * 8 / m0 / 1e6, m1, thr * it * 8 / m1 / 1e6, m0 / m1);
    float q0 = median_ms([&] { m33_chain<M33<0>><<<blocks, threads>>>((gl3*)da, (gl3*)o0, it / 2); }), q1 = median_ms([&] { m33_chain<M33<1>><<<blocks, threads>>>((gl3*)da, (gl3*)o0, it / 2); });
    printf("3x3+add (gl_acc_mul)    %.3f ms %.0f G base mults/s (6 per product)\n3x3+add (gl_acc_mul_e4) %.3f ms %.0f G (%.3fx)\n",
           q0, thr * it / 2 * 4 * 6 / q0 / 1e6, q1, thr * it / 2 * 4 * 6 / q1 / 1e6, q0 / q1);
    printf("%s\n", cudaGetErrorString(cudaGetLastError()));
}
