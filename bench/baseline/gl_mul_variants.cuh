// The gl_mul forms of issue #13 that were measured and not adopted, for bench/fieldops.py's variants
// m050 (-DEXPS_GL_MUL_V050: the form of emitter 0.5.0, 18 SASS) and mw5 (-DEXPS_GL_MUL_W5: every
// partial product one IMAD.WIDE, 14 SASS). Included before templates/gen_common.cuh (bench/fieldops.cu):
// the selected form becomes the device gl_mul, and EXPS_GL_MUL_DEFINED keeps the header's own out.
// tests/test_ptx_forms.py runs both through codegen/check/ptxsim.py against the oracle.
#ifndef EXPS_GL_MUL_VARIANTS_CUH
#define EXPS_GL_MUL_VARIANTS_CUH
#include <stdint.h>

// Replaced by gl_mul (issue #13), kept for bench/fieldops.py (variant m050, -DEXPS_GL_MUL_V050):
// the form of emitter 0.5.0. s = lo + hl * EPS first (carry c, taken as a value: SEL), d = s - hh
// (borrow b), k = c - b; ptxas moves lo and r1 into accumulator pairs (3 MOVs). 18 SASS instructions.
__device__ __forceinline__ uint64_t gl_mul_v050(uint64_t a, uint64_t b) {
    uint64_t r;
    asm("{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, c, k, s0, s1, sh;\n\t"
        ".reg .u64 lo, t, s;\n\t"
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
        "mov.b64 lo, {r0, r1};\n\t"
        "mul.wide.u32 t, r2, 0xFFFFFFFF;\n\t"
        "add.cc.u64 s, lo, t;\n\t"          // s = lo + hl * EPS, carry c
        "addc.u32 c, 0, 0;\n\t"
        "mov.b64 {s0, s1}, s;\n\t"
        "sub.cc.u32 s0, s0, r3;\n\t"        // d = s - hh, borrow b
        "subc.cc.u32 s1, s1, 0;\n\t"
        "subc.u32 k, c, 0;\n\t"             // k = c - b
        "shr.s32 sh, k, 31;\n\t"
        "sub.cc.u32 s0, s0, k;\n\t"         // d - sext(k) ...
        "subc.u32 s1, s1, sh;\n\t"
        "add.u32 s1, s1, k;\n\t"            // ... + (k << 32)
        "mov.b64 %0, {s0, s1};\n\t"
        "}"
        : "=l"(r) : "l"(a), "l"(b));
    return r;
}

// The other candidate of issue #13, for bench/fieldops.py (variant mw5, -DEXPS_GL_MUL_W5): every
// partial product one IMAD.WIDE (no IMAD.HI, no plain IMAD): H = a1 b1, then the cross terms summed
// first, X = a0 b1 + a1 b0 (65 bits), its carry added to hh at once, (r1, r2, r3) += X << 32, and
// gl_mul's reduction. ptxas folds the two carries into hh into one IADD3.X. 14 SASS instructions:
// 5 IMAD.WIDE + 9 ALU.
__device__ __forceinline__ uint64_t gl_mul_w5(uint64_t a, uint64_t b) {
    uint64_t r;
    asm("{\n\t"
        ".reg .u32 a0, a1, b0, b1, l0, l1, h2, h3, x0, x1, nb, k, s0, s1, sh;\n\t"
        ".reg .u64 H, X, L, d, t, s;\n\t"
        "mov.b64 {a0, a1}, %1;\n\t"
        "mov.b64 {b0, b1}, %2;\n\t"
        "mul.wide.u32 H, a1, b1;\n\t"
        "mov.b64 {h2, h3}, H;\n\t"
        "mul.wide.u32 X, a0, b1;\n\t"
        "mov.b64 {x0, x1}, X;\n\t"
        "mad.lo.cc.u32 x0, a1, b0, x0;\n\t"
        "madc.hi.cc.u32 x1, a1, b0, x1;\n\t"
        "addc.u32 h3, h3, 0;\n\t"           // X's carry (weight 2^96)
        "mul.wide.u32 L, a0, b0;\n\t"
        "mov.b64 {l0, l1}, L;\n\t"
        "add.cc.u32 l1, l1, x0;\n\t"        // + (x0, x1) << 32
        "addc.cc.u32 h2, h2, x1;\n\t"
        "addc.u32 h3, h3, 0;\n\t"
        "sub.cc.u32 l0, l0, h3;\n\t"        // d = lo - hh, borrow b
        "subc.cc.u32 l1, l1, 0;\n\t"
        "subc.u32 nb, 0, 0;\n\t"
        "mov.b64 d, {l0, l1};\n\t"
        "mul.wide.u32 t, h2, 0xFFFFFFFF;\n\t"
        "add.cc.u64 s, d, t;\n\t"
        "addc.u32 k, nb, 0;\n\t"            // k = c - b
        "mov.b64 {s0, s1}, s;\n\t"
        "shr.s32 sh, k, 31;\n\t"
        "sub.cc.u32 s0, s0, k;\n\t"
        "subc.u32 s1, s1, sh;\n\t"
        "add.u32 s1, s1, k;\n\t"
        "mov.b64 %0, {s0, s1};\n\t"
        "}"
        : "=l"(r) : "l"(a), "l"(b));
    return r;
}
#if defined(__CUDA_ARCH__) && !defined(EXPS_PORTABLE)
#if defined(EXPS_GL_MUL_V050)
#define EXPS_GL_MUL_DEFINED 1
__device__ __forceinline__ uint64_t gl_mul(uint64_t a, uint64_t b) { return gl_mul_v050(a, b); }
#elif defined(EXPS_GL_MUL_W5)
#define EXPS_GL_MUL_DEFINED 1
__device__ __forceinline__ uint64_t gl_mul(uint64_t a, uint64_t b) { return gl_mul_w5(a, b); }
#endif
#endif
#endif
