// Value-only forms for bench/fieldops.py's variant `lazy` (issue #13; docs/DESIGN-value-path.md):
// the product's gl3_mul_v (templates/gen_common.cuh, the Q kernels' value path since emitter 0.11.0)
// and, not yet in the product, a * b + c with the add inside gl3_mul_v's accumulators (the q_mix
// loop's gl3_add(gl3_mul(a, b), c)). Right modulo p, not necessarily the production word: fieldops
// checks them mod p.
#ifndef EXPS_LAZY_OPS_CUH
#define EXPS_LAZY_OPS_CUH
#include "gen_common.cuh"

__device__ __forceinline__ gl3 lz_gl3_mul_add(gl3 a, gl3 b, gl3 c) {
    const uint64_t A01 = gl_add(a.v0, a.v1), A02 = gl_add(a.v0, a.v2), A12 = gl_add(a.v1, a.v2);
    const uint64_t B01 = gl_add(b.v0, b.v1), B02 = gl_add(b.v0, b.v2), B12 = gl_add(b.v1, b.v2);
    const gl_acc D = gl_acc_mul(a.v0, b.v0), E = gl_acc_mul(a.v1, b.v1), F = gl_acc_mul(a.v2, b.v2);
    const gl_acc R0 = gl_acc_mul(A12, B12), R1 = gl_acc_mul(A01, B01), R2 = gl_acc_mul(A02, B02);
    const gl_acc G = gl_acc_sub(D, E);
    const gl_acc c0 = {c.v0, 0u}, c1 = {c.v1, 0u}, c2 = {c.v2, 0u};
    return gl3_make(gl_acc_red(gl_acc_add(gl_acc_sub(gl_acc_add(R0, G), F), c0)),
                    gl_acc_red(gl_acc_add(gl_acc_sub(gl_acc_sub(gl_acc_sub(gl_acc_add(R1, R0), E), E), D), c1)),
                    gl_acc_red(gl_acc_add(gl_acc_sub(R2, G), c2)));
}
#endif
