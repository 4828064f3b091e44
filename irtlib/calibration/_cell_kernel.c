/* The MAP engine's cell pass in C: one loop over a block's cells instead of a dozen numpy passes.

   Compiled at first use by irtlib.calibration.fused_kernel.compiled and called through ctypes by
   irtlib.calibration.cell_kernel for irtlib.calibration.joint_map's _cell_pass (the numpy path there
   holds the same formulas; see irtlib.core.kernels.response_terms).

   Per cell, with flip = 1 - 2x (+1 unsafe, -1 safe, 0 missing) and z = a (theta - b):

       y = flip z,  e = exp(-|y|) flip^2,  t = 1 + e,  r = 1 / t,  s = e r,
       w = s r = P (1 - P),  g = -flip sigmoid(y) = x - P  (sigmoid(y) = s where y < 0, (r - s) + s
       elsewhere, as the numpy path's blend rounds it),
       log L = -log t - max(y, 0).

   A missing cell (flip 0) has e = 0, so t = 1, w = 0, g = 0 and log L = 0: it adds nothing.
   The pass returns the block's log-likelihood, the column sums of g, g z, w, w z, w z^2 (5 x
   n_items), the row sums of g a and w a^2 (2 x n_rows), and, with keep, the per-cell w, w z and g
   in float32.

   Two precisions, as the numpy path's work arrays: *_f32 computes each cell in float and *_f64 in
   double; sums go to double: column sums after at most ROWS rows, row sums after at most SPAN
   vectors, the logarithms of products of at most FACTORS factors t (each in [1, 2]) per lane.
   W lanes (GNU C vector extensions); every operation is IEEE on each lane (no fused multiply-add:
   compiled with -ffp-contract=off; no reassociation) and the lanes are added in a fixed order, so
   the numbers depend only on the block, never on the vector width or the thread that ran it. */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 16        /* rows whose column sums are added in the cells' precision before double */
#define SPAN 16        /* vectors of a row whose row sums are added in the cells' precision before double */
#define FACTORS 500    /* factors t in [1, 2] multiplied per lane before a log: at most 2^500 */
#define PAD 8          /* a, b and a^2 come padded with zeros to a multiple of this many items */

/* One AVX2 register (two SSE ones elsewhere) of each precision: 8 floats or 4 doubles. */
#define L_f32 8
#define L_f64 4
typedef float vf __attribute__((vector_size(32)));
typedef float vf4 __attribute__((vector_size(16)));
typedef int32_t vfi __attribute__((vector_size(32)));
typedef double vd __attribute__((vector_size(32)));
typedef int64_t vdi __attribute__((vector_size(32)));
/* Eight double lanes (two registers): the accumulators of either precision. */
typedef struct { vd lo, hi; } acc;

#define INLINE static inline __attribute__((always_inline))

INLINE vf splat_f32(float x) { return (vf){x, x, x, x, x, x, x, x}; }
INLINE vd splat_f64(double x) { return (vd){x, x, x, x}; }
INLINE vf load_f32(const float *p) { vf v; memcpy(&v, p, sizeof v); return v; }
INLINE vd load_f64(const double *p) { vd v; memcpy(&v, p, sizeof v); return v; }
INLINE void store_f32(float *p, vf v) { memcpy(p, &v, sizeof v); }
INLINE void store_f64(double *p, vd v) { memcpy(p, &v, sizeof v); }
INLINE vf select_f32(vfi m, vf yes, vf no) { return (vf)((m & (vfi)yes) | (~m & (vfi)no)); }
INLINE vd select_f64(vdi m, vd yes, vd no) { return (vd)((m & (vdi)yes) | (~m & (vdi)no)); }
/* The accumulators: add (or multiply) a vector of either precision into the double lanes. */
INLINE acc acc_splat(double x) { return (acc){splat_f64(x), splat_f64(x)}; }
INLINE void add_f32(acc *s, vf v) {
    s->lo += __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1, 2, 3), vd);
    s->hi += __builtin_convertvector(__builtin_shufflevector(v, v, 4, 5, 6, 7), vd);
}
INLINE void add_f64(acc *s, vd v) { s->lo += v; }
INLINE void mul_f32(acc *s, vf v) {
    s->lo *= __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1, 2, 3), vd);
    s->hi *= __builtin_convertvector(__builtin_shufflevector(v, v, 4, 5, 6, 7), vd);
}
INLINE void mul_f64(acc *s, vd v) { s->lo *= v; }
INLINE double lane_sum(acc s) { double t = 0.0; for (int k = 0; k < 4; k++) t += s.lo[k]; for (int k = 0; k < 4; k++) t += s.hi[k]; return t; }
INLINE double lane_logs(acc s) { double t = 0.0; for (int k = 0; k < 4; k++) t += log(s.lo[k]) + log(s.hi[k]); return t; }

/* exp(-u) for u >= 0 in float, u clamped at 87 (e^-87 is about 1.6e-38, a normal float): -u = k ln 2 + r,
   |r| <= ln 2 / 2 (ln 2 in two parts), e^r = 1 + r + r^2 P(r), P of degree 5 (relative error of e^r about
   7e-8), times 2^k written into the exponent: the polynomial of exp_nonpositive in _batch_kernels.c, not
   shared through a header because that file's bytes are the key of the py-irt split cache (a change
   to it refits every cached split). */
INLINE vf exp_neg_f32(vf u) {
    vf x = -select_f32(u > splat_f32(87.0f), splat_f32(87.0f), u);
    const vf shift = splat_f32(12582912.0f);                     /* 1.5 * 2^23: rounds to an integer */
    vf k = (x * splat_f32(1.44269504088896341f) + shift) - shift;
    vf r = x - k * splat_f32(0.693145751953125f);
    r = r - k * splat_f32(1.4286068203094172e-6f);
    vf p = splat_f32(1.9826495554e-4f);
    p = p * r + splat_f32(1.3946021209e-3f);
    p = p * r + splat_f32(8.3334296942e-3f);
    p = p * r + splat_f32(4.1666269302e-2f);
    p = p * r + splat_f32(1.6666665673e-1f);
    p = p * r + splat_f32(0.5f);
    p = p * r * r + r + splat_f32(1.0f);
    vfi bits = (__builtin_convertvector(k, vfi) + 127) << 23;
    return p * (vf)bits;
}

/* exp(-u) for u >= 0 in double, u clamped at 708 (e^-708 is about 3e-308, a normal double): the same
   reduction (fdlibm's two parts of ln 2, the first exact in k ln 2 for |k| < 2^11), e^r by its Taylor
   series to r^13 (truncation below 1e-17 relative for |r| <= ln 2 / 2; rounding about 1 ulp). */
INLINE vd exp_neg_f64(vd u) {
    vd x = -select_f64(u > splat_f64(708.0), splat_f64(708.0), u);
    const vd shift = splat_f64(6755399441055744.0);             /* 1.5 * 2^52 */
    vd k = (x * splat_f64(1.4426950408889634074) + shift) - shift;
    vd r = x - k * splat_f64(6.93147180369123816490e-01);
    r = r - k * splat_f64(1.90821492927058770002e-10);
    vd p = splat_f64(1.0 / 6227020800.0);                        /* 1 / 13! */
    p = p * r + splat_f64(1.0 / 479001600.0);
    p = p * r + splat_f64(1.0 / 39916800.0);
    p = p * r + splat_f64(1.0 / 3628800.0);
    p = p * r + splat_f64(1.0 / 362880.0);
    p = p * r + splat_f64(1.0 / 40320.0);
    p = p * r + splat_f64(1.0 / 5040.0);
    p = p * r + splat_f64(1.0 / 720.0);
    p = p * r + splat_f64(1.0 / 120.0);
    p = p * r + splat_f64(1.0 / 24.0);
    p = p * r + splat_f64(1.0 / 6.0);
    p = p * r + splat_f64(0.5);
    p = p * r * r + r + splat_f64(1.0);
    vdi bits = (__builtin_convertvector(k, vdi) + 1023) << 52;
    return p * (vd)bits;
}

/* The per-cell terms of a vector of cells: y, t, w, g (see the top). */
#define TERMS(S, VT)                                                                        \
    INLINE void terms_##S(VT flip, VT z, VT *y, VT *t, VT *w, VT *g) {                       \
        VT yy = flip * z;                                                                    \
        VT e = exp_neg_##S(select_##S(yy < splat_##S(0), -yy, yy)) * (flip * flip);         \
        VT tt = splat_##S(1) + e;                                                            \
        VT r = splat_##S(1) / tt;                                                            \
        VT s = e * r;                                                                        \
        *w = s * r;                                                                          \
        *g = -(select_##S(yy >= splat_##S(0), (r - s) + s, s) * flip);                       \
        *y = yy;                                                                             \
        *t = tt;                                                                             \
    }
TERMS(f32, vf)
TERMS(f64, vd)

/* The flips of a vector of cells in the precision S; a vector of kept cells stored as floats. */
INLINE vf flips_f32(const float *p) { return load_f32(p); }
INLINE vd flips_f64(const float *p) { vf4 v; memcpy(&v, p, sizeof v); return __builtin_convertvector(v, vd); }
INLINE void keep_f32(float *p, vf v) { store_f32(p, v); }
INLINE void keep_f64(float *p, vd v) { vf4 f = __builtin_convertvector(v, vf4); memcpy(p, &f, sizeof f); }

/* z = a (theta - b) of a vector of cells in the precision S, rounded as the numpy path rounds it:
   theta - b in double, rounded to S; times a in double; rounded to S. */
INLINE vd z_half(double th, const double *a, const double *b) {
    vf4 d = __builtin_convertvector(splat_f64(th) - load_f64(b), vf4);
    return __builtin_convertvector(d, vd) * load_f64(a);
}
INLINE vf z_f32(double th, const double *a, const double *b) {
    vf4 lo = __builtin_convertvector(z_half(th, a, b), vf4), hi = __builtin_convertvector(z_half(th, a + 4, b + 4), vf4);
    return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7);
}
INLINE vd z_f64(double th, const double *a, const double *b) { return (splat_f64(th) - load_f64(b)) * load_f64(a); }
/* W values given in double, rounded to the precision S. */
INLINE vf from_doubles_f32(const double *p) {
    vf4 lo = __builtin_convertvector(load_f64(p), vf4), hi = __builtin_convertvector(load_f64(p + 4), vf4);
    return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7);
}
INLINE vd from_doubles_f64(const double *p) { return load_f64(p); }

/* n_vec vectors of one row's cells, from item j on (every pointer already at item j; col's five rows
   mw apart): adds g, g z, w, w z, w z^2 into col, g a and w a^2 into the row's vectors, max(y, 0) into
   relu (in double: y reaches |z|) and multiplies t into prod; with keep, stores w, w z, g. No calls: the accumulators stay in registers. */
#define CHUNK(S, T, VT)                                                                               \
    INLINE void chunk_##S(int64_t n_vec, const float *fl, const double *a, const double *b, const T *ac,   \
                          const T *a2,                                                                    \
                          double th, T *col, int64_t mw, int64_t derive, int64_t keep, float *kw,          \
                          float *kwz, float *kg, VT *row_g, VT *row_w, acc *relu, acc *prod) {              \
        for (int64_t v = 0; v < n_vec; v++) {                                                           \
            const int64_t j = v * L_##S;                                                                \
            VT z = z_##S(th, a + j, b + j), y, t, w, g;                                                 \
            terms_##S(flips_##S(fl + j), z, &y, &t, &w, &g);                                            \
            add_##S(relu, select_##S(y > splat_##S(0), y, splat_##S(0)));                               \
            mul_##S(prod, t);                                                                           \
            if (!derive) continue;                                                                      \
            VT wz = w * z;                                                                              \
            T *c = col + j;                                                                             \
            store_##S(c, load_##S(c) + g);                                                              \
            store_##S(c + mw, load_##S(c + mw) + g * z);                                                \
            store_##S(c + 2 * mw, load_##S(c + 2 * mw) + w);                                            \
            store_##S(c + 3 * mw, load_##S(c + 3 * mw) + wz);                                           \
            store_##S(c + 4 * mw, load_##S(c + 4 * mw) + wz * z);                                       \
            *row_g += g * load_##S(ac + j);                                                             \
            *row_w += w * load_##S(a2 + j);                                                             \
            if (keep) {                                                                                 \
                keep_##S(kw + j, w);                                                                    \
                keep_##S(kwz + j, wz);                                                                  \
                keep_##S(kg + j, g);                                                                    \
            }                                                                                           \
        }                                                                                               \
    }
CHUNK(f32, float, vf)
CHUNK(f64, double, vd)

/* One block of n_rows consecutive models, every cell stored (flip row-major, n_items a row).
   theta (n_rows,), a and b double, ac (= a) and a2 (= a^2) of the precision, the last four padded with
   zeros to a multiple of PAD.
   Writes log_lik[0]; with derive, item_sums (5, n_items) and model_sums (2, n_rows); with keep too,
   kept_w, kept_wz, kept_g (n_rows, n_items). A row goes in chunks of SPAN vectors, its last cells (when
   n_items is not a multiple of the lanes) through zero-padded copies (flip 0: missing).
   Returns 0, or -1 when the work array cannot be allocated. */
#define DENSE(S, T, VT)                                                                               \
    int64_t cell_pass_dense_##S(int64_t n_rows, int64_t n_items, const float *flip, const double *theta,   \
                                const double *a, const double *b, const T *ac, const T *a2,                \
                                int64_t derive, int64_t keep,                                               \
                                double *log_lik, double *item_sums, double *model_sums, float *kept_w,     \
                                float *kept_wz, float *kept_g) {                                            \
        enum { L = L_##S };                                                                             \
        const int64_t mw = (n_items + PAD - 1) / PAD * PAD, full = n_items / L * L;                    \
        T *col = NULL;                                                                                  \
        if (derive) {                                                                                   \
            col = calloc((size_t)(5 * mw), sizeof(T));                                                  \
            if (col == NULL && mw > 0) return -1;                                                     \
            memset(item_sums, 0, (size_t)(5 * n_items) * sizeof(double));                             \
        }                                                                                               \
        keep = derive && keep;                                                                          \
        acc prod = acc_splat(1.0), relu = acc_splat(0.0);                                              \
        int64_t factors = 0;                                                                            \
        double log_sum = 0.0;                                                                           \
        for (int64_t i = 0; i < n_rows; i++) {                                                          \
            const float *fl = flip + i * n_items;                                                       \
            const int64_t at = i * n_items;                                                             \
            const double th = theta[i];                                                                 \
            acc sum_g = acc_splat(0.0), sum_w = acc_splat(0.0);                                        \
            for (int64_t j = 0; j < n_items; j += SPAN * L) {                                           \
                VT row_g = splat_##S(0), row_w = splat_##S(0);                                          \
                int64_t n_vec = (full - j) / L < SPAN ? (full - j) / L : SPAN;                         \
                chunk_##S(n_vec, fl + j, a + j, b + j, ac + j, a2 + j, th, col + j, mw, derive, keep,   \
                          keep ? kept_w + at + j : NULL, keep ? kept_wz + at + j : NULL,               \
                          keep ? kept_g + at + j : NULL, &row_g, &row_w, &relu, &prod);                \
                if (n_vec < SPAN && full < n_items) {   /* the row's last cells */                      \
                    const int64_t k = full, n = n_items - full;                                         \
                    float pad[L] = {0}, out[3][L];                                                      \
                    memcpy(pad, fl + k, (size_t)n * sizeof(float));                                     \
                    chunk_##S(1, pad, a + k, b + k, ac + k, a2 + k, th, col + k, mw, derive, keep,      \
                              out[0], out[1], out[2], &row_g, &row_w, &relu, &prod);                          \
                    if (keep) {                                                                         \
                        memcpy(kept_w + at + k, out[0], (size_t)n * sizeof(float));                     \
                        memcpy(kept_wz + at + k, out[1], (size_t)n * sizeof(float));                    \
                        memcpy(kept_g + at + k, out[2], (size_t)n * sizeof(float));                     \
                    }                                                                                   \
                    n_vec++;                                                                            \
                }                                                                                       \
                add_##S(&sum_g, row_g);                                                                 \
                add_##S(&sum_w, row_w);                                                                 \
                factors += n_vec;                                                                       \
                if (factors > FACTORS - SPAN) {                                                         \
                    log_sum += lane_logs(prod);                                                         \
                    prod = acc_splat(1.0);                                                              \
                    factors = 0;                                                                        \
                }                                                                                       \
            }                                                                                           \
            if (derive) {                                                                               \
                model_sums[i] = lane_sum(sum_g);                                                        \
                model_sums[n_rows + i] = lane_sum(sum_w);                                               \
                if ((i + 1) % ROWS == 0 || i + 1 == n_rows) {                                           \
                    for (int q = 0; q < 5; q++)                                                         \
                        for (int64_t k = 0; k < n_items; k++) {                                         \
                            item_sums[q * n_items + k] += (double)col[q * mw + k];                      \
                            col[q * mw + k] = 0;                                                        \
                        }                                                                               \
                }                                                                                       \
            }                                                                                           \
        }                                                                                               \
        log_sum += lane_logs(prod);                                                                     \
        log_lik[0] = -(log_sum + lane_sum(relu));                                                       \
        free(col);                                                                                      \
        return 0;                                                                                       \
    }
DENSE(f32, float, vf)
DENSE(f64, double, vd)

/* One block stored as its observed cells: cell c at row row_of[c] of the block and item col[c].
   As the dense pass, with the per-item and per-row sums added cell by cell in cell order, in double
   (the numpy path's bincount). */
#define SPARSE(S, T, VT)                                                                              \
    int64_t cell_pass_sparse_##S(int64_t n_cells, int64_t n_rows, int64_t n_items, const int32_t *row_of,   \
                                 const int32_t *col, const float *flip, const double *theta,                \
                                 const double *a, const double *b, const T *ac, const T *a2,                \
                                 int64_t derive, int64_t keep,                                              \
                                 double *log_lik,                                                           \
                                 double *item_sums, double *model_sums, float *kept_w, float *kept_wz,     \
                                 float *kept_g) {                                                           \
        enum { L = L_##S };                                                                             \
        if (derive) {                                                                                   \
            memset(item_sums, 0, (size_t)(5 * n_items) * sizeof(double));                             \
            memset(model_sums, 0, (size_t)(2 * n_rows) * sizeof(double));                              \
        }                                                                                               \
        acc prod = acc_splat(1.0), relu = acc_splat(0.0);                                              \
        int64_t factors = 0;                                                                            \
        double log_sum = 0.0;                                                                           \
        for (int64_t c0 = 0; c0 < n_cells; c0 += L) {                                                   \
            const int n = n_cells - c0 < L ? (int)(n_cells - c0) : L;                                   \
            VT fv = splat_##S(0), av = splat_##S(0), a2v = splat_##S(0);                                \
            double zd[L] = {0};                                                                         \
            for (int k = 0; k < n; k++) {                                                               \
                int64_t r = row_of[c0 + k], j = col[c0 + k];                                            \
                fv[k] = (T)flip[c0 + k];                                                                \
                zd[k] = (double)(T)(theta[r] - b[j]) * a[j];                                            \
                av[k] = ac[j];                                                                          \
                a2v[k] = a2[j];                                                                         \
            }                                                                                           \
            VT z = from_doubles_##S(zd), y, t, w, g;                                                    \
            terms_##S(fv, z, &y, &t, &w, &g);                                                           \
            add_##S(&relu, select_##S(y > splat_##S(0), y, splat_##S(0)));                             \
            mul_##S(&prod, t);                                                                          \
            if (++factors == FACTORS) {                                                                 \
                log_sum += lane_logs(prod);                                                             \
                prod = acc_splat(1.0);                                                                  \
                factors = 0;                                                                            \
            }                                                                                           \
            if (!derive) continue;                                                                      \
            VT wz = w * z, gz = g * z, wzz = wz * z, ga = g * av, wa = w * a2v;                        \
            for (int k = 0; k < n; k++) {                                                               \
                int64_t r = row_of[c0 + k], j = col[c0 + k];                                            \
                item_sums[j] += (double)g[k];                                                           \
                item_sums[n_items + j] += (double)gz[k];                                                \
                item_sums[2 * n_items + j] += (double)w[k];                                             \
                item_sums[3 * n_items + j] += (double)wz[k];                                            \
                item_sums[4 * n_items + j] += (double)wzz[k];                                           \
                model_sums[r] += (double)ga[k];                                                         \
                model_sums[n_rows + r] += (double)wa[k];                                                \
                if (keep) {                                                                             \
                    kept_w[c0 + k] = (float)w[k];                                                       \
                    kept_wz[c0 + k] = (float)wz[k];                                                     \
                    kept_g[c0 + k] = (float)g[k];                                                       \
                }                                                                                       \
            }                                                                                           \
        }                                                                                               \
        log_sum += lane_logs(prod);                                                                     \
        log_lik[0] = -(log_sum + lane_sum(relu));                                                       \
        return 0;                                                                                       \
    }
SPARSE(f32, float, vf)
SPARSE(f64, double, vd)
