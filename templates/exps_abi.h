// exps-codegen: the launch table of one generated kernel, as its `<key>_abi.cpp` defines it and the
// generic launcher (exps_runtime.cpp, the same text for every kernel) reads it. Plain data: no
// CUDA header, so a kernel's table compiles in milliseconds (docs/ARCHITECTURE.md "Launch path").
// C++ (the table and the launcher are compiled as C++; only the ABI functions are extern "C").
#ifndef EXPS_ABI_H
#define EXPS_ABI_H

#include <stdint.h>

struct StepsParams;   // the prover's (gen_common.cuh); the launcher only passes the pointer on

// A kernel's byte offsets (docs/DESIGN-column-offsets.md): entry i is where the i-th column word or
// scratch slot its text reads or writes (`O.v[i]`) starts, from the aux trace, the const tree, the
// trace or the scratch; the launcher computes them once per launch from the kernel's descriptors
// (exps_q_kernel::offs, exps_x_kernel::offs: kind << 32 | index) and passes them as the kernel's
// last parameter (the constant bank: an offset is an operand of the address add, no load and no
// shift of the column index by log2 of the domain). D below: the launch's domain, NExt for Q, N
// for a trace-domain expression.
#define EXPS_MAX_OFFS 128
#define EXPS_OFF_CM1 1ull      // kinds 1-3: stage s column index: (off_cm<s> + index * D) * 8 from aux
#define EXPS_OFF_CONST 4ull    // a fixed column: index * D * 8 from the const tree (or the trace-domain constants)
#define EXPS_OFF_ZI 5ull       // the zerofier (boundary index): (off_zi + index * D) * 8 from aux
#define EXPS_OFF_SCRATCH 6ull  // scratch slot index: index * wave * 8 from the scratch
#define EXPS_OFF_TRACE 7ull    // a trace-domain stage-1 column (spec §2.4): index * D * 8 from P->trace
#define EXPS_OFF_WORD 8ull     // not an offset: a number literal of an expression, index itself (< 2^32;
                               // expressions that differ only in such literals share one kernel)
struct exps_offs {
    uint64_t v[EXPS_MAX_OFFS];
};

// The host check's form of a kernel (the device TU compiled by g++: the rows of one launch, the
// kernel's own arguments). 0 in a CUDA build.
// Q chunk c: (P, q, scratch, wave, base, NExt, off_cm1, off_cm2, off_cm3, off_zi, offsets)
typedef void (*exps_q_host)(const StepsParams*, uint64_t*, uint64_t*, uint64_t, uint64_t, uint64_t,
                            uint64_t, uint64_t, uint64_t, uint64_t, const exps_offs&);
// expression: (P, dest, N, destDomain, off_cm1, off_cm2, off_cm3, mode, scalar, stagePos, destDim, destExpr,
// offsets)
typedef void (*exps_x_host)(const StepsParams*, uint64_t*, uint64_t, uint64_t, uint64_t, uint64_t,
                            uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, unsigned, const exps_offs&);
// the generic inverse kernel: an expression's arguments without offsets (it reads no column)
typedef void (*exps_inv_host)(const StepsParams*, uint64_t*, uint64_t, uint64_t, uint64_t, uint64_t,
                              uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, unsigned);

// One Q chunk kernel, in launch order.
struct exps_q_kernel {
    unsigned lib;            // its device TU: index into exps_desc::fatbins
    const char* name;        // its symbol in that fatbin (the mangled name of k<digest>_q_c<c>_k)
    exps_q_host host;
    const uint64_t* offs;    // its exps_offs entries' descriptors (n_offs <= EXPS_MAX_OFFS)
    unsigned n_offs;
};

// One trace-domain expression kernel; exps_desc::x is sorted by exp_id.
struct exps_x_kernel {
    uint64_t exp_id;
    unsigned lib;
    const char* name;        // the mangled name of k<digest>_x_e<expId>_k (WRITE)
    const char* name_inv;    // ... of k<digest>_x_e<expId>_ki (MUL_INV, WRITE_INV: batched inverses); 0:
                             // none (no hint inverts it): the generic inverse kernel over its values
    exps_x_host host;
    unsigned vdim;           // the value's dim (1, 3)
    unsigned num1;           // the denominator of a dim-1 numerator (spec §4.3)
    const uint64_t* offs;    // its exps_offs entries' descriptors (n_offs <= EXPS_MAX_OFFS)
    unsigned n_offs;
};

struct exps_desc {
    const char* key;                     // the kernel key (error messages)
    const char* version;                 // exps_emitter_version()
    const char* id;                      // "exps-codegen-id:<version>:<source hash>"
    unsigned hash_offset;                // exps_source_hash() = id + hash_offset
    uint64_t n_chunks;                   // Q chunk kernels (1: a single kernel over every row)
    uint64_t total_slots;                // scratch slots of a wave (0: no value crosses a cut)
    uint64_t min_scratch;                // exps_min_scratch()
    unsigned single_shape;               // single kernel: rows per thread; 0: grid-stride (bench only)
    const exps_q_kernel* q;              // n_chunks entries
    uint64_t n_x;
    const exps_x_kernel* x;              // n_x entries, by exp_id (0 when none)
    unsigned n_libs;                     // device TUs, then the bounded twins of those with Q chunks
    const unsigned char* const* fatbins; // n_libs fatbins (0 in the host check; a twin not taken: 0)
    unsigned inv_lib;                    // the generic inverse kernel exps_x_inv_k: its device TU,
    const char* inv_name;                // its symbol (0: the kernel has none, every expression has a _ki)
    exps_inv_host inv_host;
};

extern const exps_desc exps_kernel __attribute__((visibility("hidden")));

// The single Q kernel's launch shape: one row per thread, unless a bench A/B (bench/sweep.py
// VARIANTS) defined one of the template's macros before every file of the kernel.
#if defined(EXPS_SINGLE_GRID_STRIDE)
#define EXPS_SINGLE_SHAPE 0u
#elif defined(EXPS_SINGLE_ROWS)
#define EXPS_SINGLE_SHAPE ((unsigned)(EXPS_SINGLE_ROWS))
#else
#define EXPS_SINGLE_SHAPE 1u
#endif

// Rows per thread of the inverse modes' expression launches (gen_common.cuh's batched inverses,
// which includes this header, and the launcher's grid: one definition for both; a bench A/B
// defines it before every file of the kernel). 8: docs/BENCHMARKS.md, "Levers tried and rejected".
#ifndef EXPS_INV_ROWS
#define EXPS_INV_ROWS 8
#endif

// Blocks of 256 threads of an expression launch over N rows: one row per thread for WRITE (mode
// 0, the `_k` kernel), EXPS_INV_ROWS for the inverse modes (`_ki`, the generic inverse kernel). The
// launcher's grid and the host check's loops over the threads of that grid (host code only).
static inline uint64_t exps_x_blocks(uint64_t N, uint64_t mode) {
    const uint64_t rows = 256ull * (mode == 0 ? 1u : (unsigned)EXPS_INV_ROWS);
    return (N + rows - 1) / rows;
}

#endif  // EXPS_ABI_H
