// exps-codegen: common header of every generated translation unit.
// Self-contained (no pil2-stark headers). Compiles with nvcc for the device and with g++ for the host
// check, so the host check runs exactly the arithmetic the GPU runs.
//
// Goldilocks arithmetic is bit-identical to the production gl64_t built with GL64_PARTIALLY_REDUCED
// (spec §1.1): values are any u64, `a + b` canonicalises only its left operand, `5 - 5 = p`, ...
// The cubic extension F_p[X]/(X^3 - X - 1) follows the production op order (spec §1.2).
#ifndef EXPS_GEN_COMMON_CUH
#define EXPS_GEN_COMMON_CUH

#include <stdint.h>

#include "exps_abi.h"   // EXPS_INV_ROWS, exps_x_blocks: shared with the launcher

#ifdef __CUDACC__
#include <cuda_runtime.h>
#include <stdlib.h>
#define EXPS_HD __host__ __device__ __forceinline__
#else
#define EXPS_HD static inline
typedef struct CUstream_st* cudaStream_t;
#endif
// The field inverses (gl_inv, gl3_inv) only: out of line on the device, so that cicc optimizes them
// once per TU instead of once per expression kernel. They are `inline` (one definition
// per TU, merged by the host linker), not `static`: nvcc names a device function of internal linkage
// after its compile's pid-derived temp file (`_INTERNAL_<hash>_...`), which would make two builds of
// one key differ byte for byte in the .so's device code (tests/test_shared_cache.py). ptxas still
// copies a callee into every kernel that calls it (whole-program mode), so the device form of
// the squaring loop in gl_sqrn_mul is also kept rolled: ~18 multiplies of code instead of ~90.
// The host form (g++, and nvcc's host pass) stays inline.
#ifdef __CUDA_ARCH__
#define EXPS_HD_OUTLINE inline __host__ __device__ __noinline__
#else
#define EXPS_HD_OUTLINE EXPS_HD
#endif
#define EXPS_EXPORT __attribute__((visibility("default")))

// The prover's StepsParams: 12 pointers, 96 bytes, this field order (spec §2.3).
struct StepsParams {
    uint64_t* trace;
    uint64_t* aux_trace;
    uint64_t* publicInputs;
    uint64_t* proofValues;
    uint64_t* challenges;
    uint64_t* airgroupValues;
    uint64_t* airValues;
    uint64_t* evals;
    uint64_t* xDivXSub;
    uint64_t* pConstPolsAddress;
    uint64_t* pConstPolsExtendedTreeAddress;
    uint64_t* pCustomCommitsFixed;
};

#define EXPS_P 0xFFFFFFFF00000001ull
#define EXPS_EPS 0xFFFFFFFFull

// ------------------------------------------------------------------------------ base field
// Every op has a portable C form (the host check's, and the device's under -DEXPS_PORTABLE) and, for
// add, sub and mul, a device form with carry chains that computes the same words with fewer
// instructions (bench/fieldops.py checks them against each other and the numpy oracle on the GPU).
#if defined(__CUDA_ARCH__) && !defined(EXPS_PORTABLE)
#define EXPS_DEVICE_PTX 1
#endif

EXPS_HD uint64_t gl_canon(uint64_t a) { return a >= EXPS_P ? a - EXPS_P : a; }

EXPS_HD uint64_t gl_add_portable(uint64_t a, uint64_t b) {
    uint64_t ca = gl_canon(a);
    uint64_t s = ca + b;
    return s < ca ? s + EXPS_EPS : s;          // carry: s + 2^64 - p
}

EXPS_HD uint64_t gl_sub_portable(uint64_t a, uint64_t b) {
    uint64_t ap = a < EXPS_EPS ? a + EXPS_P : a;
    return ap >= b ? ap - b : ap - b + EXPS_P;
}

#ifdef EXPS_DEVICE_PTX
// The device forms are written for the H100/H200's two integer pipes: IADD3/ISETP/SEL/LOP3 issue
// to the ALU pipe and IMAD* to the FMA pipe, each at half a warp instruction per clock, so an op
// that is all ALU costs twice its instruction count: a gl_add of 9 ALU + 1 FMA instructions is
// ALU-bound (1.84 T adds/s on the H200 = the ALU pipe's rate; the form below: docs/BENCHMARKS.md,
// "Field ops"). In the forms below the carries taken as values (madc) and the plain adds of a carry
// run as IMAD / IMAD.X with an opaque 1 (exps_k1: ptxas cannot fold it, so it cannot turn them back
// into IADD3), and the carry chains stay on the ALU pipe. The words are the portable forms' exactly
// (tests/test_ptx_forms.py runs this PTX through codegen/check/ptxsim.py; bench/fieldops.py checks
// the compiled forms on a GPU).
// exps_k1() = (gridDim.z >> 16) + 1 = 1 for every launch (gridDim.z <= 65535).
__device__ __forceinline__ uint32_t exps_k1(void) { return (gridDim.z >> 16) + 1u; }

// canon(a) = a >= p ? a - p : a: a >= p iff a + EPS carries out of 64 bits (P), and then a - p =
// (lo - 1, 0) = (lo - P, hi + P) as hi = 2^32 - 1: two IMADs (lo + P * (2^32 - 1), hi + P * 1). A
// separate asm statement, so that nvcc computes the canon of an operand once for all the adds it is
// the left operand of (a gl3_mul's A01 and A02, a challenge added to many columns).
__device__ __forceinline__ uint64_t gl_canon_dev(uint64_t a) {
    uint64_t r;
    const uint32_t K1 = exps_k1(), KE = 0u - K1;
    asm("{\n\t"
        ".reg .u32 a0, a1, pv, c0, c1, t;\n\t"
        "mov.b64 {a0, a1}, %1;\n\t"
        "add.cc.u32 t, a0, 0xFFFFFFFF;\n\t"
        "addc.cc.u32 t, a1, 0;\n\t"
        "madc.lo.u32 pv, 0, 0, 0;\n\t"        // pv = [a >= p]
        "mad.lo.u32 c0, pv, %3, a0;\n\t"      // lo - pv
        "mad.lo.u32 c1, pv, %2, a1;\n\t"      // hi + pv
        "mov.b64 %0, {c0, c1};\n\t"
        "}"
        : "=l"(r) : "l"(a), "r"(K1), "r"(KE));
    return r;
}

// a + b = canon(a) + b, then s + c * EPS = s - c + (c << 32) with the carry c as a value (madc:
// IMAD.X) and the high word's + c as an IMAD (s <= p - 2 when c = 1: no wrap). 6 ALU + 5 FMA
// instructions (with the carries on the ALU: 9 + 1). A form whose fix-up is one IMAD.WIDE (4 + 6)
// is no faster in full kernels and takes up to 60% more registers in some (H200;
// docs/BENCHMARKS.md, "Levers tried and rejected"). Each carry is read by the same kind of op that
// set it.
__device__ __forceinline__ uint64_t gl_add(uint64_t a, uint64_t b) {
    const uint64_t ca = gl_canon_dev(a);
    uint64_t r;
    asm("{\n\t"
        ".reg .u32 a0, a1, b0, b1, c;\n\t"
        "mov.b64 {a0, a1}, %1;\n\t"
        "mov.b64 {b0, b1}, %2;\n\t"
        "add.cc.u32 a0, a0, b0;\n\t"
        "addc.cc.u32 a1, a1, b1;\n\t"
        "madc.lo.u32 c, 0, 0, 0;\n\t"        // c = carry
        "sub.cc.u32 a0, a0, c;\n\t"          // s - c ...
        "subc.u32 a1, a1, 0;\n\t"
        "mad.lo.u32 a1, c, %3, a1;\n\t"      // ... + (c << 32)
        "mov.b64 %0, {a0, a1};\n\t"
        "}"
        : "=l"(r) : "l"(ca), "l"(b), "r"(exps_k1()));
    return r;
}

// a - b: a < EPS iff a - EPS borrows (m = -[a < EPS]); a + p = (lo + 1, 2^32 - 1) = (lo - m, hi + m)
// as hi = 0 there; then d = ap - b with the borrow as a mask, and d - borrow * EPS (= ap - b + p
// >= 1 when borrowed, as ap >= EPS: no wrap). 7 ALU + 3 FMA (with the carries on the ALU: 8 + 2).
__device__ __forceinline__ uint64_t gl_sub(uint64_t a, uint64_t b) {
    uint64_t r;
    asm("{\n\t"
        ".reg .u32 a0, a1, b0, b1, m, t;\n\t"
        "mov.b64 {a0, a1}, %1;\n\t"
        "mov.b64 {b0, b1}, %2;\n\t"
        "sub.cc.u32 t, a0, 0xFFFFFFFF;\n\t"
        "subc.cc.u32 t, a1, 0;\n\t"
        "subc.u32 m, 0, 0;\n\t"              // m = -[a < EPS]
        "sub.u32 a0, a0, m;\n\t"            // lo + 1
        "add.u32 a1, a1, m;\n\t"            // 0 - 1 = 2^32 - 1
        "sub.cc.u32 a0, a0, b0;\n\t"
        "subc.cc.u32 a1, a1, b1;\n\t"
        "subc.u32 m, 0, 0;\n\t"              // m = -borrow
        "sub.cc.u32 a0, a0, m;\n\t"          // - EPS when borrowed
        "subc.u32 a1, a1, 0;\n\t"
        "mov.b64 %0, {a0, a1};\n\t"
        "}"
        : "=l"(r) : "l"(a), "l"(b));
    return r;
}
#else
EXPS_HD uint64_t gl_add(uint64_t a, uint64_t b) { return gl_add_portable(a, b); }
EXPS_HD uint64_t gl_sub(uint64_t a, uint64_t b) { return gl_sub_portable(a, b); }
#endif

EXPS_HD uint64_t gl_neg(uint64_t a) { return a <= EXPS_P ? EXPS_P - a : 2 * EXPS_P - a; }

EXPS_HD uint64_t gl_mulhi(uint64_t a, uint64_t b) {
#ifdef __CUDA_ARCH__
    return __umul64hi(a, b);
#else
    return (uint64_t)(((unsigned __int128)a * b) >> 64);
#endif
}

// y = lo + (hi & EPS) * EPS - (hi >> 32); y < 0 ? y + p : y >= 2^64 ? y - p : y   (hi:lo = a * b)
// Equivalently r = d + k * EPS (mod 2^64) with s = lo + hl * EPS (carry c), d = s - hh (borrow b),
// k = c - b in {-1, 0, 1}: the device version computes exactly that with carry flags.
EXPS_HD uint64_t gl_mul_portable(uint64_t a, uint64_t b) {
    uint64_t lo = a * b, hi = gl_mulhi(a, b);
    uint64_t hh = hi >> 32, hl = hi & EXPS_EPS;
    uint64_t t = lo + hl * EXPS_EPS;
    uint64_t r = t - hh;
    if (t < lo) {                               // carry out of lo + hl*EPS
        if (t >= hh) r += EXPS_EPS;             // y >= 2^64: y - p
    } else if (t < hh) {
        r += EXPS_P;                            // y < 0: y + p
    }
    return r;
}

#ifdef EXPS_DEVICE_PTX
// Device: the 128-bit product (r0, r1, r2, r3) from four 32x32 partial products with carry chains,
// then the reduction above in the other order: d = lo - hh first (borrow b, kept as -b), then
// s = d + hl * EPS as one wide multiply-add (carry c), so that Y = lo + hl * EPS - hh = s +
// (c - b) * 2^64 and k = c - b is one IADD3.X of both carries (ptxas folds -b + c into it: no SEL);
// r = s + k * EPS = s - sext(k) + (k << 32) as above. ptxas gives the accumulator pairs without a MOV:
// 15 SASS instructions, 3 IMAD.WIDE + 2 IMAD.HI + 2 IMAD + 8 ALU (in the order above: 18, of which
// 4 IMAD.WIDE + 1 IMAD.HI + 1 IMAD + 12 ALU, 3 of them MOVs; `bench/sass_pipes.py probe [FILE.cu]`
// counts either). Same words: r = Y - k * p with k = floor(Y / 2^64) in both orders
// (tests/test_ptx_forms.py; bench/fieldops.py on a GPU).
#ifndef EXPS_GL_MUL_DEFINED   // a bench A/B defines it and a gl_mul of its own
__device__ __forceinline__ uint64_t gl_mul(uint64_t a, uint64_t b) {
    uint64_t r;
    asm("{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb, k, s0, s1, sh;\n\t"
        ".reg .u64 d, t, s;\n\t"
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
        "sub.cc.u32 r0, r0, r3;\n\t"        // d = lo - hh, borrow b
        "subc.cc.u32 r1, r1, 0;\n\t"
        "subc.u32 nb, 0, 0;\n\t"            // nb = -b
        "mov.b64 d, {r0, r1};\n\t"
        "mul.wide.u32 t, r2, 0xFFFFFFFF;\n\t"
        "add.cc.u64 s, d, t;\n\t"          // s = d + hl * EPS, carry c
        "addc.u32 k, nb, 0;\n\t"            // k = c - b
        "mov.b64 {s0, s1}, s;\n\t"
        "shr.s32 sh, k, 31;\n\t"
        "sub.cc.u32 s0, s0, k;\n\t"         // s - sext(k) ...
        "subc.u32 s1, s1, sh;\n\t"
        "add.u32 s1, s1, k;\n\t"            // ... + (k << 32)
        "mov.b64 %0, {s0, s1};\n\t"
        "}"
        : "=l"(r) : "l"(a), "l"(b));
    return r;
}
#endif

#else
EXPS_HD uint64_t gl_mul(uint64_t a, uint64_t b) { return gl_mul_portable(a, b); }
#endif

// s^(2^n) * m: n raw squarings, then one raw multiplication (a loop on the device: see EXPS_HD_OUTLINE).
EXPS_HD uint64_t gl_sqrn_mul(uint64_t s, int n, uint64_t m) {
#ifdef __CUDA_ARCH__
#pragma unroll 1
#endif
    for (int i = 0; i < n; ++i) s = gl_mul(s, s);
    return gl_mul(s, m);
}

// a^(p-2) by sppark's addition chain (raw multiplications); inv(0) = 0.
EXPS_HD_OUTLINE uint64_t gl_inv(uint64_t x) {
    uint64_t t0, t1;
    t1 = gl_sqrn_mul(x, 1, x);
    t0 = gl_sqrn_mul(t1, 2, t1);
    t0 = gl_sqrn_mul(t0, 2, t1);
    t1 = gl_sqrn_mul(t0, 6, t0);
    t1 = gl_sqrn_mul(t1, 12, t1);
    t1 = gl_sqrn_mul(t1, 6, t0);
    t1 = gl_sqrn_mul(t1, 1, x);
    t1 = gl_sqrn_mul(t1, 32, t1);
    t1 = gl_sqrn_mul(t1, 1, x);
    return t1;
}

// ------------------------------------------------------------------------- cubic extension
struct gl3 { uint64_t v0, v1, v2; };

EXPS_HD gl3 gl3_make(uint64_t a, uint64_t b, uint64_t c) { gl3 r; r.v0 = a; r.v1 = b; r.v2 = c; return r; }
EXPS_HD gl3 gl3_add(gl3 a, gl3 b) { return gl3_make(gl_add(a.v0, b.v0), gl_add(a.v1, b.v1), gl_add(a.v2, b.v2)); }
EXPS_HD gl3 gl3_sub(gl3 a, gl3 b) { return gl3_make(gl_sub(a.v0, b.v0), gl_sub(a.v1, b.v1), gl_sub(a.v2, b.v2)); }
EXPS_HD gl3 gl3_add31(gl3 a, uint64_t b) { return gl3_make(gl_add(a.v0, b), a.v1, a.v2); }
EXPS_HD gl3 gl3_sub31(gl3 a, uint64_t b) { return gl3_make(gl_sub(a.v0, b), a.v1, a.v2); }
EXPS_HD gl3 gl3_rsub31(gl3 a, uint64_t b) { return gl3_make(gl_sub(b, a.v0), gl_neg(a.v1), gl_neg(a.v2)); }

#ifdef EXPS_DEVICE_PTX
// one asm statement each (bench/compound_ptx.py; defined with the accumulators' below)
__device__ __forceinline__ gl3 gl3_mul_ptx(gl3 a, gl3 b, uint64_t A01, uint64_t A02, uint64_t A12, uint64_t B01,
                                       uint64_t B02, uint64_t B12, uint32_t K1, uint32_t KE);
__device__ __forceinline__ gl3 gl3_mul31_ptx(gl3 a, uint64_t b);
#endif

EXPS_HD gl3 gl3_mul31(gl3 a, uint64_t b) {
#ifdef EXPS_DEVICE_PTX
    return gl3_mul31_ptx(a, b);
#else
    return gl3_make(gl_mul(a.v0, b), gl_mul(a.v1, b), gl_mul(a.v2, b));
#endif
}

EXPS_HD gl3 gl3_mul(gl3 a, gl3 b) {
    uint64_t A01 = gl_add(a.v0, a.v1), A02 = gl_add(a.v0, a.v2), A12 = gl_add(a.v1, a.v2);
    uint64_t B01 = gl_add(b.v0, b.v1), B02 = gl_add(b.v0, b.v2), B12 = gl_add(b.v1, b.v2);
#ifdef EXPS_DEVICE_PTX
    const uint32_t K1 = exps_k1();
    return gl3_mul_ptx(a, b, A01, A02, A12, B01, B02, B12, K1, 0u - K1);
#else
    uint64_t D = gl_mul(a.v0, b.v0), E = gl_mul(a.v1, b.v1), F = gl_mul(a.v2, b.v2);
    uint64_t G = gl_sub(D, E);
    uint64_t R0 = gl_mul(A12, B12), R1 = gl_mul(A01, B01), R2 = gl_mul(A02, B02);
    return gl3_make(gl_sub(gl_add(R0, G), F),
                    gl_sub(gl_sub(gl_sub(gl_add(R1, R0), E), E), D),
                    gl_sub(R2, G));
#endif
}

// gl3_inv's work before its base inverse: the norm t and the three numerators (spec §1.2, the same
// op order), so that a batch of rows can share one base inverse (exps_x_inv_thread below). Out of line
// on the device like the inverses (one copy per kernel that calls it).
EXPS_HD_OUTLINE void gl3_inv_parts(gl3 a, uint64_t* t_out, uint64_t* r) {
    uint64_t aa = gl_mul(a.v0, a.v0), ac = gl_mul(a.v0, a.v2), ba = gl_mul(a.v1, a.v0);
    uint64_t bb = gl_mul(a.v1, a.v1), bc = gl_mul(a.v1, a.v2), cc = gl_mul(a.v2, a.v2);
    uint64_t aaa = gl_mul(aa, a.v0), aac = gl_mul(aa, a.v2), abc = gl_mul(ba, a.v2);
    uint64_t abb = gl_mul(ba, a.v1), acc = gl_mul(ac, a.v2), bbb = gl_mul(bb, a.v1);
    uint64_t bcc = gl_mul(bc, a.v2), ccc = gl_mul(cc, a.v2);
    uint64_t t = gl_add(abc, abc);
    t = gl_add(t, abc); t = gl_add(t, abb); t = gl_sub(t, aaa); t = gl_sub(t, aac); t = gl_sub(t, aac);
    t = gl_sub(t, acc); t = gl_sub(t, bbb); t = gl_add(t, bcc); t = gl_sub(t, ccc);
    *t_out = t;
    r[0] = gl_sub(gl_sub(gl_sub(gl_sub(gl_add(bc, bb), aa), ac), ac), cc);
    r[1] = gl_sub(ba, cc);
    r[2] = gl_sub(gl_add(ac, cc), bb);
}

EXPS_HD_OUTLINE gl3 gl3_inv(gl3 a) {
    uint64_t t, r[3];
    gl3_inv_parts(a, &t, r);
    const uint64_t ti = gl_inv(t);
    return gl3_make(gl_mul(r[0], ti), gl_mul(r[1], ti), gl_mul(r[2], ti));
}

// ------------------------------------------------------------------------- evaluation context
// Base pointers and sizes one row evaluation needs (built once per thread from StepsParams).
struct ExpsCtx {
    const uint64_t* cm[4];   // stage s section base (cm[s]); column c, row l at cm[s][c * D + l]
    const uint64_t* cst;     // fixed columns: const tree (extended) or pConstPolsAddress (trace)
    const uint64_t* zi;      // everyRow zerofier (extended only)
    const uint64_t* publics;
    const uint64_t* challenges;
    const uint64_t* airvalues;
    const uint64_t* airgroupvalues;
    const uint64_t* proofvalues;
    const uint64_t* evals;
    const char* aux;         // P->aux_trace: the base of a Q kernel's exps_offs column offsets
    uint64_t D, mask;
    unsigned lg;             // log2(D): column c starts at c << lg
    // what the context was made of (exps_ctx's arguments): exps_q_exact makes its own from them,
    // so that a kernel that can call it need not keep this struct in memory (see there)
    const StepsParams* P;
    uint64_t o1, o2, o3, ozi;
};

// Read-only input loads (columns, constants, scalars: never written while a kernel runs).
#ifdef __CUDA_ARCH__
#define EXPS_LD(p) __ldg(p)
#else
#define EXPS_LD(p) (*(p))
#endif

// The smallest lg with 2^lg >= D (D <= 2^63), as one count-leading-zeros instead of a loop: a
// loop runs once per warp on the uniform datapath, ~8 instructions x log2(D) iterations, which at
// one row per thread is a few percent of a small kernel's issue slots.
EXPS_HD unsigned exps_log2_ceil(uint64_t D) {
#ifdef __CUDA_ARCH__
    return D <= 1 ? 0u : 64u - (unsigned)__clzll((long long)(D - 1));
#else
    return D <= 1 ? 0u : 64u - (unsigned)__builtin_clzll(D - 1);
#endif
}

EXPS_HD ExpsCtx exps_ctx(const StepsParams* P, uint64_t D, int extended, uint64_t o1, uint64_t o2,
                         uint64_t o3, uint64_t ozi) {
    ExpsCtx X;
    const uint64_t* aux = P->aux_trace;
    X.cm[0] = 0;
    X.cm[1] = extended ? aux + o1 : P->trace;    // trace-domain stage 1 reads P->trace (spec §2.4)
    X.cm[2] = aux + o2;
    X.cm[3] = aux + o3;
    X.cst = extended ? P->pConstPolsExtendedTreeAddress : P->pConstPolsAddress;
    X.zi = aux + ozi;
    X.aux = (const char*)aux;
    X.publics = P->publicInputs;
    X.challenges = P->challenges;
    X.airvalues = P->airValues;
    X.airgroupvalues = P->airgroupValues;
    X.proofvalues = P->proofValues;
    X.evals = P->evals;
    X.D = D;
    X.mask = D - 1;
    X.lg = exps_log2_ceil(D);
    X.P = P;
    X.o1 = o1;
    X.o2 = o2;
    X.o3 = o3;
    X.ozi = ozi;
    return X;
}

// Logical row of an opening: (row + shift) mod D, D a power of two.
#define EXPS_ROW(shift) ((row + (uint64_t)(int64_t)(shift)) & X.mask)

// ------------------------------------------------------------------------- value path (Q)
// The Q kernels compute a row with value-only arithmetic and store canon(v) where every output
// component is >= EPS: such a value has exactly one u64 encoding (canon(v) + p >= 2^64), so it is
// the word the production op order gives. A row with a smaller component runs the exact program
// (exps_q_exact below). docs/DESIGN-value-path.md; codegen/program.py.
//
// Value-only forms: right modulo p, not necessarily the production word. An accumulator (lo, hi)
// stands for lo + (int32)hi * 2^64, |hi| < 2^30. gl3_mul_v: the same six products as gl3_mul, each
// reduced only to (s, k) with Y = s + k 2^64 (gl_mul without its last four instructions), and each
// output component one accumulator with one reduction (three-word adds: 3 SASS each).
struct gl_acc { uint64_t lo; uint32_t hi; };

#ifdef EXPS_DEVICE_PTX
__device__ __forceinline__ gl_acc gl_acc_mul(uint64_t a, uint64_t b) {
    gl_acc r;
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
        "sub.cc.u32 r0, r0, r3;\n\t"        // d = lo - hh, borrow b
        "subc.cc.u32 r1, r1, 0;\n\t"
        "subc.u32 nb, 0, 0;\n\t"            // nb = -b
        "mov.b64 d, {r0, r1};\n\t"
        "mul.wide.u32 t, r2, 0xFFFFFFFF;\n\t"
        "add.cc.u64 %0, d, t;\n\t"          // s = d + hl * EPS, carry c
        "addc.u32 %1, nb, 0;\n\t"           // k = c - b
        "}"
        : "=l"(r.lo), "=r"(r.hi) : "l"(a), "l"(b));
    return r;
}

__device__ __forceinline__ gl_acc gl_acc_add(gl_acc x, gl_acc y) {
    gl_acc r;
    asm("add.cc.u64 %0, %2, %3;\n\taddc.u32 %1, %4, %5;" : "=l"(r.lo), "=r"(r.hi)
        : "l"(x.lo), "l"(y.lo), "r"(x.hi), "r"(y.hi));
    return r;
}

__device__ __forceinline__ gl_acc gl_acc_sub(gl_acc x, gl_acc y) {
    gl_acc r;
    asm("sub.cc.u64 %0, %2, %3;\n\tsubc.u32 %1, %4, %5;" : "=l"(r.lo), "=r"(r.hi)
        : "l"(x.lo), "l"(y.lo), "r"(x.hi), "r"(y.hi));
    return r;
}

// lo + h 2^64 = lo + h EPS (mod p): t = h EPS as a signed 64-bit word (|t| < 2^62), s = lo + t with
// k = carry - [t < 0] in {-1, 0, 1}, then s + k EPS = s - sext(k) + (k << 32), which cannot wrap
// again (k = 1: s < 2^62; k = -1: s > 2^64 - 2^62).
__device__ __forceinline__ uint64_t gl_acc_red(gl_acc x) {
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
#else
// The same steps in C (the host check's form, and the device's under -DEXPS_PORTABLE).
EXPS_HD gl_acc gl_acc_mul(uint64_t a, uint64_t b) {
    const uint64_t lo = a * b, hi = gl_mulhi(a, b), hh = hi >> 32, hl = hi & EXPS_EPS;
    const uint64_t d = lo - hh, t = hl * EXPS_EPS, s = d + t;
    gl_acc r;
    r.lo = s;
    r.hi = (uint32_t)(s < d) - (uint32_t)(lo < hh);
    return r;
}
EXPS_HD gl_acc gl_acc_add(gl_acc x, gl_acc y) {
    gl_acc r;
    r.lo = x.lo + y.lo;
    r.hi = x.hi + y.hi + (uint32_t)(r.lo < x.lo);
    return r;
}
EXPS_HD gl_acc gl_acc_sub(gl_acc x, gl_acc y) {
    gl_acc r;
    r.lo = x.lo - y.lo;
    r.hi = x.hi - y.hi - (uint32_t)(x.lo < y.lo);
    return r;
}
EXPS_HD uint64_t gl_acc_red(gl_acc x) {
    const int64_t h = (int32_t)x.hi;
    const uint64_t t = (uint64_t)(h * (int64_t)EXPS_EPS), s = x.lo + t;
    const int64_t k = (int64_t)(s < x.lo) - (int64_t)(h < 0);
    return s + (uint64_t)(k * (int64_t)EXPS_EPS);
}
#endif

// A cubic-extension value as three accumulators: what a 3x3 or 3x1 product leaves before its
// reductions, so that the adds and subs that consume it (emit: a value read once, by an add or
// sub of the same chunk) work on the accumulators and one reduction per component is left for the
// last of them (three-word adds, 3 SASS, instead of a reduction and a partially reduced add, ~23).
// Bounds: |hi| <= 9 after gl3_acc_mul, 1 after gl3_acc_mul31, 0 for a word; an add or sub adds its
// operands' bounds plus 1 (emit.ACC_HI_BOUND keeps every tree far below gl_acc_red's 2^30).
struct gl3_acc { gl_acc c0, c1, c2; };

EXPS_HD gl_acc gl_acc_w(uint64_t w) { gl_acc r; r.lo = w; r.hi = 0; return r; }
EXPS_HD gl3_acc gl3_acc_make(gl_acc a, gl_acc b, gl_acc c) { gl3_acc r; r.c0 = a; r.c1 = b; r.c2 = c; return r; }
EXPS_HD gl3_acc gl3_acc_w(gl3 w) { return gl3_acc_make(gl_acc_w(w.v0), gl_acc_w(w.v1), gl_acc_w(w.v2)); }

// The device forms of the compound accumulator ops below: the PTX of their primitives in the order
// the C composition calls them, in one asm statement each (cicc's time grows with the number of asm
// statements: bench/compound_ptx.py, which writes this block, says by how much; tests/test_acc.py
// runs it against the primitives; ptxas sees the same instructions).
#ifdef EXPS_DEVICE_PTX
// ---- compound_ptx: generated by bench/compound_ptx.py, do not edit
__device__ __forceinline__ gl3_acc gl3_acc_mul_ptx(gl3 a, gl3 b, uint64_t A01, uint64_t A02, uint64_t A12, uint64_t B01,
                                                uint64_t B02, uint64_t B12) {
    gl3_acc r;
    asm("{\n\t"
        ".reg .u64 Dl, El, Fl, R0l, R1l, R2l, Gl, c0l, c1l, c2l;\n\t"
        ".reg .u32 Dh, Eh, Fh, R0h, R1h, R2h, Gh, c0h, c1h, c2h;\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb;\n\t"
        ".reg .u64 d, t;\n\t"
        "mov.b64 {a0, a1}, %6;\n\t"
        "mov.b64 {b0, b1}, %9;\n\t"
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
        "add.cc.u64 Dl, d, t;\n\t"
        "addc.u32 Dh, nb, 0;\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb;\n\t"
        ".reg .u64 d, t;\n\t"
        "mov.b64 {a0, a1}, %7;\n\t"
        "mov.b64 {b0, b1}, %10;\n\t"
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
        "add.cc.u64 El, d, t;\n\t"
        "addc.u32 Eh, nb, 0;\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb;\n\t"
        ".reg .u64 d, t;\n\t"
        "mov.b64 {a0, a1}, %8;\n\t"
        "mov.b64 {b0, b1}, %11;\n\t"
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
        "add.cc.u64 Fl, d, t;\n\t"
        "addc.u32 Fh, nb, 0;\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb;\n\t"
        ".reg .u64 d, t;\n\t"
        "mov.b64 {a0, a1}, %14;\n\t"
        "mov.b64 {b0, b1}, %17;\n\t"
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
        "add.cc.u64 R0l, d, t;\n\t"
        "addc.u32 R0h, nb, 0;\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb;\n\t"
        ".reg .u64 d, t;\n\t"
        "mov.b64 {a0, a1}, %12;\n\t"
        "mov.b64 {b0, b1}, %15;\n\t"
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
        "add.cc.u64 R1l, d, t;\n\t"
        "addc.u32 R1h, nb, 0;\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb;\n\t"
        ".reg .u64 d, t;\n\t"
        "mov.b64 {a0, a1}, %13;\n\t"
        "mov.b64 {b0, b1}, %16;\n\t"
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
        "add.cc.u64 R2l, d, t;\n\t"
        "addc.u32 R2h, nb, 0;\n\t"
        "}\n\t"
        "sub.cc.u64 Gl, Dl, El;\n\t"
        "subc.u32 Gh, Dh, Eh;\n\t"
        "add.cc.u64 c0l, R0l, Gl;\n\t"
        "addc.u32 c0h, R0h, Gh;\n\t"
        "sub.cc.u64 c0l, c0l, Fl;\n\t"
        "subc.u32 c0h, c0h, Fh;\n\t"
        "add.cc.u64 c1l, R1l, R0l;\n\t"
        "addc.u32 c1h, R1h, R0h;\n\t"
        "sub.cc.u64 c1l, c1l, El;\n\t"
        "subc.u32 c1h, c1h, Eh;\n\t"
        "sub.cc.u64 c1l, c1l, El;\n\t"
        "subc.u32 c1h, c1h, Eh;\n\t"
        "sub.cc.u64 c1l, c1l, Dl;\n\t"
        "subc.u32 c1h, c1h, Dh;\n\t"
        "sub.cc.u64 c2l, R2l, Gl;\n\t"
        "subc.u32 c2h, R2h, Gh;\n\t"
        "mov.b64 %0, c0l;\n\t"
        "mov.b32 %1, c0h;\n\t"
        "mov.b64 %2, c1l;\n\t"
        "mov.b32 %3, c1h;\n\t"
        "mov.b64 %4, c2l;\n\t"
        "mov.b32 %5, c2h;\n\t"
        "}"
        : "=l"(r.c0.lo), "=r"(r.c0.hi), "=l"(r.c1.lo), "=r"(r.c1.hi), "=l"(r.c2.lo), "=r"(r.c2.hi)
        : "l"(a.v0), "l"(a.v1), "l"(a.v2), "l"(b.v0), "l"(b.v1), "l"(b.v2), "l"(A01), "l"(A02), "l"(A12), "l"(B01), "l"(B02), "l"(B12));
    return r;
}

__device__ __forceinline__ gl3_acc gl3_acc_mul31_ptx(gl3 a, uint64_t b) {
    gl3_acc r;
    asm("{\n\t"
        ".reg .u64 l0, l1, l2;\n\t"
        ".reg .u32 h0, h1, h2;\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb;\n\t"
        ".reg .u64 d, t;\n\t"
        "mov.b64 {a0, a1}, %6;\n\t"
        "mov.b64 {b0, b1}, %9;\n\t"
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
        "add.cc.u64 l0, d, t;\n\t"
        "addc.u32 h0, nb, 0;\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb;\n\t"
        ".reg .u64 d, t;\n\t"
        "mov.b64 {a0, a1}, %7;\n\t"
        "mov.b64 {b0, b1}, %9;\n\t"
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
        "add.cc.u64 l1, d, t;\n\t"
        "addc.u32 h1, nb, 0;\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb;\n\t"
        ".reg .u64 d, t;\n\t"
        "mov.b64 {a0, a1}, %8;\n\t"
        "mov.b64 {b0, b1}, %9;\n\t"
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
        "add.cc.u64 l2, d, t;\n\t"
        "addc.u32 h2, nb, 0;\n\t"
        "}\n\t"
        "mov.b64 %0, l0;\n\t"
        "mov.b32 %1, h0;\n\t"
        "mov.b64 %2, l1;\n\t"
        "mov.b32 %3, h1;\n\t"
        "mov.b64 %4, l2;\n\t"
        "mov.b32 %5, h2;\n\t"
        "}"
        : "=l"(r.c0.lo), "=r"(r.c0.hi), "=l"(r.c1.lo), "=r"(r.c1.hi), "=l"(r.c2.lo), "=r"(r.c2.hi)
        : "l"(a.v0), "l"(a.v1), "l"(a.v2), "l"(b));
    return r;
}

__device__ __forceinline__ gl3_acc gl3_acc_add_ptx(gl3_acc x, gl3_acc y) {
    gl3_acc r;
    asm("{\n\t"
        ".reg .u64 l0, l1, l2;\n\t"
        ".reg .u32 h0, h1, h2;\n\t"
        "add.cc.u64 l0, %6, %12;\n\t"
        "addc.u32 h0, %7, %13;\n\t"
        "add.cc.u64 l1, %8, %14;\n\t"
        "addc.u32 h1, %9, %15;\n\t"
        "add.cc.u64 l2, %10, %16;\n\t"
        "addc.u32 h2, %11, %17;\n\t"
        "mov.b64 %0, l0;\n\t"
        "mov.b32 %1, h0;\n\t"
        "mov.b64 %2, l1;\n\t"
        "mov.b32 %3, h1;\n\t"
        "mov.b64 %4, l2;\n\t"
        "mov.b32 %5, h2;\n\t"
        "}"
        : "=l"(r.c0.lo), "=r"(r.c0.hi), "=l"(r.c1.lo), "=r"(r.c1.hi), "=l"(r.c2.lo), "=r"(r.c2.hi)
        : "l"(x.c0.lo), "r"(x.c0.hi), "l"(x.c1.lo), "r"(x.c1.hi), "l"(x.c2.lo), "r"(x.c2.hi), "l"(y.c0.lo), "r"(y.c0.hi), "l"(y.c1.lo), "r"(y.c1.hi), "l"(y.c2.lo), "r"(y.c2.hi));
    return r;
}

__device__ __forceinline__ gl3_acc gl3_acc_sub_ptx(gl3_acc x, gl3_acc y) {
    gl3_acc r;
    asm("{\n\t"
        ".reg .u64 l0, l1, l2;\n\t"
        ".reg .u32 h0, h1, h2;\n\t"
        "sub.cc.u64 l0, %6, %12;\n\t"
        "subc.u32 h0, %7, %13;\n\t"
        "sub.cc.u64 l1, %8, %14;\n\t"
        "subc.u32 h1, %9, %15;\n\t"
        "sub.cc.u64 l2, %10, %16;\n\t"
        "subc.u32 h2, %11, %17;\n\t"
        "mov.b64 %0, l0;\n\t"
        "mov.b32 %1, h0;\n\t"
        "mov.b64 %2, l1;\n\t"
        "mov.b32 %3, h1;\n\t"
        "mov.b64 %4, l2;\n\t"
        "mov.b32 %5, h2;\n\t"
        "}"
        : "=l"(r.c0.lo), "=r"(r.c0.hi), "=l"(r.c1.lo), "=r"(r.c1.hi), "=l"(r.c2.lo), "=r"(r.c2.hi)
        : "l"(x.c0.lo), "r"(x.c0.hi), "l"(x.c1.lo), "r"(x.c1.hi), "l"(x.c2.lo), "r"(x.c2.hi), "l"(y.c0.lo), "r"(y.c0.hi), "l"(y.c1.lo), "r"(y.c1.hi), "l"(y.c2.lo), "r"(y.c2.hi));
    return r;
}

__device__ __forceinline__ gl3 gl3_acc_red_ptx(gl3_acc x) {
    gl3 r;
    asm("{\n\t"
        "{\n\t"
        ".reg .u32 sh, t0, t1, s0, s1, k, sk;\n\t"
        ".reg .u64 t, s;\n\t"
        "shr.s32 sh, %4, 31;\n\t"
        "sub.cc.u32 t0, 0, %4;\n\t"
        "subc.u32 t1, %4, sh;\n\t"
        "mov.b64 t, {t0, t1};\n\t"
        "add.cc.u64 s, %3, t;\n\t"
        "addc.u32 k, sh, 0;\n\t"
        "mov.b64 {s0, s1}, s;\n\t"
        "shr.s32 sk, k, 31;\n\t"
        "sub.cc.u32 s0, s0, k;\n\t"
        "subc.u32 s1, s1, sk;\n\t"
        "add.u32 s1, s1, k;\n\t"
        "mov.b64 %0, {s0, s1};\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 sh, t0, t1, s0, s1, k, sk;\n\t"
        ".reg .u64 t, s;\n\t"
        "shr.s32 sh, %6, 31;\n\t"
        "sub.cc.u32 t0, 0, %6;\n\t"
        "subc.u32 t1, %6, sh;\n\t"
        "mov.b64 t, {t0, t1};\n\t"
        "add.cc.u64 s, %5, t;\n\t"
        "addc.u32 k, sh, 0;\n\t"
        "mov.b64 {s0, s1}, s;\n\t"
        "shr.s32 sk, k, 31;\n\t"
        "sub.cc.u32 s0, s0, k;\n\t"
        "subc.u32 s1, s1, sk;\n\t"
        "add.u32 s1, s1, k;\n\t"
        "mov.b64 %1, {s0, s1};\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 sh, t0, t1, s0, s1, k, sk;\n\t"
        ".reg .u64 t, s;\n\t"
        "shr.s32 sh, %8, 31;\n\t"
        "sub.cc.u32 t0, 0, %8;\n\t"
        "subc.u32 t1, %8, sh;\n\t"
        "mov.b64 t, {t0, t1};\n\t"
        "add.cc.u64 s, %7, t;\n\t"
        "addc.u32 k, sh, 0;\n\t"
        "mov.b64 {s0, s1}, s;\n\t"
        "shr.s32 sk, k, 31;\n\t"
        "sub.cc.u32 s0, s0, k;\n\t"
        "subc.u32 s1, s1, sk;\n\t"
        "add.u32 s1, s1, k;\n\t"
        "mov.b64 %2, {s0, s1};\n\t"
        "}\n\t"
        "}"
        : "=&l"(r.v0), "=&l"(r.v1), "=&l"(r.v2)
        : "l"(x.c0.lo), "r"(x.c0.hi), "l"(x.c1.lo), "r"(x.c1.hi), "l"(x.c2.lo), "r"(x.c2.hi));
    return r;
}

__device__ __forceinline__ gl3 gl3_mul_ptx(gl3 a, gl3 b, uint64_t A01, uint64_t A02, uint64_t A12, uint64_t B01, uint64_t B02,
                                       uint64_t B12, uint32_t K1, uint32_t KE) {
    gl3 r;
    asm("{\n\t"
        ".reg .u64 m_D, m_E, m_F, m_G, m_R0, m_R1, m_R2, m_t, m_u, m_c0, m_c1, m_c2;\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb, k, s0, s1, sh;\n\t"
        ".reg .u64 d, t, s;\n\t"
        "mov.b64 {a0, a1}, %3;\n\t"
        "mov.b64 {b0, b1}, %6;\n\t"
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
        "add.cc.u64 s, d, t;\n\t"
        "addc.u32 k, nb, 0;\n\t"
        "mov.b64 {s0, s1}, s;\n\t"
        "shr.s32 sh, k, 31;\n\t"
        "sub.cc.u32 s0, s0, k;\n\t"
        "subc.u32 s1, s1, sh;\n\t"
        "add.u32 s1, s1, k;\n\t"
        "mov.b64 m_D, {s0, s1};\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb, k, s0, s1, sh;\n\t"
        ".reg .u64 d, t, s;\n\t"
        "mov.b64 {a0, a1}, %4;\n\t"
        "mov.b64 {b0, b1}, %7;\n\t"
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
        "add.cc.u64 s, d, t;\n\t"
        "addc.u32 k, nb, 0;\n\t"
        "mov.b64 {s0, s1}, s;\n\t"
        "shr.s32 sh, k, 31;\n\t"
        "sub.cc.u32 s0, s0, k;\n\t"
        "subc.u32 s1, s1, sh;\n\t"
        "add.u32 s1, s1, k;\n\t"
        "mov.b64 m_E, {s0, s1};\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb, k, s0, s1, sh;\n\t"
        ".reg .u64 d, t, s;\n\t"
        "mov.b64 {a0, a1}, %5;\n\t"
        "mov.b64 {b0, b1}, %8;\n\t"
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
        "add.cc.u64 s, d, t;\n\t"
        "addc.u32 k, nb, 0;\n\t"
        "mov.b64 {s0, s1}, s;\n\t"
        "shr.s32 sh, k, 31;\n\t"
        "sub.cc.u32 s0, s0, k;\n\t"
        "subc.u32 s1, s1, sh;\n\t"
        "add.u32 s1, s1, k;\n\t"
        "mov.b64 m_F, {s0, s1};\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, m, t;\n\t"
        "mov.b64 {a0, a1}, m_D;\n\t"
        "mov.b64 {b0, b1}, m_E;\n\t"
        "sub.cc.u32 t, a0, 0xFFFFFFFF;\n\t"
        "subc.cc.u32 t, a1, 0;\n\t"
        "subc.u32 m, 0, 0;\n\t"
        "sub.u32 a0, a0, m;\n\t"
        "add.u32 a1, a1, m;\n\t"
        "sub.cc.u32 a0, a0, b0;\n\t"
        "subc.cc.u32 a1, a1, b1;\n\t"
        "subc.u32 m, 0, 0;\n\t"
        "sub.cc.u32 a0, a0, m;\n\t"
        "subc.u32 a1, a1, 0;\n\t"
        "mov.b64 m_G, {a0, a1};\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb, k, s0, s1, sh;\n\t"
        ".reg .u64 d, t, s;\n\t"
        "mov.b64 {a0, a1}, %11;\n\t"
        "mov.b64 {b0, b1}, %14;\n\t"
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
        "add.cc.u64 s, d, t;\n\t"
        "addc.u32 k, nb, 0;\n\t"
        "mov.b64 {s0, s1}, s;\n\t"
        "shr.s32 sh, k, 31;\n\t"
        "sub.cc.u32 s0, s0, k;\n\t"
        "subc.u32 s1, s1, sh;\n\t"
        "add.u32 s1, s1, k;\n\t"
        "mov.b64 m_R0, {s0, s1};\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb, k, s0, s1, sh;\n\t"
        ".reg .u64 d, t, s;\n\t"
        "mov.b64 {a0, a1}, %9;\n\t"
        "mov.b64 {b0, b1}, %12;\n\t"
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
        "add.cc.u64 s, d, t;\n\t"
        "addc.u32 k, nb, 0;\n\t"
        "mov.b64 {s0, s1}, s;\n\t"
        "shr.s32 sh, k, 31;\n\t"
        "sub.cc.u32 s0, s0, k;\n\t"
        "subc.u32 s1, s1, sh;\n\t"
        "add.u32 s1, s1, k;\n\t"
        "mov.b64 m_R1, {s0, s1};\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb, k, s0, s1, sh;\n\t"
        ".reg .u64 d, t, s;\n\t"
        "mov.b64 {a0, a1}, %10;\n\t"
        "mov.b64 {b0, b1}, %13;\n\t"
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
        "add.cc.u64 s, d, t;\n\t"
        "addc.u32 k, nb, 0;\n\t"
        "mov.b64 {s0, s1}, s;\n\t"
        "shr.s32 sh, k, 31;\n\t"
        "sub.cc.u32 s0, s0, k;\n\t"
        "subc.u32 s1, s1, sh;\n\t"
        "add.u32 s1, s1, k;\n\t"
        "mov.b64 m_R2, {s0, s1};\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, pv, c0, c1, t;\n\t"
        "mov.b64 {a0, a1}, m_R0;\n\t"
        "add.cc.u32 t, a0, 0xFFFFFFFF;\n\t"
        "addc.cc.u32 t, a1, 0;\n\t"
        "madc.lo.u32 pv, 0, 0, 0;\n\t"
        "mad.lo.u32 c0, pv, %16, a0;\n\t"
        "mad.lo.u32 c1, pv, %15, a1;\n\t"
        "mov.b64 m_t, {c0, c1};\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, c;\n\t"
        "mov.b64 {a0, a1}, m_t;\n\t"
        "mov.b64 {b0, b1}, m_G;\n\t"
        "add.cc.u32 a0, a0, b0;\n\t"
        "addc.cc.u32 a1, a1, b1;\n\t"
        "madc.lo.u32 c, 0, 0, 0;\n\t"
        "sub.cc.u32 a0, a0, c;\n\t"
        "subc.u32 a1, a1, 0;\n\t"
        "mad.lo.u32 a1, c, %15, a1;\n\t"
        "mov.b64 m_t, {a0, a1};\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, m, t;\n\t"
        "mov.b64 {a0, a1}, m_t;\n\t"
        "mov.b64 {b0, b1}, m_F;\n\t"
        "sub.cc.u32 t, a0, 0xFFFFFFFF;\n\t"
        "subc.cc.u32 t, a1, 0;\n\t"
        "subc.u32 m, 0, 0;\n\t"
        "sub.u32 a0, a0, m;\n\t"
        "add.u32 a1, a1, m;\n\t"
        "sub.cc.u32 a0, a0, b0;\n\t"
        "subc.cc.u32 a1, a1, b1;\n\t"
        "subc.u32 m, 0, 0;\n\t"
        "sub.cc.u32 a0, a0, m;\n\t"
        "subc.u32 a1, a1, 0;\n\t"
        "mov.b64 m_c0, {a0, a1};\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, pv, c0, c1, t;\n\t"
        "mov.b64 {a0, a1}, m_R1;\n\t"
        "add.cc.u32 t, a0, 0xFFFFFFFF;\n\t"
        "addc.cc.u32 t, a1, 0;\n\t"
        "madc.lo.u32 pv, 0, 0, 0;\n\t"
        "mad.lo.u32 c0, pv, %16, a0;\n\t"
        "mad.lo.u32 c1, pv, %15, a1;\n\t"
        "mov.b64 m_u, {c0, c1};\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, c;\n\t"
        "mov.b64 {a0, a1}, m_u;\n\t"
        "mov.b64 {b0, b1}, m_R0;\n\t"
        "add.cc.u32 a0, a0, b0;\n\t"
        "addc.cc.u32 a1, a1, b1;\n\t"
        "madc.lo.u32 c, 0, 0, 0;\n\t"
        "sub.cc.u32 a0, a0, c;\n\t"
        "subc.u32 a1, a1, 0;\n\t"
        "mad.lo.u32 a1, c, %15, a1;\n\t"
        "mov.b64 m_u, {a0, a1};\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, m, t;\n\t"
        "mov.b64 {a0, a1}, m_u;\n\t"
        "mov.b64 {b0, b1}, m_E;\n\t"
        "sub.cc.u32 t, a0, 0xFFFFFFFF;\n\t"
        "subc.cc.u32 t, a1, 0;\n\t"
        "subc.u32 m, 0, 0;\n\t"
        "sub.u32 a0, a0, m;\n\t"
        "add.u32 a1, a1, m;\n\t"
        "sub.cc.u32 a0, a0, b0;\n\t"
        "subc.cc.u32 a1, a1, b1;\n\t"
        "subc.u32 m, 0, 0;\n\t"
        "sub.cc.u32 a0, a0, m;\n\t"
        "subc.u32 a1, a1, 0;\n\t"
        "mov.b64 m_u, {a0, a1};\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, m, t;\n\t"
        "mov.b64 {a0, a1}, m_u;\n\t"
        "mov.b64 {b0, b1}, m_E;\n\t"
        "sub.cc.u32 t, a0, 0xFFFFFFFF;\n\t"
        "subc.cc.u32 t, a1, 0;\n\t"
        "subc.u32 m, 0, 0;\n\t"
        "sub.u32 a0, a0, m;\n\t"
        "add.u32 a1, a1, m;\n\t"
        "sub.cc.u32 a0, a0, b0;\n\t"
        "subc.cc.u32 a1, a1, b1;\n\t"
        "subc.u32 m, 0, 0;\n\t"
        "sub.cc.u32 a0, a0, m;\n\t"
        "subc.u32 a1, a1, 0;\n\t"
        "mov.b64 m_u, {a0, a1};\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, m, t;\n\t"
        "mov.b64 {a0, a1}, m_u;\n\t"
        "mov.b64 {b0, b1}, m_D;\n\t"
        "sub.cc.u32 t, a0, 0xFFFFFFFF;\n\t"
        "subc.cc.u32 t, a1, 0;\n\t"
        "subc.u32 m, 0, 0;\n\t"
        "sub.u32 a0, a0, m;\n\t"
        "add.u32 a1, a1, m;\n\t"
        "sub.cc.u32 a0, a0, b0;\n\t"
        "subc.cc.u32 a1, a1, b1;\n\t"
        "subc.u32 m, 0, 0;\n\t"
        "sub.cc.u32 a0, a0, m;\n\t"
        "subc.u32 a1, a1, 0;\n\t"
        "mov.b64 m_c1, {a0, a1};\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, m, t;\n\t"
        "mov.b64 {a0, a1}, m_R2;\n\t"
        "mov.b64 {b0, b1}, m_G;\n\t"
        "sub.cc.u32 t, a0, 0xFFFFFFFF;\n\t"
        "subc.cc.u32 t, a1, 0;\n\t"
        "subc.u32 m, 0, 0;\n\t"
        "sub.u32 a0, a0, m;\n\t"
        "add.u32 a1, a1, m;\n\t"
        "sub.cc.u32 a0, a0, b0;\n\t"
        "subc.cc.u32 a1, a1, b1;\n\t"
        "subc.u32 m, 0, 0;\n\t"
        "sub.cc.u32 a0, a0, m;\n\t"
        "subc.u32 a1, a1, 0;\n\t"
        "mov.b64 m_c2, {a0, a1};\n\t"
        "}\n\t"
        "mov.b64 %0, m_c0;\n\t"
        "mov.b64 %1, m_c1;\n\t"
        "mov.b64 %2, m_c2;\n\t"
        "}"
        : "=l"(r.v0), "=l"(r.v1), "=l"(r.v2)
        : "l"(a.v0), "l"(a.v1), "l"(a.v2), "l"(b.v0), "l"(b.v1), "l"(b.v2), "l"(A01), "l"(A02), "l"(A12), "l"(B01), "l"(B02), "l"(B12), "r"(K1), "r"(KE));
    return r;
}

__device__ __forceinline__ gl3 gl3_mul31_ptx(gl3 a, uint64_t b) {
    gl3 r;
    asm("{\n\t"
        ".reg .u64 m_c0, m_c1, m_c2;\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb, k, s0, s1, sh;\n\t"
        ".reg .u64 d, t, s;\n\t"
        "mov.b64 {a0, a1}, %3;\n\t"
        "mov.b64 {b0, b1}, %6;\n\t"
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
        "add.cc.u64 s, d, t;\n\t"
        "addc.u32 k, nb, 0;\n\t"
        "mov.b64 {s0, s1}, s;\n\t"
        "shr.s32 sh, k, 31;\n\t"
        "sub.cc.u32 s0, s0, k;\n\t"
        "subc.u32 s1, s1, sh;\n\t"
        "add.u32 s1, s1, k;\n\t"
        "mov.b64 m_c0, {s0, s1};\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb, k, s0, s1, sh;\n\t"
        ".reg .u64 d, t, s;\n\t"
        "mov.b64 {a0, a1}, %4;\n\t"
        "mov.b64 {b0, b1}, %6;\n\t"
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
        "add.cc.u64 s, d, t;\n\t"
        "addc.u32 k, nb, 0;\n\t"
        "mov.b64 {s0, s1}, s;\n\t"
        "shr.s32 sh, k, 31;\n\t"
        "sub.cc.u32 s0, s0, k;\n\t"
        "subc.u32 s1, s1, sh;\n\t"
        "add.u32 s1, s1, k;\n\t"
        "mov.b64 m_c1, {s0, s1};\n\t"
        "}\n\t"
        "{\n\t"
        ".reg .u32 a0, a1, b0, b1, r0, r1, r2, r3, nb, k, s0, s1, sh;\n\t"
        ".reg .u64 d, t, s;\n\t"
        "mov.b64 {a0, a1}, %5;\n\t"
        "mov.b64 {b0, b1}, %6;\n\t"
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
        "add.cc.u64 s, d, t;\n\t"
        "addc.u32 k, nb, 0;\n\t"
        "mov.b64 {s0, s1}, s;\n\t"
        "shr.s32 sh, k, 31;\n\t"
        "sub.cc.u32 s0, s0, k;\n\t"
        "subc.u32 s1, s1, sh;\n\t"
        "add.u32 s1, s1, k;\n\t"
        "mov.b64 m_c2, {s0, s1};\n\t"
        "}\n\t"
        "mov.b64 %0, m_c0;\n\t"
        "mov.b64 %1, m_c1;\n\t"
        "mov.b64 %2, m_c2;\n\t"
        "}"
        : "=l"(r.v0), "=l"(r.v1), "=l"(r.v2)
        : "l"(a.v0), "l"(a.v1), "l"(a.v2), "l"(b));
    return r;
}
// ---- compound_ptx end
#endif

// a * b: gl3_mul's six products, each reduced only to (s, k), summed in accumulators.
EXPS_HD gl3_acc gl3_acc_mul(gl3 a, gl3 b) {
    const uint64_t A01 = gl_add(a.v0, a.v1), A02 = gl_add(a.v0, a.v2), A12 = gl_add(a.v1, a.v2);
    const uint64_t B01 = gl_add(b.v0, b.v1), B02 = gl_add(b.v0, b.v2), B12 = gl_add(b.v1, b.v2);
#ifdef EXPS_DEVICE_PTX
    return gl3_acc_mul_ptx(a, b, A01, A02, A12, B01, B02, B12);
#else
    const gl_acc D = gl_acc_mul(a.v0, b.v0), E = gl_acc_mul(a.v1, b.v1), F = gl_acc_mul(a.v2, b.v2);
    const gl_acc R0 = gl_acc_mul(A12, B12), R1 = gl_acc_mul(A01, B01), R2 = gl_acc_mul(A02, B02);
    const gl_acc G = gl_acc_sub(D, E);
    return gl3_acc_make(gl_acc_sub(gl_acc_add(R0, G), F),
                        gl_acc_sub(gl_acc_sub(gl_acc_sub(gl_acc_add(R1, R0), E), E), D),
                        gl_acc_sub(R2, G));
#endif
}
EXPS_HD gl3_acc gl3_acc_mul31(gl3 a, uint64_t b) {
#ifdef EXPS_DEVICE_PTX
    return gl3_acc_mul31_ptx(a, b);
#else
    return gl3_acc_make(gl_acc_mul(a.v0, b), gl_acc_mul(a.v1, b), gl_acc_mul(a.v2, b));
#endif
}
EXPS_HD gl3_acc gl3_acc_add(gl3_acc x, gl3_acc y) {
#ifdef EXPS_DEVICE_PTX
    return gl3_acc_add_ptx(x, y);
#else
    return gl3_acc_make(gl_acc_add(x.c0, y.c0), gl_acc_add(x.c1, y.c1), gl_acc_add(x.c2, y.c2));
#endif
}
EXPS_HD gl3_acc gl3_acc_sub(gl3_acc x, gl3_acc y) {
#ifdef EXPS_DEVICE_PTX
    return gl3_acc_sub_ptx(x, y);
#else
    return gl3_acc_make(gl_acc_sub(x.c0, y.c0), gl_acc_sub(x.c1, y.c1), gl_acc_sub(x.c2, y.c2));
#endif
}
EXPS_HD gl3_acc gl3_acc_addw(gl3_acc x, gl3 w) { return gl3_acc_add(x, gl3_acc_w(w)); }
EXPS_HD gl3_acc gl3_acc_subw(gl3_acc x, gl3 w) { return gl3_acc_sub(x, gl3_acc_w(w)); }
EXPS_HD gl3_acc gl3_acc_wsub(gl3 w, gl3_acc x) { return gl3_acc_sub(gl3_acc_w(w), x); }
// x + w, x - w, w - x for a base-field word w (shape 31: component 0 only, w - x negates 1 and 2)
EXPS_HD gl3_acc gl3_acc_add31(gl3_acc x, uint64_t w) { return gl3_acc_make(gl_acc_add(x.c0, gl_acc_w(w)), x.c1, x.c2); }
EXPS_HD gl3_acc gl3_acc_sub31(gl3_acc x, uint64_t w) { return gl3_acc_make(gl_acc_sub(x.c0, gl_acc_w(w)), x.c1, x.c2); }
EXPS_HD gl3_acc gl3_acc_rsub31(gl3_acc x, uint64_t w) {
    return gl3_acc_make(gl_acc_sub(gl_acc_w(w), x.c0), gl_acc_sub(gl_acc_w(0), x.c1), gl_acc_sub(gl_acc_w(0), x.c2));
}
EXPS_HD gl3 gl3_acc_red(gl3_acc x) {
#ifdef EXPS_DEVICE_PTX
    return gl3_acc_red_ptx(x);
#else
    return gl3_make(gl_acc_red(x.c0), gl_acc_red(x.c1), gl_acc_red(x.c2));
#endif
}

// a * b as a field element (not the production word: gl3_mul's is).
EXPS_HD gl3 gl3_mul_v(gl3 a, gl3 b) { return gl3_acc_red(gl3_acc_mul(a, b)); }

// Every output component's value >= EPS (then canon(c) is the production word); dim 1: v0 only.
// -DEXPS_FORCE_EXACT (tests, gpucheck --force-exact): no row is, every row runs the exact program.
EXPS_HD int exps_fast_ok(gl3 r, int dim) {
#ifdef EXPS_FORCE_EXACT
    (void)r; (void)dim;
    return 0;
#endif
    return gl_canon(r.v0) >= EXPS_EPS && (dim == 1 || (gl_canon(r.v1) >= EXPS_EPS && gl_canon(r.v2) >= EXPS_EPS));
}

// The exact program (codegen/program.py): the Q expression's ops in order, lowered to the base ops
// the exact extension ops are made of, one per step (the evaluator's registers count toward every
// Q kernel's: a callee is allocated with its caller).
enum { EXPS_XOP_ADD = 0, EXPS_XOP_SUB = 1, EXPS_XOP_MUL = 2, EXPS_XOP_NEG = 3, EXPS_XOP_COPY = 4 };
enum { EXPS_XA_LOCAL = 0, EXPS_XA_SLOT = 1, EXPS_XA_NUMBER = 2, EXPS_XA_ZI = 3, EXPS_XA_CM = 4,
       EXPS_XA_CONST = 5, EXPS_XA_PUBLIC = 6, EXPS_XA_CHALLENGE = 7, EXPS_XA_EVAL = 8,
       EXPS_XA_AIRVALUE = 9, EXPS_XA_AIRGROUPVALUE = 10, EXPS_XA_PROOFVALUE = 11, EXPS_XA_NONE = 15 };
struct exps_xarg { uint32_t kind, stage; int64_t shift; uint64_t v; };
struct exps_xop { uint32_t op, dkind; uint64_t dst; exps_xarg a, b; };
#ifdef __CUDACC__
#define EXPS_PROGRAM __device__ const
#else
#define EXPS_PROGRAM static const
#endif

// The word an operand names, loaded as the kernel text loads it (emit._leaf_c; v = column + component).
EXPS_HD_OUTLINE uint64_t exps_xword(const ExpsCtx& X, uint64_t row, uint64_t lo, uint64_t wave,
                            const uint64_t* scratch, const uint64_t* loc, const exps_xarg& g) {
    switch (g.kind) {
    case EXPS_XA_LOCAL: return loc[g.v];
    case EXPS_XA_SLOT: return scratch[g.v * wave + lo];
    case EXPS_XA_NUMBER: return g.v;
    case EXPS_XA_ZI: return EXPS_LD(X.zi + row);
    case EXPS_XA_CM: return EXPS_LD(X.cm[g.stage] + (g.v << X.lg) + EXPS_ROW(g.shift));
    case EXPS_XA_CONST: return EXPS_LD(X.cst + (g.v << X.lg) + EXPS_ROW(g.shift));
    case EXPS_XA_PUBLIC: return EXPS_LD(X.publics + g.v);
    case EXPS_XA_CHALLENGE: return EXPS_LD(X.challenges + g.v);
    case EXPS_XA_EVAL: return EXPS_LD(X.evals + g.v);
    case EXPS_XA_AIRVALUE: return EXPS_LD(X.airvalues + g.v);
    case EXPS_XA_AIRGROUPVALUE: return EXPS_LD(X.airgroupvalues + g.v);
    case EXPS_XA_PROOFVALUE: return EXPS_LD(X.proofvalues + g.v);
    default: return 0;
    }
}

// The row a Q kernel hands to exps_q_exact: its context's arguments (exps_ctx(P, D, 1, o1, o2, o3,
// ozi)), the row and its scratch. Made in the fallback branch only. The context itself is not
// passed: a struct passed by reference is an address, and ptxas stores the caller's whole context
// (22 words) to the stack in every thread before its first row, fallback or not (15 STL per row,
// 120 bytes of local memory written per row: more than a small Q reads); passed as scalars, the
// arguments raise the caller's registers (48 -> 56 on U8Air).
struct exps_qrow {
    const StepsParams* P;
    uint64_t D, o1, o2, o3, ozi, row, lo, wave;
    uint64_t* scratch;
    uint64_t* q;
};

// Runs the program's `n` ops for the row (local words in loc[], cross-chunk words in the row's
// scratch slots) and stores the result's words (res[]) as the row's q words (dim 1: v0, then 0, 0).
// It stores them itself, so that the caller keeps nothing live across the call (ptxas would save
// it to the stack: spill stores, which the tuner refuses).
EXPS_HD_OUTLINE void exps_q_exact(const exps_qrow& A, const exps_xop* prog, uint32_t n, const exps_xarg* res,
                                  int dim, uint64_t* loc) {
    const ExpsCtx X = exps_ctx(A.P, A.D, 1, A.o1, A.o2, A.o3, A.ozi);
    const uint64_t row = A.row, lo = A.lo, wave = A.wave;
    uint64_t* scratch = A.scratch;
    uint64_t* q = A.q;
#ifdef __CUDA_ARCH__
#pragma unroll 1
#endif
    for (uint32_t i = 0; i < n; ++i) {
        const exps_xop& o = prog[i];
        const uint64_t a = exps_xword(X, row, lo, wave, scratch, loc, o.a);
        const uint64_t b = o.op <= EXPS_XOP_MUL ? exps_xword(X, row, lo, wave, scratch, loc, o.b) : 0;
        const uint64_t w = o.op == EXPS_XOP_ADD ? gl_add(a, b) : o.op == EXPS_XOP_SUB ? gl_sub(a, b)
                         : o.op == EXPS_XOP_MUL ? gl_mul(a, b) : o.op == EXPS_XOP_NEG ? gl_neg(a) : a;
        if (o.dkind == EXPS_XA_SLOT)
            scratch[o.dst * wave + lo] = w;
        else
            loc[o.dst] = w;
    }
    q[row] = exps_xword(X, row, lo, wave, scratch, loc, res[0]);
    q[X.D + row] = dim == 3 ? exps_xword(X, row, lo, wave, scratch, loc, res[1]) : 0;
    q[2 * X.D + row] = dim == 3 ? exps_xword(X, row, lo, wave, scratch, loc, res[2]) : 0;
}

// (The launch shape, the scratch top-up and the C ABI are the launcher's: exps_runtime.cpp.)

// ------------------------------------------------------------------------- expression stores
enum { EXPS_WRITE = 0, EXPS_MUL_INV = 1, EXPS_WRITE_INV = 2 };

EXPS_HD uint64_t* exps_dest_at(uint64_t* dest, uint64_t row, uint64_t i, uint64_t destDomain,
                               uint64_t stagePos, uint64_t destDim, unsigned destExpr) {
    return destExpr ? dest + row * destDim + i : dest + (stagePos + i) * destDomain + row;
}

// The inverse modes' store of one row, u = v^-1 (spec §4.3). `num1`: this expression is the
// denominator of a hint whose numerator is dim 1, so MUL_INV of a dim-3 value computes u_i * dest0
// as the interpreter does (not mul33((dest0, 0, 0), u)).
EXPS_HD void exps_store_inverse(uint64_t* dest, uint64_t row, gl3 u, int vdim, int num1, uint64_t mode,
                                uint64_t scalar, uint64_t destDomain, uint64_t stagePos, uint64_t destDim,
                                unsigned destExpr) {
#define EXPS_AT(i) (*exps_dest_at(dest, row, (i), destDomain, stagePos, destDim, destExpr))
    if (mode == EXPS_MUL_INV) {
        if (destDim == 1) {
            EXPS_AT(0) = gl_mul(EXPS_AT(0), u.v0);
            return;
        }
        gl3 d = gl3_make(EXPS_AT(0), EXPS_AT(1), EXPS_AT(2));
        gl3 r = vdim == 1 ? gl3_mul31(d, u.v0) : (num1 ? gl3_mul31(u, d.v0) : gl3_mul(d, u));
        EXPS_AT(0) = r.v0; EXPS_AT(1) = r.v1; EXPS_AT(2) = r.v2;
        return;
    }
    // EXPS_WRITE_INV
    if (destDim == 1) {
        EXPS_AT(0) = gl_mul(scalar, u.v0);
        return;
    }
    gl3 r = gl3_mul31(u, scalar);
    EXPS_AT(0) = r.v0; EXPS_AT(1) = r.v1; EXPS_AT(2) = r.v2;
}

// Store one row of an expression value per spec §4.3, one inverse per row (the reference form of
// exps_x_inv_thread's batched inverses; tests/test_inverse.py).
EXPS_HD void exps_store(uint64_t* dest, uint64_t row, gl3 v, int vdim, int num1, uint64_t mode,
                        uint64_t scalar, uint64_t destDomain, uint64_t stagePos, uint64_t destDim,
                        unsigned destExpr) {
    if (mode == EXPS_WRITE) {
        EXPS_AT(0) = v.v0;
        if (destDim == 3) {
            EXPS_AT(1) = vdim == 3 ? v.v1 : 0;
            EXPS_AT(2) = vdim == 3 ? v.v2 : 0;
        }
        return;
    }
    gl3 u = vdim == 3 ? gl3_inv(v) : gl3_make(gl_inv(v.v0), 0, 0);
    exps_store_inverse(dest, row, u, vdim, num1, mode, scalar, destDomain, stagePos, destDim, destExpr);
#undef EXPS_AT
}

// ------------------------------------------------------------------------- batched inverses
// An inverse-mode launch (MUL_INV, WRITE_INV) inverts one value per row: ~90 multiplications, four
// fifths of them gl_inv's addition chain. A thread of such a launch takes EXPS_INV_ROWS rows and
// inverts their norms t_j (the dim-1 value itself, or gl3_inv's t) with ONE chain (Montgomery's
// trick: prefix products c_j, one gl_inv, two multiplications back per row), ~25 multiplications
// a row at 8 rows. The words are still gl_inv's: every field value >= EPS has a single u64
// encoding (v + p >= 2^64), so when the batch's canon(t_j^-1) >= EPS it IS the word gl_inv(t_j)
// returns; below EPS (t = 1 or p + 1, t = 0 or p entered into the product as 1, ...: ~2^-32 for
// random values, more often for selectors) that row runs gl_inv(t_j) itself.
struct ExpsInvRows {
    uint64_t t[EXPS_INV_ROWS];         // the norms
    uint64_t c[EXPS_INV_ROWS];         // c_j = prod_{i <= j} (t_i, or 1 where t_i = 0)
    uint64_t r[EXPS_INV_ROWS][3];      // dim 3: gl3_inv's numerators
};

EXPS_HD uint64_t exps_nonzero(uint64_t t) { return gl_canon(t) == 0 ? 1 : t; }

EXPS_HD void exps_inv_put(ExpsInvRows& B, unsigned j, gl3 v, int vdim) {
    uint64_t t = v.v0;
    if (vdim == 3) gl3_inv_parts(v, &t, B.r[j]);
    B.t[j] = t;
    B.c[j] = j ? gl_mul(B.c[j - 1], exps_nonzero(t)) : exps_nonzero(t);
}

// Rows row0 + 256 j, j < n, of the batch B: their inverses, then their stores.
EXPS_HD void exps_inv_finish(ExpsInvRows& B, unsigned n, uint64_t* dest, uint64_t row0, int vdim, int num1,
                             uint64_t mode, uint64_t scalar, uint64_t destDomain, uint64_t stagePos,
                             uint64_t destDim, unsigned destExpr) {
    uint64_t inv = gl_inv(B.c[n - 1]);                 // (c_{n-1})^-1
#ifdef __CUDA_ARCH__
#pragma unroll 1
#endif
    for (unsigned j = n; j-- > 0;) {                   // inv = (c_j)^-1 here
        uint64_t ti = gl_canon(j ? gl_mul(inv, B.c[j - 1]) : inv);
        if (j) inv = gl_mul(inv, exps_nonzero(B.t[j]));
        if (ti < EXPS_EPS) ti = gl_inv(B.t[j]);        // a value with two encodings: the chain's word
        const gl3 u = vdim == 3 ? gl3_make(gl_mul(B.r[j][0], ti), gl_mul(B.r[j][1], ti), gl_mul(B.r[j][2], ti))
                                : gl3_make(ti, 0, 0);
        exps_store_inverse(dest, row0 + 256 * (uint64_t)j, u, vdim, num1, mode, scalar, destDomain, stagePos,
                           destDim, destExpr);
    }
}

// One thread's rows of an inverse-mode expression launch (exprs.cu.j2's `_ki` kernel), F the
// expression's row function: rows blk * 256 * EXPS_INV_ROWS + tx + 256 j, j < EXPS_INV_ROWS
// (coalesced for each j), evaluated, then inverted together and stored. O: the expression's column
// offsets (exprs.cu.j2), passed on to F.
template <gl3 (*F)(const ExpsCtx&, uint64_t, const exps_offs*)>
EXPS_HD void exps_x_inv_thread(const ExpsCtx& X, const exps_offs* O, uint64_t blk, unsigned tx, uint64_t* dest, uint64_t N, int vdim,
                               int num1, uint64_t mode, uint64_t scalar, uint64_t destDomain, uint64_t stagePos,
                               uint64_t destDim, unsigned destExpr) {
    const uint64_t row0 = blk * 256ull * EXPS_INV_ROWS + tx;
    ExpsInvRows B;
    unsigned n = 0;
#ifdef __CUDA_ARCH__
#pragma unroll 1
#endif
    for (unsigned j = 0; j < (unsigned)EXPS_INV_ROWS; ++j) {
        const uint64_t row = row0 + 256 * (uint64_t)j;
        if (row >= N) break;
        exps_inv_put(B, j, F(X, row, O), vdim);
        n = j + 1;
    }
    if (n) exps_inv_finish(B, n, dest, row0, vdim, num1, mode, scalar, destDomain, stagePos, destDim, destExpr);
}

// The host check's form of an inverse-mode launch of F: every thread of its grid, in turn.
template <gl3 (*F)(const ExpsCtx&, uint64_t, const exps_offs*)>
EXPS_HD void exps_x_inv_grid(const ExpsCtx& X, const exps_offs* O, uint64_t* dest, uint64_t N, int vdim, int num1, uint64_t mode,
                             uint64_t scalar, uint64_t destDomain, uint64_t stagePos, uint64_t destDim,
                             unsigned destExpr) {
    for (uint64_t blk = 0; blk < exps_x_blocks(N, mode); ++blk)
        for (unsigned tx = 0; tx < 256; ++tx)
            exps_x_inv_thread<F>(X, O, blk, tx, dest, N, vdim, num1, mode, scalar, destDomain, stagePos, destDim,
                                 destExpr);
}

// Row functions of the generic inverse kernel (exprs.cu.j2 `exps_x_inv_k`): an expression's values
// as its WRITE kernel stored them, row-major (destExpr 1, destDim = the value's dim), at X.cst.
EXPS_HD gl3 exps_saved_row1(const ExpsCtx& X, uint64_t row, const exps_offs*) { return gl3_make(X.cst[row], 0, 0); }
EXPS_HD gl3 exps_saved_row3(const ExpsCtx& X, uint64_t row, const exps_offs*) {
    return gl3_make(X.cst[3 * row], X.cst[3 * row + 1], X.cst[3 * row + 2]);
}

// Thread tx of block blk of the generic inverse kernel, over the values v of dim vdim (num1: spec
// §4.3) that an expression's WRITE kernel saved.
EXPS_HD void exps_saved_inv_thread(const uint64_t* v, uint64_t vdim, uint64_t num1, uint64_t blk, unsigned tx,
                                   uint64_t* dest, uint64_t N, uint64_t mode, uint64_t scalar, uint64_t destDomain,
                                   uint64_t stagePos, uint64_t destDim, unsigned destExpr) {
    ExpsCtx X = {};
    X.cst = v;
    if (vdim == 3)
        exps_x_inv_thread<exps_saved_row3>(X, 0, blk, tx, dest, N, 3, (int)num1, mode, scalar, destDomain, stagePos,
                                           destDim, destExpr);
    else
        exps_x_inv_thread<exps_saved_row1>(X, 0, blk, tx, dest, N, 1, 0, mode, scalar, destDomain, stagePos, destDim,
                                           destExpr);
}

#endif  // EXPS_GEN_COMMON_CUH
