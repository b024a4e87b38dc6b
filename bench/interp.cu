// Bytecode interpreter for the Q expression: the baseline the generated kernels are measured against.
//
// Designed like the prover's `computeExpression_` (semantics.md §2.4, §3; not its code):
//   * a block evaluates a chunk of blk = min(256, NExt) consecutive rows, one row per thread, and the
//     grid strides over the chunks;
//   * the per-operand-type base pointers, the opening strides and (when they fit) the ops/args of the
//     bytecode are staged in shared memory by the block before the chunk loop;
//   * every op loads its two operands through the type table (`load__` read rules of §2.4: cm from
//     aux_trace + per-stage offset, const from the const tree, Zi from aux_trace + off_zi, scalars from
//     the StepsParams buffers), computes in registers and writes its result to a temp slot;
//   * temps live in per-thread scratch: tmp1 slot s at tmp1[s * blk + t], tmp3 component d of the slot
//     with arg idx (= 3 * slot) at tmp3[(idx + d) * blk + t], in per-block regions of global memory
//     (`aux_trace + tmp1/tmp3` in the prover, `scratch` here) -- or, with INTERP_TMP_SHARED, in shared
//     memory when they fit in 40 KB (what later prover revisions do);
//   * boundary chunks (rows whose openings wrap around) take a masked path, the interior an unmasked one;
//   * Q is stored from the last op's temp slot to q[c * NExt + row].
// The arithmetic is templates/gen_common.cuh (bit-identical to the prover's gl64_t built with
// GL64_PARTIALLY_REDUCED), so the output is bit-identical to the generated kernels and the oracle.
// Differences from the prover, on purpose: if Q is dim 1 the columns 1, 2 of q are written as 0 (the
// generator's convention; the prover copies whatever is in the next tmp1 slots, §3 / §7.5), and the
// strides wrap with `& (NExt - 1)` instead of `% NExt` on boundary chunks (same rows, §2.4).
//
// Trace-domain expressions (hints, intermediate columns; spec §4): `interp_expr_launch` runs the
// bytecode of one expression the same way over N trace rows (strides = openingPoints, stage 1 from
// P->trace, const from pConstPolsAddress, as `computeExpressions_` reads them) and stores each row
// as exps_launch_expr does, in its WRITE / MUL_INV / WRITE_INV modes (§4.3) through gen_common.cuh's
// exps_store, into a stage column or an expression buffer. One expression per launch, as the
// generated fast path; the prover's interpreter evaluates a (numerator, denominator) pair in one
// kernel, which bench/exprs.py notes but does not time.
//
// The same per-row code is compiled for the host (g++ -x c++, no CUDA) and exported as
// `interp_host_run` / `interp_host_expr_run`, so the CPU tests check this very code against the
// numpy oracle.
//
// Build (bench/interp_lib.py build_gpu does this):
//   nvcc -arch sm_90 -O3 -Xcompiler -fPIC -shared -DGL64_PARTIALLY_REDUCED -I templates
//        bench/interp.cu -o bench/libinterp.so
#include "gen_common.cuh"

#include <stddef.h>
#include <string.h>

#define INTERP_MAX_TYPES 32        // operand type codes 0 .. B + 8 (B = 6 + nCustom with nStages 2)
#define INTERP_MAX_OPENINGS 16
#define INTERP_BLOCK 256           // rows per chunk (the prover's nrowsPack)
#define INTERP_MAX_GRID 65535

// flags of interp_launch
#define INTERP_TMP_SHARED 1u       // temps in shared memory when (nTemp1 + 3 nTemp3) * blk * 8 <= 40 KB
#define INTERP_NO_STAGING 2u       // ops/args read from global memory even when they fit shared memory
#define INTERP_TMP_SHARED_MAX 40960u
#define INTERP_STAGE_MAX 34816u    // ops + args bytes staged (2048 ops)

// error bits the kernel ORs into *err
#define INTERP_ERR_OP 1
#define INTERP_ERR_ARITH 2

// launcher return codes (> 0: a cudaError_t)
#define INTERP_E_NEXT -1           // NExt not a power of two
#define INTERP_E_OPENINGS -2       // too many openings
#define INTERP_E_SCRATCH -3        // scratch too small for one block
#define INTERP_E_TYPES -4          // nStages / nCustom give type codes beyond the table
#define INTERP_E_ARGS -5           // null pointer / zero ops
#define INTERP_E_STORE -6          // a store mode / destDim exps_launch_expr never computes

struct InterpTables {
    const uint64_t* base[INTERP_MAX_TYPES];   // per operand type code
    int64_t stride[INTERP_MAX_OPENINGS];      // opening * blowup, by openingPoints index
};

// Where a trace-domain expression goes (exps_launch_expr's store arguments, spec §4.3, §5).
struct InterpStore {
    uint64_t* dest;
    uint64_t destDomain, stagePos, destDim, mode, scalar;
    uint32_t destExpr, num1;   // num1: denominator of a dim-1 numerator (MUL_INV computes u_i * dest0)
};

struct InterpParams {
    const StepsParams* P;
    const uint8_t* ops;
    const uint16_t* args;
    const uint64_t* numbers;
    uint64_t* q;
    uint64_t* tmp1;            // global temp regions (per block: nTemp1 * blk, 3 * nTemp3 * blk)
    uint64_t* tmp3;
    int* err;
    uint64_t NExt;
    uint64_t off_cm[4];        // [1..nStages+1]
    uint64_t off_zi;
    uint64_t k_min, k_max;     // chunks starting in [k_min, k_max) never wrap
    int64_t stride[INTERP_MAX_OPENINGS];
    uint32_t nOps, nTemp1, nTemp3, nStages, B, nOpenings;
    uint32_t staged, tmp_shared, extended;
    InterpStore st;            // trace-domain expressions only
};

// Operand types: 0 const, 1..nStages+1 cm, nStages+2 Zi, nStages+3 xDivXSubXi, nStages+4+c custom c,
// B tmp1, B+1 tmp3, B+2 public, B+3 number, B+4 airvalue, B+5 proofvalue, B+6 airgroupvalue,
// B+7 challenge, B+8 eval (§2.2). `zi` = nStages + 2.
template <bool Cyclic>
EXPS_HD uint64_t interp_ld(const InterpTables& T, uint32_t B, uint32_t zi, uint32_t type, uint32_t idx,
                           uint32_t off, uint32_t d, uint64_t row, uint64_t D, uint32_t blk, uint32_t t) {
    const uint64_t* b = T.base[type];
    if (type == B || type == B + 1) return b[(uint64_t)(idx + d) * blk + t];       // temps
    if (type > B + 1) return b[idx + d];                                             // scalars
    if (type == zi) return b[(uint64_t)(idx - 1) * D + row];                         // Zi: no stride
    uint64_t l = row + (uint64_t)T.stride[off];                                      // const / cm
    if (Cyclic) l &= D - 1;
    return b[(uint64_t)(idx + d) * D + l];
}

template <bool Cyclic>
EXPS_HD gl3 interp_ld3(const InterpTables& T, uint32_t B, uint32_t zi, uint32_t type, uint32_t idx,
                       uint32_t off, uint64_t row, uint64_t D, uint32_t blk, uint32_t t) {
    return gl3_make(interp_ld<Cyclic>(T, B, zi, type, idx, off, 0, row, D, blk, t),
                    interp_ld<Cyclic>(T, B, zi, type, idx, off, 1, row, D, blk, t),
                    interp_ld<Cyclic>(T, B, zi, type, idx, off, 2, row, D, blk, t));
}

// Evaluate the bytecode for one row; the value is left in the last op's temp slot (interp_result).
// t1/t3 are T.base[B] / T.base[B + 1] (writable).
template <bool Cyclic>
EXPS_HD int interp_eval(const InterpTables& T, const uint8_t* ops, const uint16_t* args, uint32_t nOps,
                        uint32_t B, uint32_t zi, uint64_t row, uint64_t D, uint32_t blk, uint32_t t,
                        uint64_t* t1, uint64_t* t3) {
    int err = 0;
    for (uint32_t k = 0; k < nOps; ++k) {
        const uint16_t* a = args + 8 * (size_t)k;
        const uint32_t arith = a[0], dst = a[1];
        switch (ops[k]) {
        case 0: {
            const uint64_t x = interp_ld<Cyclic>(T, B, zi, a[2], a[3], a[4], 0, row, D, blk, t);
            const uint64_t y = interp_ld<Cyclic>(T, B, zi, a[5], a[6], a[7], 0, row, D, blk, t);
            uint64_t r;
            switch (arith) {
            case 0: r = gl_add(x, y); break;
            case 1: r = gl_sub(x, y); break;
            case 2: r = gl_mul(x, y); break;
            case 3: r = gl_sub(y, x); break;
            default: r = 0; err |= INTERP_ERR_ARITH;
            }
            t1[(uint64_t)dst * blk + t] = r;
            break;
        }
        case 1: {
            const gl3 x = interp_ld3<Cyclic>(T, B, zi, a[2], a[3], a[4], row, D, blk, t);
            const uint64_t y = interp_ld<Cyclic>(T, B, zi, a[5], a[6], a[7], 0, row, D, blk, t);
            gl3 r;
            switch (arith) {
            case 0: r = gl3_add31(x, y); break;
            case 1: r = gl3_sub31(x, y); break;
            case 2: r = gl3_mul31(x, y); break;
            case 3: r = gl3_rsub31(x, y); break;
            default: r = gl3_make(0, 0, 0); err |= INTERP_ERR_ARITH;
            }
            t3[(uint64_t)dst * blk + t] = r.v0;
            t3[(uint64_t)(dst + 1) * blk + t] = r.v1;
            t3[(uint64_t)(dst + 2) * blk + t] = r.v2;
            break;
        }
        case 2: {
            const gl3 x = interp_ld3<Cyclic>(T, B, zi, a[2], a[3], a[4], row, D, blk, t);
            const gl3 y = interp_ld3<Cyclic>(T, B, zi, a[5], a[6], a[7], row, D, blk, t);
            gl3 r;
            switch (arith) {
            case 0: r = gl3_add(x, y); break;
            case 1: r = gl3_sub(x, y); break;
            case 2: r = gl3_mul(x, y); break;
            case 3: r = gl3_sub(y, x); break;
            default: r = gl3_make(0, 0, 0); err |= INTERP_ERR_ARITH;
            }
            t3[(uint64_t)dst * blk + t] = r.v0;
            t3[(uint64_t)(dst + 1) * blk + t] = r.v1;
            t3[(uint64_t)(dst + 2) * blk + t] = r.v2;
            break;
        }
        default:
            err |= INTERP_ERR_OP;
        }
    }
    return err;
}

// The value of the last op (its dest slot), as the prover's last op writes it into the param slot.
EXPS_HD gl3 interp_result(const uint8_t* ops, const uint16_t* args, uint32_t nOps, uint32_t blk, uint32_t t,
                          const uint64_t* t1, const uint64_t* t3) {
    const uint16_t* a = args + 8 * (size_t)(nOps - 1);
    if (ops[nOps - 1] == 0) return gl3_make(t1[(uint64_t)a[1] * blk + t], 0, 0);
    return gl3_make(t3[(uint64_t)a[1] * blk + t], t3[(uint64_t)(a[1] + 1) * blk + t],
                    t3[(uint64_t)(a[1] + 2) * blk + t]);
}

// Evaluate the bytecode for one row and store Q.
template <bool Cyclic>
EXPS_HD int interp_row(const InterpTables& T, const uint8_t* ops, const uint16_t* args, uint32_t nOps,
                       uint32_t B, uint32_t zi, uint64_t row, uint64_t D, uint32_t blk, uint32_t t,
                       uint64_t* t1, uint64_t* t3, uint64_t* q) {
    const int err = interp_eval<Cyclic>(T, ops, args, nOps, B, zi, row, D, blk, t, t1, t3);
    // Q from the last op's dest slot (§3): q[c * NExt + row].
    const uint16_t* a = args + 8 * (size_t)(nOps - 1);
    if (ops[nOps - 1] == 0) {
        q[row] = t1[(uint64_t)a[1] * blk + t];
        q[D + row] = 0;
        q[2 * D + row] = 0;
    } else {
        q[row] = t3[(uint64_t)a[1] * blk + t];
        q[D + row] = t3[(uint64_t)(a[1] + 1) * blk + t];
        q[2 * D + row] = t3[(uint64_t)(a[1] + 2) * blk + t];
    }
    return err;
}

// Evaluate a trace-domain expression for one row and store it in `S.mode` (WRITE / MUL_INV /
// WRITE_INV) through gen_common.cuh's exps_store: the store of the generated kernels, so the words
// are the same (spec §4.2 / §4.3: field-equal to the prover's param combine, and bit-equal to it
// except for the dim-1-numerator case that `num1` settles as the interpreter does).
template <bool Cyclic>
EXPS_HD int interp_expr_row(const InterpTables& T, const uint8_t* ops, const uint16_t* args, uint32_t nOps,
                            uint32_t B, uint32_t zi, uint64_t row, uint64_t D, uint32_t blk, uint32_t t,
                            uint64_t* t1, uint64_t* t3, const InterpStore& S) {
    const int err = interp_eval<Cyclic>(T, ops, args, nOps, B, zi, row, D, blk, t, t1, t3);
    const gl3 v = interp_result(ops, args, nOps, blk, t, t1, t3);
    exps_store(S.dest, row, v, ops[nOps - 1] == 0 ? 1 : 3, (int)S.num1, S.mode, S.scalar, S.destDomain,
               S.stagePos, S.destDim, S.destExpr);
    return err;
}

// Q (Expr = false) or a trace-domain expression (Expr = true) for one row.
template <bool Expr, bool Cyclic>
EXPS_HD int interp_any_row(const InterpTables& T, const uint8_t* ops, const uint16_t* args, uint32_t nOps,
                           uint32_t B, uint32_t zi, uint64_t row, uint64_t D, uint32_t blk, uint32_t t,
                           uint64_t* t1, uint64_t* t3, uint64_t* q, const InterpStore& S) {
    return Expr ? interp_expr_row<Cyclic>(T, ops, args, nOps, B, zi, row, D, blk, t, t1, t3, S)
                : interp_row<Cyclic>(T, ops, args, nOps, B, zi, row, D, blk, t, t1, t3, q);
}

// Base pointers of every operand type except the temps (set per block by the caller). Extended
// domain (Q): cm stage s at aux_trace + off_cm[s], const from the const tree. Trace domain
// (`extended` 0, spec §2.4): stage 1 from P->trace, stage s > 1 at aux_trace + off_cm[s], const from
// pConstPolsAddress.
EXPS_HD void interp_fill_tables(InterpTables& T, const StepsParams* P, const uint64_t* numbers,
                                const uint64_t* off_cm, uint64_t off_zi, uint32_t nStages, uint32_t B,
                                const int64_t* stride, uint32_t nOpenings, int extended) {
    for (int i = 0; i < INTERP_MAX_TYPES; ++i) T.base[i] = 0;
    T.base[0] = extended ? P->pConstPolsExtendedTreeAddress    // const: the const tree, no offset (§7.6)
                         : P->pConstPolsAddress;
    for (uint32_t s = 1; s <= nStages + 1; ++s)
        T.base[s] = (!extended && s == 1) ? P->trace : P->aux_trace + off_cm[s];
    T.base[nStages + 2] = P->aux_trace + off_zi;
    T.base[B + 2] = P->publicInputs;
    T.base[B + 3] = numbers;
    T.base[B + 4] = P->airValues;
    T.base[B + 5] = P->proofValues;
    T.base[B + 6] = P->airgroupValues;
    T.base[B + 7] = P->challenges;
    T.base[B + 8] = P->evals;
    for (uint32_t o = 0; o < INTERP_MAX_OPENINGS; ++o) T.stride[o] = o < nOpenings ? stride[o] : 0;
}

#ifdef __CUDACC__
template <bool Expr>
__device__ __forceinline__ void interp_body(const InterpParams& p) {
    extern __shared__ uint64_t interp_smem[];
    InterpTables& T = *reinterpret_cast<InterpTables*>(interp_smem);
    const uint32_t blk = blockDim.x, t = threadIdx.x;
    uint64_t* sm_tmp = interp_smem + sizeof(InterpTables) / sizeof(uint64_t);
    const uint64_t tmp_elems = (uint64_t)(p.nTemp1 + 3 * p.nTemp3) * blk;
    uint16_t* sm_args = reinterpret_cast<uint16_t*>(sm_tmp + (p.tmp_shared ? tmp_elems : 0));
    uint8_t* sm_ops = reinterpret_cast<uint8_t*>(sm_args + 8 * (size_t)p.nOps);
    if (t == 0) {
        interp_fill_tables(T, p.P, p.numbers, p.off_cm, p.off_zi, p.nStages, p.B, p.stride, p.nOpenings,
                           (int)p.extended);
        if (p.tmp_shared) {
            T.base[p.B] = sm_tmp;
            T.base[p.B + 1] = sm_tmp + (uint64_t)p.nTemp1 * blk;
        } else {
            T.base[p.B] = p.tmp1 + (uint64_t)blockIdx.x * p.nTemp1 * blk;
            T.base[p.B + 1] = p.tmp3 + (uint64_t)blockIdx.x * 3 * p.nTemp3 * blk;
        }
    }
    if (p.staged) {
        for (uint32_t i = t; i < 8 * p.nOps; i += blk) sm_args[i] = p.args[i];
        for (uint32_t i = t; i < p.nOps; i += blk) sm_ops[i] = p.ops[i];
    }
    __syncthreads();
    const uint8_t* ops = p.staged ? sm_ops : p.ops;
    const uint16_t* args = p.staged ? sm_args : p.args;
    uint64_t* t1 = const_cast<uint64_t*>(T.base[p.B]);
    uint64_t* t3 = const_cast<uint64_t*>(T.base[p.B + 1]);
    const uint32_t zi = p.nStages + 2;
    const uint64_t nchunks = p.NExt / blk;
    int err = 0;
    for (uint64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
        const uint64_t first = c * blk;
        if (first < p.k_min || first >= p.k_max)
            err |= interp_any_row<Expr, true>(T, ops, args, p.nOps, p.B, zi, first + t, p.NExt, blk, t, t1, t3,
                                              p.q, p.st);
        else
            err |= interp_any_row<Expr, false>(T, ops, args, p.nOps, p.B, zi, first + t, p.NExt, blk, t, t1, t3,
                                               p.q, p.st);
    }
    if (err && p.err) atomicOr(p.err, err);
}

__global__ void __launch_bounds__(INTERP_BLOCK) interp_q_kernel(const InterpParams p) { interp_body<false>(p); }
__global__ void __launch_bounds__(INTERP_BLOCK) interp_expr_kernel(const InterpParams p) { interp_body<true>(p); }
#endif

// ------------------------------------------------------------------------------------ host side
struct InterpPlan {
    uint32_t blk, grid, B;
    uint64_t nchunks, k_min, k_max;
    int64_t stride[INTERP_MAX_OPENINGS];
};

static int interp_plan(InterpPlan& pl, uint64_t NExt, uint64_t nBlocks, uint32_t nTemp1, uint32_t nTemp3,
                       uint64_t scratchElems, int tmpInScratch, int nStages, int nCustom, int blowup,
                       const int64_t* openings, int nOpenings) {
    if (NExt == 0 || (NExt & (NExt - 1))) return INTERP_E_NEXT;
    if (nOpenings < 0 || nOpenings > INTERP_MAX_OPENINGS || (nOpenings && !openings)) return INTERP_E_OPENINGS;
    if (nStages < 1 || nCustom < 0) return INTERP_E_TYPES;
    pl.B = (uint32_t)(1 + nStages + 3 + nCustom);
    if (pl.B + 9 > INTERP_MAX_TYPES) return INTERP_E_TYPES;
    pl.blk = NExt < INTERP_BLOCK ? (uint32_t)NExt : INTERP_BLOCK;
    pl.nchunks = NExt / pl.blk;
    uint64_t grid = nBlocks ? nBlocks : 512;
    if (grid > pl.nchunks) grid = pl.nchunks;
    if (grid > INTERP_MAX_GRID) grid = INTERP_MAX_GRID;
    const uint64_t per_block = (uint64_t)(nTemp1 + 3 * (uint64_t)nTemp3) * pl.blk;
    if (tmpInScratch && per_block) {
        if (scratchElems / per_block < grid) grid = scratchElems / per_block;
        if (grid < 1) return INTERP_E_SCRATCH;
    }
    pl.grid = (uint32_t)grid;
    int64_t lo = 0, hi = 0;
    for (int o = 0; o < INTERP_MAX_OPENINGS; ++o) {
        pl.stride[o] = o < nOpenings ? openings[o] * (int64_t)blowup : 0;
        if (pl.stride[o] < lo) lo = pl.stride[o];
        if (pl.stride[o] > hi) hi = pl.stride[o];
    }
    // chunks [k_min, k_max) have row + stride in [0, NExt) for every row and opening
    pl.k_min = ((uint64_t)(-lo) + pl.blk - 1) / pl.blk * pl.blk;
    pl.k_max = (uint64_t)hi >= NExt ? 0 : (NExt - (uint64_t)hi) / pl.blk * pl.blk;
    return 0;
}

// Host run of the same per-row code (CPU check): host pointers everywhere; grid/blocks emulated so
// the scratch indexing is the GPU's. S == 0: Q into q (extended); else the expression store S.
static int interp_host_any(const StepsParams* P, const uint8_t* ops, const uint16_t* args,
                           const uint64_t* numbers, uint32_t nOps, uint32_t nTemp1, uint32_t nTemp3,
                           uint64_t* q, const InterpStore* S, uint64_t* scratch, uint64_t scratchElems,
                           uint64_t D, uint64_t nBlocks, uint64_t off_cm1, uint64_t off_cm2, uint64_t off_cm3,
                           uint64_t off_zi, int nStages, int nCustom, int blowup, const int64_t* openings,
                           int nOpenings) {
    InterpPlan pl;
    int rc = interp_plan(pl, D, nBlocks, nTemp1, nTemp3, scratchElems, 1, nStages, nCustom, blowup,
                         openings, nOpenings);
    if (rc) return rc;
    if ((nTemp1 || nTemp3) && !scratch) return INTERP_E_ARGS;
    const uint64_t off_cm[4] = {0, off_cm1, off_cm2, off_cm3};
    uint64_t* tmp1 = scratch;
    uint64_t* tmp3 = scratch ? scratch + (uint64_t)pl.grid * nTemp1 * pl.blk : 0;
    InterpTables T;
    int err = 0;
    for (uint64_t c = 0; c < pl.nchunks; ++c) {
        const uint64_t b = c % pl.grid;
        interp_fill_tables(T, P, numbers, off_cm, off_zi, (uint32_t)nStages, pl.B, pl.stride,
                           (uint32_t)nOpenings, S == 0);
        uint64_t* t1 = tmp1 ? tmp1 + b * nTemp1 * pl.blk : 0;
        uint64_t* t3 = tmp3 ? tmp3 + b * 3 * (uint64_t)nTemp3 * pl.blk : 0;
        T.base[pl.B] = t1;
        T.base[pl.B + 1] = t3;
        const uint64_t first = c * pl.blk;
        const bool cyc = first < pl.k_min || first >= pl.k_max;
        for (uint32_t t = 0; t < pl.blk; ++t) {
            if (S)
                err |= cyc ? interp_expr_row<true>(T, ops, args, nOps, pl.B, nStages + 2, first + t, D, pl.blk, t,
                                                   t1, t3, *S)
                           : interp_expr_row<false>(T, ops, args, nOps, pl.B, nStages + 2, first + t, D, pl.blk,
                                                    t, t1, t3, *S);
            else
                err |= cyc ? interp_row<true>(T, ops, args, nOps, pl.B, nStages + 2, first + t, D, pl.blk, t,
                                              t1, t3, q)
                           : interp_row<false>(T, ops, args, nOps, pl.B, nStages + 2, first + t, D, pl.blk, t,
                                               t1, t3, q);
        }
    }
    return err ? err << 8 : 0;
}

static int interp_store_ok(const InterpStore& S) {
    return S.dest && S.mode <= 2 && (S.destDim == 1 || S.destDim == 3);
}

// ------------------------------------------------------------------------------------ launchers
#ifdef __CUDACC__
// One launcher for both kernels (device pointers; `openings` is a HOST array of openingPoints values).
static int interp_launch_any(const StepsParams* d_params, const uint8_t* d_ops, const uint16_t* d_args,
                             const uint64_t* d_numbers, uint32_t nOps, uint32_t nTemp1, uint32_t nTemp3,
                             uint64_t* q, const InterpStore* S, uint64_t* scratch, uint64_t scratchElems,
                             uint64_t D, uint64_t nBlocks, uint64_t off_cm1, uint64_t off_cm2, uint64_t off_cm3,
                             uint64_t off_zi, int nStages, int nCustom, int blowup, const int64_t* openings,
                             int nOpenings, unsigned flags, int* d_err, cudaStream_t stream) {
    const uint64_t blk0 = D < INTERP_BLOCK ? D : INTERP_BLOCK;
    const uint64_t tmp_bytes = (nTemp1 + 3 * (uint64_t)nTemp3) * blk0 * 8;
    const int tmp_shared = (flags & INTERP_TMP_SHARED) && tmp_bytes <= INTERP_TMP_SHARED_MAX;
    InterpPlan pl;
    int rc = interp_plan(pl, D, nBlocks, nTemp1, nTemp3, scratchElems, !tmp_shared, nStages, nCustom,
                         blowup, openings, nOpenings);
    if (rc) return rc;
    if (!tmp_shared && tmp_bytes && !scratch) return INTERP_E_ARGS;
    const uint64_t stage_bytes = 17ull * nOps;
    const int staged = !(flags & INTERP_NO_STAGING) && stage_bytes <= INTERP_STAGE_MAX;
    InterpParams p;
    memset(&p, 0, sizeof p);
    p.P = d_params;
    p.ops = d_ops;
    p.args = d_args;
    p.numbers = d_numbers;
    p.q = q;
    p.tmp1 = scratch;
    p.tmp3 = scratch ? scratch + (uint64_t)pl.grid * nTemp1 * pl.blk : 0;
    p.err = d_err;
    p.NExt = D;
    p.off_cm[1] = off_cm1;
    p.off_cm[2] = off_cm2;
    p.off_cm[3] = off_cm3;
    p.off_zi = off_zi;
    p.k_min = pl.k_min;
    p.k_max = pl.k_max;
    for (int o = 0; o < INTERP_MAX_OPENINGS; ++o) p.stride[o] = pl.stride[o];
    p.nOps = nOps;
    p.nTemp1 = nTemp1;
    p.nTemp3 = nTemp3;
    p.nStages = (uint32_t)nStages;
    p.B = pl.B;
    p.nOpenings = (uint32_t)nOpenings;
    p.staged = (uint32_t)staged;
    p.tmp_shared = (uint32_t)tmp_shared;
    p.extended = S == 0;
    if (S) p.st = *S;
    const size_t smem = sizeof(InterpTables) + (tmp_shared ? tmp_bytes : 0) + (staged ? stage_bytes : 0);
    if (smem > 48 * 1024) {
        cudaError_t e = cudaFuncSetAttribute(S ? interp_expr_kernel : interp_q_kernel,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return (int)e;
    }
    if (S)
        interp_expr_kernel<<<pl.grid, pl.blk, smem, stream>>>(p);
    else
        interp_q_kernel<<<pl.grid, pl.blk, smem, stream>>>(p);
    return (int)cudaGetLastError();
}
#else
// Host build: the launchers emulated on host pointers (bench/cpu_emulation.py runs bench/run.py and
// bench/exprs.py on the CPU through them). Temps always live in `scratch`; flags are ignored.
static int interp_launch_any(const StepsParams* d_params, const uint8_t* d_ops, const uint16_t* d_args,
                             const uint64_t* d_numbers, uint32_t nOps, uint32_t nTemp1, uint32_t nTemp3,
                             uint64_t* q, const InterpStore* S, uint64_t* scratch, uint64_t scratchElems,
                             uint64_t D, uint64_t nBlocks, uint64_t off_cm1, uint64_t off_cm2, uint64_t off_cm3,
                             uint64_t off_zi, int nStages, int nCustom, int blowup, const int64_t* openings,
                             int nOpenings, unsigned flags, int* d_err, cudaStream_t stream) {
    (void)flags;
    (void)stream;
    int rc = interp_host_any(d_params, d_ops, d_args, d_numbers, nOps, nTemp1, nTemp3, q, S, scratch,
                             scratchElems, D, nBlocks, off_cm1, off_cm2, off_cm3, off_zi, nStages, nCustom,
                             blowup, openings, nOpenings);
    if (rc > 0) {
        if (d_err) *d_err |= rc >> 8;
        return 0;
    }
    return rc;
}
#endif

extern "C" {

// Bytes of scratch per block the launcher needs (temps in global memory): (nTemp1 + 3 nTemp3) * blk.
EXPS_EXPORT unsigned long long interp_scratch_per_block(uint64_t NExt, uint32_t nTemp1, uint32_t nTemp3) {
    const uint64_t blk = NExt < INTERP_BLOCK ? NExt : INTERP_BLOCK;
    return (unsigned long long)((nTemp1 + 3 * (uint64_t)nTemp3) * blk);
}

// Host run of Q (CPU check). Returns 0, an INTERP_E_* code, or the OR of INTERP_ERR_* << 8.
EXPS_EXPORT int interp_host_run(const StepsParams* P, const uint8_t* ops, const uint16_t* args,
                                const uint64_t* numbers, uint32_t nOps, uint32_t nTemp1, uint32_t nTemp3,
                                uint64_t* q, uint64_t* scratch, uint64_t scratchElems, uint64_t NExt,
                                uint64_t nBlocks, uint64_t off_cm1, uint64_t off_cm2, uint64_t off_cm3,
                                uint64_t off_zi, int nStages, int nCustom, int blowup,
                                const int64_t* openings, int nOpenings) {
    if (!P || !ops || !args || !numbers || !q || !nOps) return INTERP_E_ARGS;
    return interp_host_any(P, ops, args, numbers, nOps, nTemp1, nTemp3, q, 0, scratch, scratchElems, NExt,
                           nBlocks, off_cm1, off_cm2, off_cm3, off_zi, nStages, nCustom, blowup, openings,
                           nOpenings);
}

// Host run of one trace-domain expression over N rows (CPU check), stored as exps_launch_expr does.
EXPS_EXPORT int interp_host_expr_run(const StepsParams* P, const uint8_t* ops, const uint16_t* args,
                                     const uint64_t* numbers, uint32_t nOps, uint32_t nTemp1, uint32_t nTemp3,
                                     uint64_t* dest, uint64_t* scratch, uint64_t scratchElems, uint64_t N,
                                     uint64_t nBlocks, uint64_t off_cm1, uint64_t off_cm2, uint64_t off_cm3,
                                     int nStages, int nCustom, const int64_t* openings, int nOpenings,
                                     uint64_t destDomain, uint64_t mode, uint64_t scalar, uint64_t stagePos,
                                     uint64_t destDim, unsigned destExpr, unsigned num1) {
    const InterpStore S = {dest, destDomain, stagePos, destDim, mode, scalar, destExpr, num1};
    if (!P || !ops || !args || !numbers || !nOps) return INTERP_E_ARGS;
    if (!interp_store_ok(S)) return INTERP_E_STORE;
    return interp_host_any(P, ops, args, numbers, nOps, nTemp1, nTemp3, 0, &S, scratch, scratchElems, N,
                           nBlocks, off_cm1, off_cm2, off_cm3, 0, nStages, nCustom, 1, openings, nOpenings);
}

// Launch the interpreter for Q (device pointers; `openings` is a HOST array of openingPoints values).
// scratch: temps in global memory, grid * (nTemp1 + 3 nTemp3) * blk elements (grid is lowered to fit).
// err: optional device int the kernel ORs INTERP_ERR_* bits into. Returns 0, INTERP_E_* (< 0) or a
// cudaError_t (> 0) from the launch. The launch is asynchronous on `stream`.
EXPS_EXPORT int interp_launch(const StepsParams* d_params, const uint8_t* d_ops, const uint16_t* d_args,
                              const uint64_t* d_numbers, uint32_t nOps, uint32_t nTemp1, uint32_t nTemp3,
                              uint64_t* q, uint64_t* scratch, uint64_t scratchElems, uint64_t NExt,
                              uint64_t nBlocks, uint64_t off_cm1, uint64_t off_cm2, uint64_t off_cm3,
                              uint64_t off_zi, int nStages, int nCustom, int blowup, const int64_t* openings,
                              int nOpenings, unsigned flags, int* d_err, cudaStream_t stream) {
    if (!d_params || !d_ops || !d_args || !d_numbers || !q || !nOps) return INTERP_E_ARGS;
    return interp_launch_any(d_params, d_ops, d_args, d_numbers, nOps, nTemp1, nTemp3, q, 0, scratch,
                             scratchElems, NExt, nBlocks, off_cm1, off_cm2, off_cm3, off_zi, nStages, nCustom,
                             blowup, openings, nOpenings, flags, d_err, stream);
}

// Launch the interpreter for one trace-domain expression (spec §4): N rows of the trace domain
// (strides = openingPoints, stage 1 from P->trace, const from pConstPolsAddress), stored into `dest`
// as exps_launch_expr(expId, P, dest, N, destDomain, off_cm1..3, mode, scalar, stagePos, _, destDim,
// destExpr) stores it; num1 as the generated kernel's. Same scratch, grid and return codes as
// interp_launch, plus INTERP_E_STORE for a mode / destDim exps_launch_expr never computes.
EXPS_EXPORT int interp_expr_launch(const StepsParams* d_params, const uint8_t* d_ops, const uint16_t* d_args,
                                   const uint64_t* d_numbers, uint32_t nOps, uint32_t nTemp1, uint32_t nTemp3,
                                   uint64_t* dest, uint64_t* scratch, uint64_t scratchElems, uint64_t N,
                                   uint64_t nBlocks, uint64_t off_cm1, uint64_t off_cm2, uint64_t off_cm3,
                                   int nStages, int nCustom, const int64_t* openings, int nOpenings,
                                   uint64_t destDomain, uint64_t mode, uint64_t scalar, uint64_t stagePos,
                                   uint64_t destDim, unsigned destExpr, unsigned num1, unsigned flags,
                                   int* d_err, cudaStream_t stream) {
    const InterpStore S = {dest, destDomain, stagePos, destDim, mode, scalar, destExpr, num1};
    if (!d_params || !d_ops || !d_args || !d_numbers || !nOps) return INTERP_E_ARGS;
    if (!interp_store_ok(S)) return INTERP_E_STORE;
    return interp_launch_any(d_params, d_ops, d_args, d_numbers, nOps, nTemp1, nTemp3, 0, &S, scratch,
                             scratchElems, N, nBlocks, off_cm1, off_cm2, off_cm3, 0, nStages, nCustom, 1,
                             openings, nOpenings, flags, d_err, stream);
}

// Registers / local memory of a kernel as the driver reports them (after the module loaded):
// which 0 = the Q kernel, 1 = the trace-domain expression kernel.
EXPS_EXPORT int interp_kernel_attrs_of(int which, int* regs, int* local_bytes, int* max_threads) {
#ifdef __CUDACC__
    cudaFuncAttributes a;
    cudaError_t e = cudaFuncGetAttributes(&a, which ? (const void*)interp_expr_kernel : (const void*)interp_q_kernel);
    if (e != cudaSuccess) return (int)e;
    *regs = a.numRegs;
    *local_bytes = (int)a.localSizeBytes;
    *max_threads = a.maxThreadsPerBlock;
#else
    (void)which;
    *regs = 0;
    *local_bytes = 0;
    *max_threads = INTERP_BLOCK;
#endif
    return 0;
}

EXPS_EXPORT int interp_kernel_attrs(int* regs, int* local_bytes, int* max_threads) {
    return interp_kernel_attrs_of(0, regs, local_bytes, max_threads);
}

// The launch configuration interp_launch uses on the GPU: grid, block, staged, tmp_shared, shared bytes.
EXPS_EXPORT int interp_config(uint32_t nOps, uint32_t nTemp1, uint32_t nTemp3, uint64_t scratchElems,
                              uint64_t NExt, uint64_t nBlocks, int nStages, int nCustom, unsigned flags,
                              unsigned long long* out5) {
    const uint64_t blk0 = NExt < INTERP_BLOCK ? NExt : INTERP_BLOCK;
    const uint64_t tmp_bytes = (nTemp1 + 3 * (uint64_t)nTemp3) * blk0 * 8;
    const int tmp_shared = (flags & INTERP_TMP_SHARED) && tmp_bytes <= INTERP_TMP_SHARED_MAX;
    InterpPlan pl;
    int rc = interp_plan(pl, NExt, nBlocks, nTemp1, nTemp3, scratchElems, !tmp_shared, nStages, nCustom, 1,
                         0, 0);
    if (rc) return rc;
    const uint64_t stage_bytes = 17ull * nOps;
    const int staged = !(flags & INTERP_NO_STAGING) && stage_bytes <= INTERP_STAGE_MAX;
    out5[0] = pl.grid;
    out5[1] = pl.blk;
    out5[2] = (unsigned long long)staged;
    out5[3] = (unsigned long long)tmp_shared;
    out5[4] = sizeof(InterpTables) + (tmp_shared ? tmp_bytes : 0) + (staged ? stage_bytes : 0);
    return 0;
}

}  // extern "C"
