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
 * VT holds the medoids' vectors transposed, in tiles of w medoids (d rows of w doubles each, padded): a block of
 * medoids (32, or 8 for a few) is summed side by side, each in its own lane, so the order of every sum is the one above.
 * irtlib/selection/anchor_kernel.py's numpy twin computes the same numbers.
 */
#include <stdint.h>

/* LANES doubles, element by element (GCC's and clang's vector extension): each lane is one medoid's sum.
 * Eight in an AVX-512 build, four otherwise; the lanes are independent, so the width changes no number. */
#if defined(__AVX512F__)
#define LANES 8
#else
#define LANES 4
#endif
typedef double v4d __attribute__((vector_size(8 * LANES)));

static inline v4d load4(const double *p)
{
    v4d v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}

typedef int64_t v4i __attribute__((vector_size(8 * LANES)));

/* NEAREST(name, NV): the kernel summing LANES NV medoids side by side, NV vectors kept in registers. In each lane:
 * acc = x0 * v0, then acc = acc + xt * vt for t = 1 .. d - 1, as above. The argmax runs in the lanes too: each lane
 * keeps the largest similarity of the medoids it saw (in increasing order, a strictly larger one replacing it: the
 * first of equals) and that medoid; the lanes' winners are then compared, ties to the lowest medoid, which is
 * numpy's first argmax over all medoids.
 *
 * VT is cut into tiles of w medoids (w a multiple of LANES NV): tile T holds medoids T w .. T w + w - 1, d rows of
 * w doubles, VT + T d w + t w + j; the medoids past m are padding (never winners). The rows are taken CHUNK at a
 * time, and each tile runs over the chunk's rows before the next tile, so a tile is read from the first-level
 * cache (a tile of 128 medoids and 25 coordinates is 25 KB) instead of every medoid's vector from further away for
 * every row. Every row still meets the medoids' blocks in increasing order with its lanes' state carried from one
 * tile to the next (kept beside the chunk), so the numbers are those of one pass over all medoids. */
#define CHUNK 64
#define NEAREST(name, NV)                                                                                 \
void name(int64_t n_rows, const int64_t *rows, int64_t d, const double *U, int64_t m,                     \
          const double *VT, int64_t w, int64_t *lab, double *best)                                       \
{                                                                                                         \
    v4i lane;                                                                                             \
    for (int l = 0; l < LANES; l++)                                                                       \
        lane[l] = l;                                                                                      \
    v4d keep_v[CHUNK];                                                                                    \
    v4i keep_i[CHUNK];                                                                                    \
    for (int64_t i0 = 0; i0 < n_rows; i0 += CHUNK) {                                                      \
        const int64_t i1 = i0 + CHUNK < n_rows ? i0 + CHUNK : n_rows;                                     \
        for (int64_t i = i0; i < i1; i++) {                                                               \
            keep_v[i - i0] = (v4d){0} - __builtin_inf();                                                  \
            keep_i[i - i0] = (v4i){0} - 1;                                                                \
        }                                                                                                 \
        for (int64_t T0 = 0; T0 < m; T0 += w) {                                                           \
            const double *tile = VT + T0 * d;                                                             \
            const int64_t T1 = T0 + w < m ? T0 + w : m;                                                   \
            for (int64_t i = i0; i < i1; i++) {                                                           \
                const double *x = U + (rows ? rows[i] : i) * d;                                           \
                v4d bv = keep_v[i - i0];                                                                  \
                v4i bi = keep_i[i - i0];                                                                  \
                for (int64_t j0 = T0; j0 < T1; j0 += LANES * NV) {                                        \
                    const double *v0 = tile + (j0 - T0);                                                  \
                    v4d acc[NV];                                                                          \
                    const v4d x0 = x[0] - (v4d){0};                                                       \
                    _Pragma("GCC unroll 8")                                                               \
                    for (int q = 0; q < NV; q++)                                                          \
                        acc[q] = x0 * load4(v0 + LANES * q);                                              \
                    for (int64_t t = 1; t < d; t++) {                                                     \
                        const v4d xt = x[t] - (v4d){0};                                                   \
                        const double *vt = v0 + t * w;                                                    \
                        _Pragma("GCC unroll 8")                                                           \
                        for (int q = 0; q < NV; q++) {                                                    \
                            const v4d p = xt * load4(vt + LANES * q);                                     \
                            acc[q] = acc[q] + p;                                                          \
                        }                                                                                 \
                    }                                                                                     \
                    _Pragma("GCC unroll 8")                                                               \
                    for (int q = 0; q < NV; q++) {                                                        \
                        const v4i idx = lane + (j0 + LANES * q);                                          \
                        const v4i win = (acc[q] > bv) & (idx < m);                                        \
                        bv = (v4d)(((v4i)acc[q] & win) | ((v4i)bv & ~win));                              \
                        bi = (idx & win) | (bi & ~win);                                                   \
                    }                                                                                     \
                }                                                                                         \
                keep_v[i - i0] = bv;                                                                      \
                keep_i[i - i0] = bi;                                                                      \
            }                                                                                             \
        }                                                                                                 \
        for (int64_t i = i0; i < i1; i++) {                                                               \
            const v4d bv = keep_v[i - i0];                                                                \
            const v4i bi = keep_i[i - i0];                                                                \
            double v = bv[0];                                                                             \
            int64_t at = bi[0];                                                                           \
            for (int l = 1; l < LANES; l++)                                                               \
                if (bi[l] >= 0 && (at < 0 || bv[l] > v || (bv[l] == v && bi[l] < at))) {                 \
                    v = bv[l];                                                                            \
                    at = bi[l];                                                                           \
                }                                                                                         \
            lab[i] = at;                                                                                  \
            best[i] = v;                                                                                  \
        }                                                                                                 \
    }                                                                                                     \
}

NEAREST(nearest_medoid, 32 / LANES)    /* many medoids: 32 side by side */
NEAREST(nearest_medoid_8, 8 / LANES)   /* a few medoids (the moved ones): 8, less padding */
