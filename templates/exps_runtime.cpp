// exps-codegen: the launcher of every generated <base>.exps.so. It exports the C ABI of
// ../shared/docs/semantics.md §5 (exps_launch, exps_min_scratch, exps_expr_covered,
// exps_launch_expr) plus exps_emitter_version / exps_source_hash over ONE kernel's launch table,
// `exps_kernel` (exps_abi.h), which the kernel's <key>_abi.cpp defines. Not a template: the same
// text for every kernel, so a build compiles it once (object cache) and links it into every .so.
//
// The kernels are device code only (nvcc -fatbin: no host pass, no per-kernel host stubs),
// embedded in the table, one fatbin per device TU. The first call that launches anything in
// a process loads them (cudaLibraryLoadData) and looks every kernel up (cudaLibraryGetKernel),
// once, under a lock; a launch is then one cudaLaunchKernel of a looked-up cudaKernel_t. Library
// and kernel handles are context-independent: any host thread, stream or device may launch them.
// They are unloaded when the .so goes (dlclose) or the process exits, as nvcc's own registration
// code unregisters its fatbins.
//
// Errors: a launch that cannot run (no kernel image for the device, the library cannot be
// loaded, a launch error) writes nothing; the launcher says so on stderr (the first time in the
// process, with the CUDA error), stops that call's launches and exps_launch_expr returns 0. The
// prover ignores that value and has no fallback at that point, so the message is what makes the
// failure visible; the interpreter path can only be chosen before (exps_min_scratch,
// exps_expr_covered: pure functions of the table, never a CUDA call).
//
// With -DEXPS_HOSTCHECK (the host check, g++) there is no CUDA: a launch calls the kernel's host
// form (the device TU compiled as host C++) once with the launch's arguments; the chunked Q runs
// on the given scratch only (no top-up).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "exps_abi.h"

#define EXPS_EXPORT __attribute__((visibility("default")))
#define EXPS_BLOCK 256u

#ifdef EXPS_HOSTCHECK
typedef void* exps_stream_t;
#else
#include <cuda_runtime_api.h>

#include <pthread.h>

#include <atomic>
typedef cudaStream_t exps_stream_t;
#endif

namespace {

const exps_desc& D = exps_kernel;

// The expression kernel of expId, or 0 (binary search: the table is sorted by exp_id).
const exps_x_kernel* find_expr(uint64_t expId) {
    uint64_t lo = 0, hi = D.n_x;
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        if (D.x[mid].exp_id < expId) lo = mid + 1;
        else hi = mid;
    }
    return lo < D.n_x && D.x[lo].exp_id == expId ? &D.x[lo] : 0;
}

// The kernels' arguments, in their parameter order (q_chunks.cu.j2, exprs.cu.j2).
struct QArgs {
    StepsParams* P;
    uint64_t *q, *scratch;
    uint64_t wave, base, NExt, o1, o2, o3, ozi;
};
struct XArgs {
    StepsParams* P;
    uint64_t* dest;
    uint64_t N, destDomain, o1, o2, o3, mode, scalar, stagePos, destDim;
    unsigned destExpr;
};

// A kernel's exps_offs for a launch over the domain D (docs/DESIGN-column-offsets.md): byte offsets
// from the aux trace (stage columns, the zerofier), the const tree (or the trace-domain constants),
// the trace (a trace-domain stage-1 column) or the scratch of the wave, as the kernel's text read
// them before (`X.cm[s] + (c << log2 D) + row`, `scratch[slot * wave + lo]`). The host form gets
// the same words as the kernel.
void fill_offsets(const uint64_t* offs, unsigned n, uint64_t D, uint64_t o1, uint64_t o2, uint64_t o3,
                  uint64_t ozi, uint64_t wave, exps_offs& o) {
    for (unsigned i = 0; i < n && i < EXPS_MAX_OFFS; ++i) {
        const uint64_t kind = offs[i] >> 32, index = offs[i] & 0xffffffffull;
        if (kind == EXPS_OFF_WORD) {       // a literal word, not an offset
            o.v[i] = index;
            continue;
        }
        uint64_t words = 0;
        if (kind == EXPS_OFF_CM1) words = o1 + index * D;
        else if (kind == EXPS_OFF_CM1 + 1) words = o2 + index * D;
        else if (kind == EXPS_OFF_CM1 + 2) words = o3 + index * D;
        else if (kind == EXPS_OFF_CONST || kind == EXPS_OFF_TRACE) words = index * D;
        else if (kind == EXPS_OFF_ZI) words = ozi + index * D;
        else if (kind == EXPS_OFF_SCRATCH) words = index * wave;
        o.v[i] = words * 8;
    }
}
void q_offsets(const exps_q_kernel& k, const QArgs& a, exps_offs& o) {
    fill_offsets(k.offs, k.n_offs, a.NExt, a.o1, a.o2, a.o3, a.ozi, a.wave, o);
}
void x_offsets(const exps_x_kernel& k, const XArgs& a, exps_offs& o) {
    fill_offsets(k.offs, k.n_offs, a.N, a.o1, a.o2, a.o3, 0, 0, o);
}

#ifdef EXPS_HOSTCHECK
// ------------------------------------------------------------------- host check: host forms
struct Loaded {};
const Loaded* load() {
    static const Loaded l = {};
    return &l;
}
int launch_q(const Loaded*, uint64_t c, uint64_t grid, QArgs& a, exps_stream_t) {
    (void)grid;
    exps_offs o = {};
    q_offsets(D.q[c], a, o);
    D.q[c].host(a.P, a.q, a.scratch, a.wave, a.base, a.NExt, a.o1, a.o2, a.o3, a.ozi, o);
    return 1;
}
int launch_x(const Loaded*, const exps_x_kernel* x, uint64_t, XArgs& a, exps_stream_t) {
    exps_offs o = {};
    x_offsets(*x, a, o);
    x->host(a.P, a.dest, a.N, a.destDomain, a.o1, a.o2, a.o3, a.mode, a.scalar, a.stagePos, a.destDim, a.destExpr, o);
    return 1;
}
int launch_inv(const Loaded*, uint64_t, XArgs& a, exps_stream_t) {
    D.inv_host(a.P, a.dest, a.N, a.destDomain, a.o1, a.o2, a.o3, a.mode, a.scalar, a.stagePos, a.destDim, a.destExpr);
    return 1;
}
int exps_tmp_alloc(void** p, uint64_t bytes, exps_stream_t) {
    *p = malloc(bytes);
    return *p != 0;
}
void exps_tmp_free(void* p, exps_stream_t) { free(p); }
uint64_t single_grid(const Loaded*, uint64_t NExt) { return NExt; }   // the host form loops every row
uint64_t exps_topup(uint64_t, uint64_t given, uint64_t, void** own, exps_stream_t) {
    *own = 0;
    return given;
}
void exps_topup_free(void*, exps_stream_t) {}
#else
// ------------------------------------------------------------------- CUDA: the kernel library
struct Loaded {
    cudaLibrary_t* libs;     // n_libs
    cudaKernel_t* q;         // n_chunks
    cudaKernel_t* x;         // 2 n_x: expression i's WRITE kernel at 2 i, its inverse modes' at 2 i + 1 (or 0)
    cudaKernel_t inv;        // the generic inverse kernel (0: none)
};

pthread_mutex_t g_load_mu = PTHREAD_MUTEX_INITIALIZER;   // (no C++ exception can cross the C ABI)
std::atomic<const Loaded*> g_loaded{nullptr};
std::atomic<int> g_said_load{0}, g_said_launch{0};

// One line on stderr, the first time in the process (per kind: loading, launching).
void say(std::atomic<int>& said, const char* what, cudaError_t e) {
    if (said.exchange(1)) return;
    fprintf(stderr,
            "exps-codegen: kernel %s (exps %s): %s failed: %s (%s); the generated kernels of this AIR "
            "did not run, their outputs are not written\n",
            D.key, D.version, what, cudaGetErrorName(e), cudaGetErrorString(e));
}

void unload_libs(cudaLibrary_t* libs, unsigned n) {
    for (unsigned i = 0; i < n; ++i)
        if (libs[i]) (void)cudaLibraryUnload(libs[i]);
}

// atexit: runs when the .so is unloaded (dlclose) or the process exits, before the static
// runtime's own teardown (registered earlier, at its initialization: handlers run in reverse).
void unload_at_exit() {
    const Loaded* l = g_loaded.exchange(nullptr);
    if (!l) return;
    unload_libs(l->libs, D.n_libs);
    (void)cudaGetLastError();
    free(l->libs);
    free(l->q);
    free(l->x);
    free((void*)l);
}

const Loaded* load_locked() {
    Loaded* l = (Loaded*)calloc(1, sizeof(Loaded));
    cudaLibrary_t* libs = (cudaLibrary_t*)calloc(D.n_libs, sizeof(cudaLibrary_t));
    cudaKernel_t* q = (cudaKernel_t*)calloc(D.n_chunks, sizeof(cudaKernel_t));
    cudaKernel_t* x = D.n_x ? (cudaKernel_t*)calloc(2 * D.n_x, sizeof(cudaKernel_t)) : 0;
    cudaError_t e = (!l || !libs || !q || (D.n_x && !x)) ? cudaErrorMemoryAllocation : cudaSuccess;
    const char* what = "allocating the kernel table";
    for (unsigned i = 0; e == cudaSuccess && i < D.n_libs; ++i) {
        if (!D.fatbins[i]) continue;    // a bounded twin the build did not take (none of its kernels is named)
        e = cudaLibraryLoadData(&libs[i], D.fatbins[i], 0, 0, 0, 0, 0, 0);
        what = "loading its kernels (cudaLibraryLoadData)";
    }
    for (uint64_t c = 0; e == cudaSuccess && c < D.n_chunks; ++c) {
        e = cudaLibraryGetKernel(&q[c], libs[D.q[c].lib], D.q[c].name);
        what = "finding a Q kernel (cudaLibraryGetKernel)";
    }
    for (uint64_t i = 0; e == cudaSuccess && i < 2 * D.n_x; ++i) {
        const exps_x_kernel& k = D.x[i / 2];
        if (i % 2 && !k.name_inv) continue;
        e = cudaLibraryGetKernel(&x[i], libs[k.lib], i % 2 ? k.name_inv : k.name);
        what = "finding an expression kernel (cudaLibraryGetKernel)";
    }
    cudaKernel_t inv = 0;
    if (e == cudaSuccess && D.inv_name) {
        e = cudaLibraryGetKernel(&inv, libs[D.inv_lib], D.inv_name);
        what = "finding the generic inverse kernel (cudaLibraryGetKernel)";
    }
    if (e != cudaSuccess) {
        say(g_said_load, what, e);
        if (libs) unload_libs(libs, D.n_libs);
        (void)cudaGetLastError();   // this runtime's error only (the .so links its own, statically)
        free(libs);
        free(q);
        free(x);
        free(l);
        return 0;
    }
    l->libs = libs;
    l->q = q;
    l->x = x;
    l->inv = inv;
    return l;
}

// The loaded kernels, or 0 (said on stderr) when they cannot be loaded; a later call tries again.
const Loaded* load() {
    const Loaded* l = g_loaded.load(std::memory_order_acquire);
    if (l) return l;
    pthread_mutex_lock(&g_load_mu);
    l = g_loaded.load(std::memory_order_acquire);
    if (!l) {
        l = load_locked();
        if (l) {
            static bool registered = false;
            if (!registered) registered = atexit(unload_at_exit) == 0;
            g_loaded.store(l, std::memory_order_release);
        }
    }
    pthread_mutex_unlock(&g_load_mu);
    return l;
}

int launch(cudaKernel_t k, uint64_t grid, void** args, exps_stream_t stream) {
    const cudaError_t e = cudaLaunchKernel((const void*)k, dim3((unsigned)grid), dim3(EXPS_BLOCK), args, 0, stream);
    if (e == cudaSuccess) return 1;
    say(g_said_launch, "a kernel launch (cudaLaunchKernel)", e);
    (void)cudaGetLastError();
    return 0;
}

int launch_q(const Loaded* l, uint64_t c, uint64_t grid, QArgs& a, exps_stream_t stream) {
    exps_offs o = {};
    q_offsets(D.q[c], a, o);
    void* args[] = {&a.P, &a.q, &a.scratch, &a.wave, &a.base, &a.NExt, &a.o1, &a.o2, &a.o3, &a.ozi, &o};
    return launch(l->q[c], grid, args, stream);
}

// An expression's kernel (exprs.cu.j2: `_k`, `_ki`: the arguments and its offsets) or the generic
// inverse kernel (x_inv.cu.j2: the same arguments, no offsets).
int launch_x(const Loaded* l, const exps_x_kernel* x, uint64_t grid, XArgs& a, exps_stream_t stream) {
    exps_offs o = {};
    x_offsets(*x, a, o);
    void* args[] = {&a.P, &a.dest, &a.N, &a.destDomain, &a.o1, &a.o2, &a.o3, &a.mode, &a.scalar,
                    &a.stagePos, &a.destDim, &a.destExpr, &o};
    return launch(l->x[2 * (x - D.x) + (a.mode != 0)], grid, args, stream);
}
int launch_inv(const Loaded* l, uint64_t grid, XArgs& a, exps_stream_t stream) {
    void* args[] = {&a.P, &a.dest, &a.N, &a.destDomain, &a.o1, &a.o2, &a.o3, &a.mode, &a.scalar,
                    &a.stagePos, &a.destDim, &a.destExpr};
    return launch(l->inv, grid, args, stream);
}

// Scratch of a call, stream-ordered (as the Q top-up): no other launch can see it.
int exps_tmp_alloc(void** p, uint64_t bytes, exps_stream_t stream) {
    if (cudaMallocAsync(p, bytes, stream) == cudaSuccess) return 1;
    say(g_said_launch, "allocating scratch for an inverse (cudaMallocAsync)", cudaGetLastError());
    *p = 0;
    return 0;
}
void exps_tmp_free(void* p, exps_stream_t stream) { (void)cudaFreeAsync(p, stream); }

// Blocks of 256 threads of kernel k the current device holds at once (SMs x resident blocks at
// the kernel's registers), asked once per device; 512 if the runtime cannot tell. Only the
// bench's grid-stride form of the single kernel (EXPS_SINGLE_GRID_STRIDE) uses it.
#define EXPS_MAX_DEVICES 64
std::atomic<int> g_resident[EXPS_MAX_DEVICES];   // per device; 0: not asked yet

unsigned resident_grid(cudaKernel_t k) {
    std::atomic<int>* cache = g_resident;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= EXPS_MAX_DEVICES) return 512u;
    int r = cache[dev].load(std::memory_order_relaxed);
    if (r <= 0) {
        int per_sm = 0, sms = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (const void*)k, (int)EXPS_BLOCK, 0) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || per_sm * sms <= 0) {
            (void)cudaGetLastError();
            return 512u;
        }
        r = per_sm * sms;
        cache[dev].store(r, std::memory_order_relaxed);
    }
    return (unsigned)r;
}

// Blocks of the single Q kernel's launch over NExt rows (0: none).
uint64_t single_grid(const Loaded* l, uint64_t NExt) {
    if (D.single_shape == 0) return NExt ? resident_grid(l->q[0]) : 0;
    const uint64_t rows = (uint64_t)EXPS_BLOCK * D.single_shape;
    return (NExt + rows - 1) / rows;
}

// Scratch top-up of the chunked launcher (docs/ARCHITECTURE.md "Launch shape"). The prover gives
// exps_launch its interpreter's temporaries region, 16-20 words per row of 2^17 rows on
// ../shared/pk: at tens of slots that is a wave of ~100-200 blocks, too few to fill an H200, and
// thousands of launches. When the given scratch holds fewer than EXPS_TOPUP_BLOCKS blocks of rows,
// the launcher takes its own scratch for one wave of up to that many blocks, stream-ordered
// (cudaMallocAsync before its kernels, cudaFreeAsync after them on the same stream: no other launch
// can see it), at most EXPS_SCRATCH_MB MiB (environment; default EXPS_TOPUP_MB, 0: never). If the
// allocation fails, the launch runs on the given scratch alone.
#define EXPS_TOPUP_BLOCKS 2048ull
#define EXPS_TOPUP_MB 512ull
uint64_t exps_topup_bytes(void) {
    const char* s = getenv("EXPS_SCRATCH_MB");
    if (!s || !*s) return EXPS_TOPUP_MB << 20;
    uint64_t v = 0;
    for (; *s; ++s) {
        if (*s < '0' || *s > '9' || v > (1ull << 24)) return EXPS_TOPUP_MB << 20;   // not a count of MiB
        v = v * 10 + (uint64_t)(*s - '0');
    }
    return v << 20;
}

// Blocks of the wave the top-up aims at for `slots` scratch slots over `all` blocks of rows.
uint64_t exps_topup_want(uint64_t slots, uint64_t all) {
    const uint64_t want = all < EXPS_TOPUP_BLOCKS ? all : EXPS_TOPUP_BLOCKS;
    const uint64_t cap = exps_topup_bytes() / (slots * 256ull * 8ull);
    return want < cap ? want : cap;
}

// Blocks of the wave a chunked Q of `slots` scratch slots runs with `given` blocks' worth of
// caller scratch over `all` blocks of rows; *own is the scratch taken for it (0: the caller's).
uint64_t exps_topup(uint64_t slots, uint64_t given, uint64_t all, void** own, exps_stream_t stream) {
    *own = 0;
    const uint64_t want = exps_topup_want(slots, all);
    if (given >= want) return given;
    if (cudaMallocAsync(own, want * slots * 256ull * 8ull, stream) != cudaSuccess) {
        *own = 0;
        (void)cudaGetLastError();    // this runtime's error only (the .so links its own, statically)
        return given;
    }
    return want;
}

void exps_topup_free(void* own, exps_stream_t stream) {
    if (own) (void)cudaFreeAsync(own, stream);
}
#endif

// An inverse mode of an expression with no `_ki` (no hint inverts it; the prover is not expected to
// call this): its WRITE kernel stores the values row-major into scratch of this call, then the
// kernel's generic inverse kernel inverts and stores them as `_ki` would (the same words). 0 when
// the scratch cannot be had (said on stderr) or a launch failed.
int launch_saved_inverse(const Loaded* l, const exps_x_kernel* x, uint64_t grid, XArgs& a, exps_stream_t stream) {
    if (!D.inv_name && !D.inv_host) return 0;   // (a table always has it when an expression lacks _ki)
    void* v = 0;
    if (!exps_tmp_alloc(&v, a.N * x->vdim * 8ull, stream)) return 0;
    XArgs w = a;
    w.dest = (uint64_t*)v;
    w.mode = 0;
    w.destDomain = a.N;
    w.stagePos = 0;
    w.destDim = x->vdim;
    w.destExpr = 1;
    int ok = launch_x(l, x, exps_x_blocks(a.N, 0), w, stream);
    XArgs g = a;
    g.o1 = (uint64_t)(uintptr_t)v;
    g.o2 = x->vdim;
    g.o3 = x->num1;
    ok = ok && launch_inv(l, grid, g, stream);
    exps_tmp_free(v, stream);
    return ok;
}

}  // namespace

extern "C" {

// Q over the extended domain into q[c * NExt + row]. A single kernel: one launch, one row per
// thread. Chunked: waves of grid * 256 rows, every chunk kernel once per wave; a value crossing a
// cut lives at scratch[slot * WAVE + lo], so a wave is as many rows as the scratch holds (the
// caller's, or the top-up's when that holds more), at most every row, at least one block.
EXPS_EXPORT void exps_launch(StepsParams* d_params, uint64_t* q, uint64_t* scratch, uint64_t scratchElems,
                             uint64_t NExt, uint64_t off_cm1, uint64_t off_cm2, uint64_t off_cm3,
                             uint64_t off_zi, exps_stream_t stream) {
    const Loaded* l = load();
    if (!l) return;
    QArgs a = {d_params, q, scratch, 0, 0, NExt, off_cm1, off_cm2, off_cm3, off_zi};
    if (D.n_chunks == 1) {
        const uint64_t g = single_grid(l, NExt);
        if (g) launch_q(l, 0, g, a, stream);
        return;
    }
    const uint64_t all = (NExt + 255) / 256;
    uint64_t grid = all;
    void* own = 0;
    if (D.total_slots) {
        grid = exps_topup(D.total_slots, scratchElems / (D.total_slots * 256ull), all, &own, stream);
        if (own) a.scratch = (uint64_t*)own;
    }
    if (grid > all) grid = all;
    if (grid < 1) grid = 1;
    a.wave = grid * 256;
    int ok = 1;
    for (a.base = 0; ok && a.base < NExt; a.base += a.wave)
        for (uint64_t c = 0; ok && c < D.n_chunks; ++c)
            ok = launch_q(l, c, grid, a, stream);
    exps_topup_free(own, stream);
}

EXPS_EXPORT unsigned long long exps_min_scratch(void) { return D.min_scratch; }

EXPS_EXPORT int exps_expr_covered(unsigned long long expId) { return find_expr(expId) != 0; }

// The prover ignores the return value of a covered expression: every call it can make is
// computed. It never passes another mode or a destDim other than 1 / 3 (dest.dim is a max of
// param dims); N == 0 has no row to write (the interpreter writes none either). WRITE: one row
// per thread over ceil(N / 256) blocks; MUL_INV / WRITE_INV: EXPS_INV_ROWS rows per thread (they
// share one field inverse). Returns 1 when launched; 0 for a call no prover makes, an expId not
// covered, or a launch that failed (said on stderr).
EXPS_EXPORT int exps_launch_expr(unsigned long long expId, StepsParams* P, uint64_t* dest, unsigned long long N,
                                 unsigned long long destDomain, unsigned long long off_cm1,
                                 unsigned long long off_cm2, unsigned long long off_cm3,
                                 unsigned long long mode, unsigned long long scalar,
                                 unsigned long long stagePos, unsigned long long stageCols,
                                 unsigned long long destDim, unsigned int destExpr, exps_stream_t stream) {
    (void)stageCols;
    if (mode > 2 || (destDim != 1 && destDim != 3)) return 0;
    const exps_x_kernel* x = find_expr(expId);
    if (!x) return 0;
    if (N == 0) return 1;
    const Loaded* l = load();
    if (!l) return 0;
    XArgs a = {P, dest, N, destDomain, off_cm1, off_cm2, off_cm3, mode, scalar, stagePos, destDim, destExpr};
    const uint64_t grid = exps_x_blocks(N, mode);   // N <= 2^39 rows: < 2^31 blocks
    if (mode == 0 || x->name_inv) return launch_x(l, x, grid, a, stream);
    return launch_saved_inverse(l, x, grid, a, stream);
}

// Identity of this kernel; `exps-codegen status` reads it from the .so to tell current from stale.
EXPS_EXPORT const char* exps_emitter_version(void) { return D.version; }
EXPS_EXPORT const char* exps_source_hash(void) { return D.id + D.hash_offset; }

}  // extern "C"
