// The value path's 3x3 product plus an add (issue #13, session 11): the Karatsuba form of
// gen_common.cuh (six products, six canonicalizing operand sums) vs the schoolbook form (nine
// products, no sums; 169 SASS instead of 191 but 45 IMAD.WIDE/IMAD.HI instead of 30: 0.89x,
// rejected). Both right mod p: canon of both compared on 2^22 triples (edge words, small integers,
// uniform words; every pair of 18 edge values); then register-only loops (4 independent chains per
// thread, bench/m33_bench.cuh), median of 7. nvcc -O3 -arch=sm_90 -std=c++17
// -DGL64_PARTIALLY_REDUCED -I templates bench/mul33_forms.cu -o /tmp/m && /tmp/m
#include "m33_bench.cuh"
#include <cstdio>
#include <random>
__device__ __forceinline__ gl3_acc sb_mul(gl3 a, gl3 b) {
    const gl_acc p00 = gl_acc_mul(a.v0, b.v0), p01 = gl_acc_mul(a.v0, b.v1), p02 = gl_acc_mul(a.v0, b.v2);
    const gl_acc p10 = gl_acc_mul(a.v1, b.v0), p11 = gl_acc_mul(a.v1, b.v1), p12 = gl_acc_mul(a.v1, b.v2);
    const gl_acc p20 = gl_acc_mul(a.v2, b.v0), p21 = gl_acc_mul(a.v2, b.v1), p22 = gl_acc_mul(a.v2, b.v2);
    const gl_acc T = gl_acc_add(p12, p21);
    return gl3_acc_make(gl_acc_add(p00, T), gl_acc_add(gl_acc_add(gl_acc_add(p01, p10), T), p22),
                        gl_acc_add(gl_acc_add(gl_acc_add(p02, p20), p11), p22));
}
struct Kara {   // gen_common.cuh's value-path product (Karatsuba)
    static __device__ __forceinline__ gl3 f(gl3 a, gl3 b, gl3 c) { return gl3_acc_red(gl3_acc_addw(gl3_acc_mul(a, b), c)); }
};
struct School {
    static __device__ __forceinline__ gl3 f(gl3 a, gl3 b, gl3 c) { return gl3_acc_red(gl3_acc_addw(sb_mul(a, b), c)); }
};
int main() {
    const uint64_t P = 0xFFFFFFFF00000001ull;
    std::vector<uint64_t> edge = {0,1,2,3,5,0xFFFFFFFEull,0xFFFFFFFFull,0x100000000ull,P-2,P-1,P,P+1,P+2,~0ull,~0ull-1,0x8000000000000000ull,0xFFFFFFFF00000000ull,0x7FFFFFFFFFFFFFFFull};
    std::mt19937_64 rng(1);
    int n = 1 << 22; std::vector<gl3> a(n), b(n), c(n);
    auto pick = [&](){ int r = rng() % 4; if (r == 0) return edge[rng() % edge.size()]; if (r == 1) return (uint64_t)(rng() % 16); return (uint64_t)rng(); };
    for (int i = 0; i < n; ++i) { a[i] = gl3_make(pick(),pick(),pick()); b[i] = gl3_make(pick(),pick(),pick()); c[i] = gl3_make(pick(),pick(),pick()); }
    // every pair of edge values in each component position of a and b (component-wise)
    int e = edge.size(), k = 0;
    for (int x = 0; x < e; ++x) for (int y = 0; y < e; ++y) for (int z = 0; z < 3; ++z) {
        a[k] = gl3_make(edge[x], edge[(x+z)%e], edge[(x+2*z)%e]); b[k] = gl3_make(edge[y], edge[(y+1)%e], edge[(y*z)%e]); ++k; }
    gl3 *da, *db, *dc, *o0, *o1; size_t sz = n * sizeof(gl3);
    cudaMalloc(&da, sz); cudaMalloc(&db, sz); cudaMalloc(&dc, sz); cudaMalloc(&o0, sz); cudaMalloc(&o1, sz);
    cudaMemcpy(da, a.data(), sz, cudaMemcpyHostToDevice); cudaMemcpy(db, b.data(), sz, cudaMemcpyHostToDevice); cudaMemcpy(dc, c.data(), sz, cudaMemcpyHostToDevice);
    m33_once<Kara><<<n/256, 256>>>(da, db, dc, o0, n); m33_once<School><<<n/256, 256>>>(da, db, dc, o1, n);
    std::vector<gl3> r0(n), r1(n); cudaMemcpy(r0.data(), o0, sz, cudaMemcpyDeviceToHost); cudaMemcpy(r1.data(), o1, sz, cudaMemcpyDeviceToHost);
    long bad = 0; for (int i = 0; i < n; ++i) bad += (r0[i].v0 != r1[i].v0) + (r0[i].v1 != r1[i].v1) + (r0[i].v2 != r1[i].v2);
    printf("canon(kara) vs canon(sb) on %d triples: %ld differing words\n", n, bad);
    int blocks = 132 * 8, threads = 256, iters = 256;
    for (int v = 0; v < 2; ++v) {
        const float m = v ? median_ms([&] { m33_chain<School><<<blocks, threads>>>(da, o0, iters); })
                          : median_ms([&] { m33_chain<Kara><<<blocks, threads>>>(da, o0, iters); });
        printf("%s: median %.3f ms, %.0f G 3x3-mul+add/s (%.0f G base mults/s counting 6)\n", v ? "schoolbook" : "karatsuba", m,
               (double)blocks*threads*iters*4/m/1e6, (double)blocks*threads*iters*4*6/m/1e6);
    }
    printf("%s\n", cudaGetErrorString(cudaGetLastError()));
}
