/* Anchor Points' nearest medoid: every point's largest dot product with the medoids' vectors, in one fixed order.
 *
 * For every asked point r (rows[i], or i without rows) and medoid j, the similarity is
 *
 *     s = u[r,0] * v[j,0];  s = s + u[r,1] * v[j,1];  ...;  s = s + u[r,d-1] * v[j,d-1]
 *
 * in IEEE double, each product rounded before its sum (compiled with -ffp-contract=off: no fused
 * multiply-adds), coordinates in increasing order: the same bits whatever the number of points or medoids
 * asked and on every machine, unlike a BLAS product (whose summation depends on the product's shape and
 * on the processor's kernel). lab[i] is the first j with the largest s (numpy's argmax), best[i] that s.
 * VT holds the medoids' vectors transposed, d rows of ldv >= m doubles (padded to a multiple of the block):
 * a block of medoids (32, or 8 for a few) is summed side by side, each in its own lane, so the order of every sum is the one above.
 * irtlib/selection/anchor_kernel.py's numpy twin computes the same numbers.
 */
#include <stdint.h>

/* four doubles, element by element (GCC's and clang's vector extension): each lane is one medoid's sum */
typedef double v4d __attribute__((vector_size(32)));

static inline v4d load4(const double *p)
{
    v4d v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}

static inline void store4(double *p, v4d v) { __builtin_memcpy(p, &v, sizeof v); }

/* NEAREST(name, NV): the kernel summing 4 NV medoids side by side, NV vectors kept in registers (ldv a multiple
 * of 4 NV). In each lane: acc = x0 * v0, then acc = acc + xt * vt for t = 1 .. d - 1, as described above. */
#define NEAREST(name, NV)                                                                                   \
void name(int64_t n_rows, const int64_t *rows, int64_t d, const double *U, int64_t m,                     \
          const double *VT, int64_t ldv, int64_t *lab, double *best)                                     \
{                                                                                                         \
    double out[4 * NV];                                                                                   \
    for (int64_t i = 0; i < n_rows; i++) {                                                                \
        const double *x = U + (rows ? rows[i] : i) * d;                                                   \
        double bv = 0.0;                                                                                  \
        int64_t bl = -1;                                                                                  \
        for (int64_t j0 = 0; j0 < m; j0 += 4 * NV) {                                                      \
            v4d acc[NV];                                                                                  \
            const v4d x0 = {x[0], x[0], x[0], x[0]};                                                      \
            _Pragma("GCC unroll 8")                                                                       \
            for (int q = 0; q < NV; q++)                                                                  \
                acc[q] = x0 * load4(VT + j0 + 4 * q);                                                     \
            for (int64_t t = 1; t < d; t++) {                                                             \
                const v4d xt = {x[t], x[t], x[t], x[t]};                                                  \
                const double *vt = VT + t * ldv + j0;                                                     \
                _Pragma("GCC unroll 8")                                                                   \
                for (int q = 0; q < NV; q++) {                                                            \
                    const v4d p = xt * load4(vt + 4 * q);                                                 \
                    acc[q] = acc[q] + p;                                                                  \
                }                                                                                         \
            }                                                                                             \
            _Pragma("GCC unroll 8")                                                                       \
            for (int q = 0; q < NV; q++)                                                                  \
                store4(out + 4 * q, acc[q]);                                                              \
            const int64_t nb = m - j0 < 4 * NV ? m - j0 : 4 * NV;                                         \
            for (int64_t jj = 0; jj < nb; jj++)                                                           \
                if (bl < 0 || out[jj] > bv) {                                                             \
                    bv = out[jj];                                                                         \
                    bl = j0 + jj;                                                                         \
                }                                                                                         \
        }                                                                                                 \
        lab[i] = bl;                                                                                      \
        best[i] = bv;                                                                                     \
    }                                                                                                     \
}

NEAREST(nearest_medoid, 8)      /* many medoids: 32 side by side */
NEAREST(nearest_medoid_8, 2)    /* a few medoids (the moved ones): 8, less padding */
