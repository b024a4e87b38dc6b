// Value-only ("lazy") forms of the cubic-extension product, for bench/fieldops.py's variant `lazy`
// (issue #13 study; not used by the product). Every result is the right field element (mod p) but
// not necessarily the production word: a kernel could compute its rows this way and store
// canon(v) wherever canon(v) >= EPS (a value >= EPS has one u64 encoding, so that IS the word the
// production op order gives), and run the exact forms only for a row with a smaller output.
//
// The saving: a product's 128-bit reduction stops at (s, k) with Y = s + k 2^64, k in {-1, 0, 1}
// (gl_mul without its last four instructions), and each output component of gl3_mul is one
// accumulator (lo, hi) = sum of its products (three-word adds, 3 SASS each) with one reduction at
// the end, instead of a partially reduced add or sub (~10 SASS) per term.
#ifndef EXPS_LAZY_OPS_CUH
#define EXPS_LAZY_OPS_CUH
#include "gen_common.cuh"

struct lz_acc { uint64_t lo; uint32_t hi; };   // value = lo + (int32)hi * 2^64 (mod p), |hi| < 2^30

// Y = a * b reduced to (s, k): gl_mul's carry chains up to s = (lo - hh) + hl * EPS and k = c - b.
__device__ __forceinline__ lz_acc lz_mul(uint64_t a, uint64_t b) {
    lz_acc r;
    asm("{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb;\n\t"
        ".reg .u64 d, t;\n\t"
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
        "sub.cc.u32 r0, r0, r3;\n\t"
        "subc.cc.u32 r1, r1, 0;\n\t"
        "subc.u32 nb, 0, 0;\n\t"
        "mov.b64 d, {r0, r1};\n\t"
        "mul.wide.u32 t, r2, 0xFFFFFFFF;\n\t"
        "add.cc.u64 %0, d, t;\n\t"
        "addc.u32 %1, nb, 0;\n\t"
        "}"
        : "=l"(r.lo), "=r"(r.hi) : "l"(a), "l"(b));
    return r;
}

__device__ __forceinline__ lz_acc lz_add(lz_acc x, lz_acc y) {
    lz_acc r;
    asm("add.cc.u64 %0, %2, %3;\n\taddc.u32 %1, %4, %5;" : "=l"(r.lo), "=r"(r.hi)
        : "l"(x.lo), "l"(y.lo), "r"(x.hi), "r"(y.hi));
    return r;
}

__device__ __forceinline__ lz_acc lz_sub(lz_acc x, lz_acc y) {
    lz_acc r;
    asm("sub.cc.u64 %0, %2, %3;\n\tsubc.u32 %1, %4, %5;" : "=l"(r.lo), "=r"(r.hi)
        : "l"(x.lo), "l"(y.lo), "r"(x.hi), "r"(y.hi));
    return r;
}

// lo + h 2^64 = lo + h EPS (mod p): t = h EPS as a signed 64-bit word (|h| < 2^30: |t| < 2^62),
// s = lo + t with k = carry - [t < 0] in {-1, 0, 1}, then s + k EPS = s - sext(k) + (k << 32), which
// cannot wrap again (k = 1: s < 2^62; k = -1: s > 2^64 - 2^62).
__device__ __forceinline__ uint64_t lz_red(lz_acc x) {
    uint64_t r;
    asm("{\n\t"
        ".reg .u32 sh, t0, t1, s0, s1, k, sk;\n\t"
        ".reg .u64 t, s;\n\t"
        "shr.s32 sh, %2, 31;\n\t"
        "sub.cc.u32 t0, 0, %2;\n\t"          // t = h 2^32 - sext(h)
        "subc.u32 t1, %2, sh;\n\t"
        "mov.b64 t, {t0, t1};\n\t"
        "add.cc.u64 s, %1, t;\n\t"
        "addc.u32 k, sh, 0;\n\t"
        "mov.b64 {s0, s1}, s;\n\t"
        "shr.s32 sk, k, 31;\n\t"
        "sub.cc.u32 s0, s0, k;\n\t"
        "subc.u32 s1, s1, sk;\n\t"
        "add.u32 s1, s1, k;\n\t"
        "mov.b64 %0, {s0, s1};\n\t"
        "}"
        : "=l"(r) : "l"(x.lo), "r"(x.hi));
    return r;
}

// The production op order's value (spec 1.2): the same six products, the sums as accumulators.
__device__ __forceinline__ gl3 lz_gl3_mul(gl3 a, gl3 b) {
    uint64_t A01 = gl_add(a.v0, a.v1), A02 = gl_add(a.v0, a.v2), A12 = gl_add(a.v1, a.v2);
    uint64_t B01 = gl_add(b.v0, b.v1), B02 = gl_add(b.v0, b.v2), B12 = gl_add(b.v1, b.v2);
    lz_acc D = lz_mul(a.v0, b.v0), E = lz_mul(a.v1, b.v1), F = lz_mul(a.v2, b.v2);
    lz_acc R0 = lz_mul(A12, B12), R1 = lz_mul(A01, B01), R2 = lz_mul(A02, B02);
    lz_acc G = lz_sub(D, E);
    return gl3_make(lz_red(lz_sub(lz_add(R0, G), F)),
                    lz_red(lz_sub(lz_sub(lz_sub(lz_add(R1, R0), E), E), D)),
                    lz_red(lz_sub(R2, G)));
}

// a * b + c with the add inside the accumulators (the q_mix loop's gl3_add(gl3_mul(a, b), c)).
__device__ __forceinline__ gl3 lz_gl3_mul_add(gl3 a, gl3 b, gl3 c) {
    uint64_t A01 = gl_add(a.v0, a.v1), A02 = gl_add(a.v0, a.v2), A12 = gl_add(a.v1, a.v2);
    uint64_t B01 = gl_add(b.v0, b.v1), B02 = gl_add(b.v0, b.v2), B12 = gl_add(b.v1, b.v2);
    lz_acc D = lz_mul(a.v0, b.v0), E = lz_mul(a.v1, b.v1), F = lz_mul(a.v2, b.v2);
    lz_acc R0 = lz_mul(A12, B12), R1 = lz_mul(A01, B01), R2 = lz_mul(A02, B02);
    lz_acc G = lz_sub(D, E);
    const lz_acc c0 = {c.v0, 0u}, c1 = {c.v1, 0u}, c2 = {c.v2, 0u};
    return gl3_make(lz_red(lz_add(lz_sub(lz_add(R0, G), F), c0)),
                    lz_red(lz_add(lz_sub(lz_sub(lz_sub(lz_add(R1, R0), E), E), D), c1)),
                    lz_red(lz_add(lz_sub(R2, G), c2)));
}

// a * b (3 x 1): each component's product reduced once more (value only: a full gl_mul already is).
__device__ __forceinline__ gl3 lz_gl3_mul31(gl3 a, uint64_t b) {
    return gl3_make(lz_red(lz_mul(a.v0, b)), lz_red(lz_mul(a.v1, b)), lz_red(lz_mul(a.v2, b)));
}
#endif
