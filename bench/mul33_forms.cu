// The value path's 3x3 product plus an add (issue #13, session 11): the Karatsuba form of
// gen_common.cuh (six products, six canonicalizing operand sums) vs the schoolbook form (nine
// products, no sums; 169 SASS instead of 191 but 45 IMAD.WIDE/IMAD.HI instead of 30: 0.89x, rejected). Both right mod p: canon of both compared on 2^22 triples
// (edge words, small integers, uniform words; every pair of 18 edge values); then register-only
// loops (4 independent chains per thread), median of 7. nvcc -O3 -arch=sm_90 -std=c++17
// -DGL64_PARTIALLY_REDUCED -I templates bench/mul33_forms.cu -o /tmp/m && /tmp/m
#include "gen_common.cuh"
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <random>
#include <algorithm>
// emitter 0.17.x's value-path 3x3 product (Karatsuba: six products over canonicalizing operand sums)
__device__ __forceinline__ gl3_acc kara_mul(gl3 a, gl3 b) { return gl3_acc_mul(a, b); }
__device__ __forceinline__ gl3_acc sb_mul(gl3 a, gl3 b) {
    const gl_acc p00 = gl_acc_mul(a.v0, b.v0), p01 = gl_acc_mul(a.v0, b.v1), p02 = gl_acc_mul(a.v0, b.v2);
    const gl_acc p10 = gl_acc_mul(a.v1, b.v0), p11 = gl_acc_mul(a.v1, b.v1), p12 = gl_acc_mul(a.v1, b.v2);
    const gl_acc p20 = gl_acc_mul(a.v2, b.v0), p21 = gl_acc_mul(a.v2, b.v1), p22 = gl_acc_mul(a.v2, b.v2);
    const gl_acc T = gl_acc_add(p12, p21);
    return gl3_acc_make(gl_acc_add(p00, T), gl_acc_add(gl_acc_add(gl_acc_add(p01, p10), T), p22),
                        gl_acc_add(gl_acc_add(gl_acc_add(p02, p20), p11), p22));
}
template <int V> __device__ __forceinline__ gl3 mulv(gl3 a, gl3 b, gl3 c) {
    if (V == 0) return gl3_acc_red(gl3_acc_addw(kara_mul(a, b), c));
    else return gl3_acc_red(gl3_acc_addw(sb_mul(a, b), c));
}
// chains: x_k = x_k * y_k + z (y row-varying -> no hoisting), 4 independent chains
template <int V> __global__ void loop(const gl3* in, gl3* out, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    gl3 x0 = in[4*i], x1 = in[4*i+1], x2 = in[4*i+2], x3 = in[4*i+3];
    gl3 y0 = x3, y1 = x2, y2 = x1, y3 = x0;
    gl3 z = gl3_make(gl_add(x0.v0, 7), x1.v1, x2.v2);
    for (int k = 0; k < iters; ++k) {
        gl3 n0 = mulv<V>(x0, y0, z), n1 = mulv<V>(x1, y1, z), n2 = mulv<V>(x2, y2, z), n3 = mulv<V>(x3, y3, z);
        y0 = x0; y1 = x1; y2 = x2; y3 = x3;
        x0 = n0; x1 = n1; x2 = n2; x3 = n3;
    }
    out[i] = gl3_add(gl3_add(x0, x1), gl3_add(x2, x3));
}
template <int V> __global__ void one(const gl3* a, const gl3* b, const gl3* c, gl3* o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { gl3 r = mulv<V>(a[i], b[i], c[i]); o[i] = gl3_make(gl_canon(r.v0), gl_canon(r.v1), gl_canon(r.v2)); }
}
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
    one<0><<<n/256, 256>>>(da, db, dc, o0, n); one<1><<<n/256, 256>>>(da, db, dc, o1, n);
    std::vector<gl3> r0(n), r1(n); cudaMemcpy(r0.data(), o0, sz, cudaMemcpyDeviceToHost); cudaMemcpy(r1.data(), o1, sz, cudaMemcpyDeviceToHost);
    long bad = 0; for (int i = 0; i < n; ++i) bad += (r0[i].v0 != r1[i].v0) + (r0[i].v1 != r1[i].v1) + (r0[i].v2 != r1[i].v2);
    printf("canon(kara) vs canon(sb) on %d triples: %ld differing words\n", n, bad);
    int blocks = 132 * 8, threads = 256, iters = 256;
    cudaEvent_t s, t; cudaEventCreate(&s); cudaEventCreate(&t);
    for (int v = 0; v < 2; ++v) {
        std::vector<float> ms;
        for (int r = 0; r < 7; ++r) {
            cudaEventRecord(s);
            if (v == 0) loop<0><<<blocks, threads>>>(da, o0, iters); else loop<1><<<blocks, threads>>>(da, o0, iters);
            cudaEventRecord(t); cudaEventSynchronize(t); float m; cudaEventElapsedTime(&m, s, t); ms.push_back(m);
        }
        std::sort(ms.begin(), ms.end());
        double mults = (double)blocks * threads * iters * 4 * 9;  // 3x3 = 9 base mults counted as the anchors do? (6 Karatsuba)
        printf("%s: median %.3f ms, %.0f G 3x3-mul+add/s (%.0f G base mults/s counting 6)\n", v ? "schoolbook" : "karatsuba", ms[3],
               (double)blocks*threads*iters*4/ms[3]/1e6, (double)blocks*threads*iters*4*6/ms[3]/1e6);
    }
    printf("%s\n", cudaGetErrorString(cudaGetLastError()));
}
