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

/* nearest_medoid_few: nearest_medoid_8's numbers for VT of one tile (w >= m, w a multiple of LANES), ROWS rows at a
 * time. With a few medoids each row's sum is one chain of dependent adds (a vector or two); taking ROWS rows side
 * by side gives the processor ROWS independent chains. Every row's lanes see the same medoids in the same order
 * (lane l: medoids l, l + LANES, ...), with the same products, sums, comparisons and final reduction over the
 * lanes as nearest_medoid_8: the same labels and similarities. */
#define ROWS 4
void nearest_medoid_few(int64_t n_rows, const int64_t *rows, int64_t d, const double *U, int64_t m,
                        const double *VT, int64_t w, int64_t *lab, double *best)
{
    v4i lane;
    for (int l = 0; l < LANES; l++)
        lane[l] = l;
    for (int64_t i0 = 0; i0 < n_rows; i0 += ROWS) {
        const int nr = n_rows - i0 < ROWS ? (int)(n_rows - i0) : ROWS;
        const double *x[ROWS];
        v4d bv[ROWS];
        v4i bi[ROWS];
        for (int r = 0; r < ROWS; r++) {
            const int64_t i = i0 + (r < nr ? r : 0);           /* past the end: row i0 again, not stored */
            x[r] = U + (rows ? rows[i] : i) * d;
            bv[r] = (v4d){0} - __builtin_inf();
            bi[r] = (v4i){0} - 1;
        }
        for (int64_t j0 = 0; j0 < m; j0 += LANES) {
            const double *v0 = VT + j0;
            v4d acc[ROWS];
            const v4d v = load4(v0);
            _Pragma("GCC unroll 4")
            for (int r = 0; r < ROWS; r++)
                acc[r] = (x[r][0] - (v4d){0}) * v;
            for (int64_t t = 1; t < d; t++) {
                const v4d vt = load4(v0 + t * w);
                _Pragma("GCC unroll 4")
                for (int r = 0; r < ROWS; r++) {
                    const v4d p = (x[r][t] - (v4d){0}) * vt;
                    acc[r] = acc[r] + p;
                }
            }
            const v4i idx = lane + j0;
            _Pragma("GCC unroll 4")
            for (int r = 0; r < ROWS; r++) {
                const v4i win = (acc[r] > bv[r]) & (idx < m);
                bv[r] = (v4d)(((v4i)acc[r] & win) | ((v4i)bv[r] & ~win));
                bi[r] = (idx & win) | (bi[r] & ~win);
            }
        }
        for (int r = 0; r < nr; r++) {
            double val = bv[r][0];
            int64_t at = bi[r][0];
            for (int l = 1; l < LANES; l++)
                if (bi[r][l] >= 0 && (at < 0 || bv[r][l] > val || (bv[r][l] == val && bi[r][l] < at))) {
                    val = bv[r][l];
                    at = bi[r][l];
                }
            lab[i0 + r] = at;
            best[i0 + r] = val;
        }
    }
}

/* nearest_medoid_above: nearest_medoid's lab and best for the rows whose best is at least a threshold, found with
 * a single-precision filter; lab = -1 and best = -inf for the others.
 *
 * Row i's threshold is thr[i], or, with hint, the similarity (summed as above) of the row with medoid hint[i]
 * (which then always passes). Every similarity s (summed as above) is within M of the exact real dot product,
 * and so is its single-precision value g (the vectors rounded to float, products and sums in float, in any order:
 * |g - exact| <= gamma_(d+2) |x| |v|, |s - exact| <= gamma_d |x| |v|), so a medoid with s >= thr has
 * g >= thr - M: only the medoids with g >= thr - M (the candidates, a few in a thousand on Anchor Points' warm
 * starts) have s summed, in increasing medoid order, the first largest kept. Since every medoid with s >= thr is a
 * candidate, where the row's largest s is at least thr it is found with its first medoid: nearest_medoid's answer.
 * M = (d + 3) 2^-23 |x| max|v| + (d + 2) 2^-140 (1 + |x|)(1 + max|v|): twice the bound, plus a term for numbers
 * rounded to float's subnormals. A row or a tile whose norm is not below 2^60 (or not finite: unorm[r] or norms[T],
 * where float could overflow) has every medoid of the tile summed in double.
 *
 * U32 holds U's rows in float, unorm their Euclidean norms (a little above; inf for a row with a coordinate not
 * finite); VT32 the medoids' vectors in float, in tiles of w as VT above; MED the medoids' rows of U (s is summed
 * from the row, the same numbers); norms[T] the largest norm in tile T, as unorm. */
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
#define FLANES 16

static inline v16f load16(const float *p)
{
    v16f v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}

#if defined(__AVX512F__)
#include <immintrin.h>
/* acc + a b with one rounding (the filter's bound holds for any rounding of its products and sums) */
static inline v16f fmadd16(v16f a, v16f b, v16f acc) { return (v16f)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)acc); }
/* the lanes where acc >= lim or acc is NaN, as bits */
static inline unsigned cand_bits(v16f acc, v16f lim)
{
    return (unsigned)(_mm512_cmp_ps_mask((__m512)acc, (__m512)lim, _CMP_GE_OQ)
                      | _mm512_cmp_ps_mask((__m512)acc, (__m512)acc, _CMP_UNORD_Q));
}
#else
static inline v16f fmadd16(v16f a, v16f b, v16f acc) { return acc + a * b; }
static inline unsigned cand_bits(v16f acc, v16f lim)
{
    const v16i c = (v16i)(acc >= lim) | (v16i)(acc != acc);
    unsigned bits = 0;
    for (int l = 0; l < FLANES; l++)
        bits |= (unsigned)(c[l] & 1) << l;
    return bits;
}
#endif

static inline double row_sim(const double *x, const double *v, int64_t d)
{
    double s = x[0] * v[0];
    for (int64_t t = 1; t < d; t++)
        s = s + x[t] * v[t];
    return s;
}

/* The filter over nq 16-lane vectors of a tile (rows stride w) from v0: the bits of the candidates, vector by vector. */
#define FBLOCK(NQ)                                                                                        \
static inline unsigned fblock_##NQ(const float *x32, int64_t d, const float *v0, int64_t w, v16f limv,    \
                                   unsigned *bits)                                                        \
{                                                                                                         \
    v16f acc[NQ];                                                                                         \
    const v16f x0 = x32[0] - (v16f){0};                                                                   \
    _Pragma("GCC unroll 8")                                                                               \
    for (int q = 0; q < NQ; q++)                                                                          \
        acc[q] = x0 * load16(v0 + FLANES * q);                                                            \
    for (int64_t t = 1; t < d; t++) {                                                                     \
        const v16f xt = x32[t] - (v16f){0};                                                               \
        const float *vt = v0 + t * w;                                                                     \
        _Pragma("GCC unroll 8")                                                                           \
        for (int q = 0; q < NQ; q++)                                                                      \
            acc[q] = fmadd16(xt, load16(vt + FLANES * q), acc[q]);                                        \
    }                                                                                                     \
    unsigned hit = 0;                                                                                     \
    _Pragma("GCC unroll 8")                                                                               \
    for (int q = 0; q < NQ; q++) {                                                                        \
        bits[q] = cand_bits(acc[q], limv);                                                                \
        hit |= bits[q];                                                                                   \
    }                                                                                                     \
    return hit;                                                                                           \
}
FBLOCK(8)
FBLOCK(4)
FBLOCK(2)
FBLOCK(1)

/* The same filter for two rows at once (each tile vector loaded once for both): bits_a and bits_b as fblock's. */
#define FBLOCK2(NQ)                                                                                       \
static inline unsigned fblock2_##NQ(const float *xa, const float *xb, int64_t d, const float *v0, int64_t w, \
                                    v16f lima, v16f limb, unsigned *bits_a, unsigned *bits_b)             \
{                                                                                                         \
    v16f acc_a[NQ], acc_b[NQ];                                                                            \
    const v16f a0 = xa[0] - (v16f){0}, b0 = xb[0] - (v16f){0};                                            \
    _Pragma("GCC unroll 8")                                                                               \
    for (int q = 0; q < NQ; q++) {                                                                        \
        const v16f v = load16(v0 + FLANES * q);                                                           \
        acc_a[q] = a0 * v;                                                                                \
        acc_b[q] = b0 * v;                                                                                \
    }                                                                                                     \
    for (int64_t t = 1; t < d; t++) {                                                                     \
        const v16f at = xa[t] - (v16f){0}, bt = xb[t] - (v16f){0};                                        \
        const float *vt = v0 + t * w;                                                                     \
        _Pragma("GCC unroll 8")                                                                           \
        for (int q = 0; q < NQ; q++) {                                                                    \
            const v16f v = load16(vt + FLANES * q);                                                       \
            acc_a[q] = fmadd16(at, v, acc_a[q]);                                                          \
            acc_b[q] = fmadd16(bt, v, acc_b[q]);                                                          \
        }                                                                                                 \
    }                                                                                                     \
    unsigned hit = 0;                                                                                     \
    _Pragma("GCC unroll 8")                                                                               \
    for (int q = 0; q < NQ; q++) {                                                                        \
        bits_a[q] = cand_bits(acc_a[q], lima);                                                            \
        bits_b[q] = cand_bits(acc_b[q], limb);                                                            \
        hit |= bits_a[q] | bits_b[q];                                                                     \
    }                                                                                                     \
    return hit;                                                                                           \
}
FBLOCK2(8)
FBLOCK2(4)
FBLOCK2(2)
FBLOCK2(1)

/* The filter's float limit of a row: below thr - M (see above), -inf for a NaN threshold. */
static inline v16f filter_limit(double t_i, double nx, double cn, int64_t d)
{
    const double margin = (double)(d + 3) * 0x1p-23 * nx * cn + (double)(d + 2) * 0x1p-140 * (1.0 + nx) * (1.0 + cn);
    const double lim = t_i - margin;
    /* a float at most lim (float's rounding moves it by at most 2^-24 of it, or 2^-150) */
    float limf = (float)(lim - (lim < 0 ? -lim : lim) * 0x1p-22 - 0x1p-140);
    if (lim != lim)
        limf = -__builtin_inff();
    return limf - (v16f){0};
}

/* The candidates of one filter block (bits of nq vectors from medoid j0) summed in double, in increasing medoid
 * order: the row's best at least t_i, first of equals kept. */
static inline void scan_bits(const double *x, const double *U, const int64_t *med, int64_t d, int64_t j0, int nq,
                             const unsigned *bits, int64_t T1, double t_i, double *b_v, int64_t *b_i)
{
    for (int q = 0; q < nq; q++)
        for (unsigned b = bits[q]; b; b &= b - 1) {
            const int64_t j = j0 + FLANES * q + __builtin_ctz(b);
            if (j >= T1)
                break;
            const double s = row_sim(x, U + med[j] * d, d);
            if (s >= t_i && s > *b_v) {
                *b_v = s;
                *b_i = j;
            }
        }
}

void nearest_medoid_above(int64_t n_rows, const int64_t *rows, int64_t d, const double *U, const float *U32,
                          const double *unorm, int64_t m, const int64_t *med, const float *VT32, int64_t w,
                          const double *norms, const double *thr, const int64_t *hint, int64_t *lab, double *best)
{
    const double big = 0x1p60;
    double th[CHUNK], bv[CHUNK];
    int64_t bi[CHUNK];
    for (int64_t i0 = 0; i0 < n_rows; i0 += CHUNK) {          /* a chunk of rows through every tile in turn */
        const int64_t i1 = i0 + CHUNK < n_rows ? i0 + CHUNK : n_rows;
        for (int64_t i = i0; i < i1; i++) {
            const double *x = U + (rows ? rows[i] : i) * d;
            th[i - i0] = hint ? row_sim(x, U + med[hint[i]] * d, d) : thr ? thr[i] : -__builtin_inf();
            bv[i - i0] = -__builtin_inf();
            bi[i - i0] = -1;
        }
        for (int64_t T0 = 0, tile_no = 0; T0 < m; T0 += w, tile_no++) {
            const int64_t T1 = T0 + w < m ? T0 + w : m;
            const double cn = norms[tile_no];
            const float *tile = VT32 + T0 * d;
            for (int64_t i = i0; i < i1;) {
                const int64_t r = rows ? rows[i] : i;
                const double *x = U + r * d;
                const double nx = unorm[r], t_i = th[i - i0];
                double b_v = bv[i - i0];
                int64_t b_i = bi[i - i0];
                if (!(nx < big && cn < big)) {     /* this tile in double, every medoid */
                    for (int64_t j = T0; j < T1; j++) {
                        const double s = row_sim(x, U + med[j] * d, d);
                        if (s >= t_i && s > b_v) {
                            b_v = s;
                            b_i = j;
                        }
                    }
                } else if (i + 1 < i1 && unorm[rows ? rows[i + 1] : i + 1] < big) {   /* two rows at once */
                    const int64_t r2 = rows ? rows[i + 1] : i + 1;
                    const double *x2 = U + r2 * d;
                    const double t_2 = th[i + 1 - i0];
                    double b_v2 = bv[i + 1 - i0];
                    int64_t b_i2 = bi[i + 1 - i0];
                    const v16f lima = filter_limit(t_i, nx, cn, d), limb = filter_limit(t_2, unorm[r2], cn, d);
                    const float *xa = U32 + r * d, *xb = U32 + r2 * d;
                    for (int64_t j0 = T0; j0 < T1;) {
                        const int64_t rem = T1 - j0;
                        const int nq = rem > 4 * FLANES ? 8 : rem > 2 * FLANES ? 4 : rem > FLANES ? 2 : 1;
                        const float *v0 = tile + (j0 - T0);
                        unsigned bits_a[8], bits_b[8], hit;
                        switch (nq) {
                        case 8: hit = fblock2_8(xa, xb, d, v0, w, lima, limb, bits_a, bits_b); break;
                        case 4: hit = fblock2_4(xa, xb, d, v0, w, lima, limb, bits_a, bits_b); break;
                        case 2: hit = fblock2_2(xa, xb, d, v0, w, lima, limb, bits_a, bits_b); break;
                        default: hit = fblock2_1(xa, xb, d, v0, w, lima, limb, bits_a, bits_b); break;
                        }
                        if (hit) {
                            scan_bits(x, U, med, d, j0, nq, bits_a, T1, t_i, &b_v, &b_i);
                            scan_bits(x2, U, med, d, j0, nq, bits_b, T1, t_2, &b_v2, &b_i2);
                        }
                        j0 += nq * FLANES;
                    }
                    bv[i + 1 - i0] = b_v2;
                    bi[i + 1 - i0] = b_i2;
                    bv[i - i0] = b_v;
                    bi[i - i0] = b_i;
                    i += 2;
                    continue;
                } else {
                    const v16f limv = filter_limit(t_i, nx, cn, d);
                    const float *x32 = U32 + r * d;
                    for (int64_t j0 = T0; j0 < T1;) {
                        const int64_t rem = T1 - j0;
                        const int nq = rem > 4 * FLANES ? 8 : rem > 2 * FLANES ? 4 : rem > FLANES ? 2 : 1;
                        const float *v0 = tile + (j0 - T0);
                        unsigned bits[8], hit;
                        switch (nq) {
                        case 8: hit = fblock_8(x32, d, v0, w, limv, bits); break;
                        case 4: hit = fblock_4(x32, d, v0, w, limv, bits); break;
                        case 2: hit = fblock_2(x32, d, v0, w, limv, bits); break;
                        default: hit = fblock_1(x32, d, v0, w, limv, bits); break;
                        }
                        if (hit)
                            scan_bits(x, U, med, d, j0, nq, bits, T1, t_i, &b_v, &b_i);
                        j0 += nq * FLANES;
                    }
                }
                bv[i - i0] = b_v;
                bi[i - i0] = b_i;
                i++;
            }
        }
        for (int64_t i = i0; i < i1; i++) {
            lab[i] = bi[i - i0];
            best[i] = bv[i - i0];
        }
    }
}

/* The alternation's cluster sums, as numpy's add.reduceat of the rows sorted by cluster (stably) computes them:
 * for a cluster whose members (in increasing position) are p0, p1, ..., each column is A[p0] + S, S numpy's pairwise
 * sum of the column over p1, p2, ... (DOUBLE_pairwise_sum: fewer than 8 values one after the other from -0.0; up
 * to 128 in eight interleaved accumulators combined as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the
 * remainder; more: split at half the length rounded down to a multiple of 8), A[p0] alone for a single member.
 * Here the columns run side by side (each column's operations are its own, in that order). */
static void pairwise_rows(const double *A, int64_t d, const int64_t *idx, int64_t n, double *out)
{
    if (n < 8) {
        for (int64_t j = 0; j < d; j++)
            out[j] = -0.0;
        for (int64_t i = 0; i < n; i++) {
            const double *a = A + idx[i] * d;
            for (int64_t j = 0; j < d; j++)
                out[j] += a[j];
        }
    }
    else if (n <= 128) {
        double r[8 * d];
        int64_t i;
        for (int q = 0; q < 8; q++)
            for (int64_t j = 0; j < d; j++)
                r[q * d + j] = A[idx[q] * d + j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int q = 0; q < 8; q++) {
                const double *a = A + idx[i + q] * d;
                for (int64_t j = 0; j < d; j++)
                    r[q * d + j] += a[j];
            }
        for (int64_t j = 0; j < d; j++)
            out[j] = ((r[j] + r[d + j]) + (r[2 * d + j] + r[3 * d + j]))
                     + ((r[4 * d + j] + r[5 * d + j]) + (r[6 * d + j] + r[7 * d + j]));
        for (; i < n; i++) {
            const double *a = A + idx[i] * d;
            for (int64_t j = 0; j < d; j++)
                out[j] += a[j];
        }
    }
    else {
        int64_t n2 = n / 2;
        n2 -= n2 % 8;
        double right[d];
        pairwise_rows(A, d, idx, n2, out);
        pairwise_rows(A, d, idx + n2, n - n2, right);
        for (int64_t j = 0; j < d; j++)
            out[j] = out[j] + right[j];
    }
}

/* sums[c] for every cluster c in [0, k) of the labels lab (each in [0, k), every cluster non-empty), rows of A
 * (n x d); order (n) and start (k + 1) are scratch: the positions by cluster, then position (a counting sort, the
 * stable order), and where each cluster's begin. With want (k flags), only the clusters c with want[c] are summed;
 * the other rows of sums are left as they are (a caller's sums of clusters whose members did not change). */
void cluster_sums(int64_t n, int64_t d, int64_t k, const int64_t *lab, const double *A, double *sums,
                  int64_t *order, int64_t *start, const uint8_t *want)
{
    for (int64_t c = 0; c <= k; c++)
        start[c] = 0;
    for (int64_t i = 0; i < n; i++)
        start[lab[i] + 1]++;
    for (int64_t c = 0; c < k; c++)
        start[c + 1] += start[c];
    for (int64_t i = 0; i < n; i++)
        order[start[lab[i]]++] = i;
    for (int64_t c = k; c > 0; c--)
        start[c] = start[c - 1];
    start[0] = 0;
    double rest[d];
    for (int64_t c = 0; c < k; c++) {
        if (want && !want[c])
            continue;
        const int64_t b = start[c], e = start[c + 1];
        double *s = sums + c * d;
        const double *a0 = A + order[b] * d;
        if (e - b == 1) {
            for (int64_t j = 0; j < d; j++)
                s[j] = a0[j];
            continue;
        }
        pairwise_rows(A, d, order + b + 1, e - b - 1, rest);
        for (int64_t j = 0; j < d; j++)
            s[j] = a0[j] + rest[j];
    }
}

/* The update step's new medoids, as _alternate's numpy computes them: top[c] the largest score of cluster c
 * (numpy's maximum: NaN if any is NaN); new[c] the lowest position of c whose score >= top[c], unless the
 * current medoid med[c] has score >= top[c] (it stays); a cluster with no such position keeps med[c]. */
void cluster_top(int64_t n, int64_t k, const int64_t *lab, const double *score, const int64_t *med, int64_t *new_med,
                 double *top)
{
    for (int64_t c = 0; c < k; c++) {
        top[c] = -__builtin_inf();
        new_med[c] = -1;
    }
    for (int64_t i = 0; i < n; i++) {
        const double s = score[i], t = top[lab[i]];
        top[lab[i]] = (s != s || t != t) ? (s != s ? s : t) : (s > t ? s : t);
    }
    for (int64_t i = 0; i < n; i++)
        if (new_med[lab[i]] < 0 && score[i] >= top[lab[i]])
            new_med[lab[i]] = i;
    for (int64_t c = 0; c < k; c++)
        if (score[med[c]] >= top[c] || new_med[c] < 0)
            new_med[c] = med[c];
}

/* The stable lexicographic order of the rows of A (n x d): numpy.lexsort(A.T[::-1]), column 0 the first key.
 * Doubles compare as numpy sorts them (NaN after every number, -0.0 equal to 0.0); rows equal in every column keep
 * their positions' order. A stable sort with that comparison has one answer, lexsort's: here insertion sorts of
 * runs of 16, then merges (the left row taken unless the right one is smaller). tmp: n scratch. */
static inline int num_lt(double a, double b)
{
    return a < b || (b != b && a == a);
}

static inline int row_lt(const double *A, int64_t d, int64_t i, int64_t j)
{
    const double *a = A + i * d, *b = A + j * d;
    for (int64_t t = 0; t < d; t++) {
        if (num_lt(a[t], b[t]))
            return 1;
        if (num_lt(b[t], a[t]))
            return 0;
    }
    return 0;
}

void row_order(int64_t n, int64_t d, const double *A, int64_t *order, int64_t *tmp)
{
    const int64_t run = 16;
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    for (int64_t b = 0; b < n; b += run) {
        const int64_t e = b + run < n ? b + run : n;
        for (int64_t i = b + 1; i < e; i++) {
            const int64_t key = order[i];
            int64_t j = i;
            while (j > b && row_lt(A, d, key, order[j - 1])) {
                order[j] = order[j - 1];
                j--;
            }
            order[j] = key;
        }
    }
    int64_t *src = order, *dst = tmp;
    for (int64_t width = run; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            const int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                dst[k++] = row_lt(A, d, src[j], src[i]) ? src[j++] : src[i++];
            while (i < mid)
                dst[k++] = src[i++];
            while (j < hi)
                dst[k++] = src[j++];
        }
        int64_t *swap = src;
        src = dst;
        dst = swap;
    }
    if (src != order)
        for (int64_t i = 0; i < n; i++)
            order[i] = src[i];
}
