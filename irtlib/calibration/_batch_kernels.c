/* The batched py-irt fit's passes over the cells and the columns, in C.

   Compiled at first use by irtlib.calibration.fused_kernel (the system C compiler, GNU C vector
   extensions) and called through ctypes by irtlib.calibration.pyirt_batch: loglik_2pl (the
   likelihood and its gradient, one pass over the cells), guide_sample and prior_terms (the guide's
   sample and the priors' and guides' terms, one pass over the columns each).

   loglik_2pl.

   Per split s and training row i, for every item j: z = a_j theta_i - a_j b_j, t = -sign z (sign +1
   safe, -1 unsafe, 0 no observation), q = sigmoid(t) = sigmoid(-sign z), and

       d log p / d z = sign q,     log p = log sigmoid(sign z) = -max(t, 0) + log f,
       f = 1 / (1 + exp(-|t|)) = max(q, 1 - q)  in [1/2, 1],

   with q = f where t >= 0 and q = exp(-|t|) f where t < 0, so that q keeps its relative precision in
   well-predicted cells (never 1 - something). One exp and one division per cell; the factors f of a
   lane are multiplied, at most FLUSH of them (no underflow: each is at least 1/2), before one log in
   double precision. The sums over a row (the gradient in theta, max(t, 0)) run in W lanes added in a
   fixed order at the end of the row; the sums over rows (the gradient in a and b) run down each
   column. A split's numbers depend on its own cells only, wherever it sits in the batch.

   Only IEEE operations on each lane (no fused multiply-add: compiled with -ffp-contract=off; no
   reassociation), so that the 8-lane vectors compiled for AVX2 or as SSE pairs give the same bits. */

#include <math.h>
#include <stdint.h>
#include <string.h>

#define W 8          /* lanes */
#define FLUSH 120    /* factors per lane before a log: 2^-120 is a normal float */

typedef float vf __attribute__((vector_size(4 * W)));
typedef int32_t vi __attribute__((vector_size(4 * W)));

static inline __attribute__((always_inline)) vf splat(float x) { vf v; for (int k = 0; k < W; k++) v[k] = x; return v; }
static inline __attribute__((always_inline)) vi splat_i(int32_t x) { vi v; for (int k = 0; k < W; k++) v[k] = x; return v; }
static inline __attribute__((always_inline)) vf load(const float *p) { vf v; memcpy(&v, p, sizeof v); return v; }
static inline __attribute__((always_inline)) void store(float *p, vf v) { memcpy(p, &v, sizeof v); }
static inline __attribute__((always_inline)) vf select(vi mask, vf yes, vf no) { return (vf)((mask & (vi)yes) | (~mask & (vi)no)); }

/* exp(x) for x <= 0 (x clamped below at -87, about 1.6e-38): x = k ln 2 + r with |r| <= ln 2 / 2
   (ln 2 in two parts), e^r = 1 + r + r^2 P(r) with P of degree 5 fitted by weighted least squares on
   Chebyshev nodes (relative error of e^r at most 6.6e-8 in float32), times 2^k built in the exponent.
   Inlined (a call would pass the vectors through memory and spill the callers' accumulators). */
static inline __attribute__((always_inline)) vf exp_nonpositive(vf x) {
    x = select(x < splat(-87.0f), splat(-87.0f), x);
    const vf shift = splat(12582912.0f);                     /* 1.5 * 2^23: rounds to an integer */
    vf k = (x * splat(1.44269504088896341f) + shift) - shift;
    vf r = x - k * splat(0.693145751953125f);
    r = r - k * splat(1.4286068203094172e-6f);
    vf p = splat(1.9826495554e-4f);
    p = p * r + splat(1.3946021209e-3f);
    p = p * r + splat(8.3334296942e-3f);
    p = p * r + splat(4.1666269302e-2f);
    p = p * r + splat(1.6666665673e-1f);
    p = p * r + splat(0.5f);
    p = p * r * r + r + splat(1.0f);
    vi bits = (__builtin_convertvector(k, vi) + 127) << 23;
    return p * (vf)bits;
}

/* exp(x), x clamped to [-87, 88] (about 1.6e-38 to 1.7e38): exp_nonpositive's formula, with x
   above 0 clamped at 88 first (the same arithmetic, so the same bits where both apply). */
static inline __attribute__((always_inline)) vf exp_clamped(vf x) {
    return exp_nonpositive(select(x > splat(88.0f), splat(88.0f), x));
}

/* One vector of cells of a row (sign, a, a b and the row's theta): t = -sign z with z = a theta - a b,
   r = d log p / d z, the factor f of the loss (1 where the cell is not an observation) and max(t, 0). */
typedef struct { vf r, f, relu; } cell_t;

static inline __attribute__((always_inline)) cell_t cell(vf sgn, vf av, vf pab, vf th) {
    vf t = -sgn * (av * th - pab);
    vi neg = t < splat(0.0f);
    vf e = exp_nonpositive((vf)((vi)t | splat_i(INT32_MIN)));   /* exp(-|t|): -|t| is t with its sign bit set */
    vf f = splat(1.0f) / (splat(1.0f) + e);
    cell_t c;
    c.r = sgn * select(neg, e * f, f);
    c.relu = select(neg, splat(0.0f), t);
    c.f = select(sgn == splat(0.0f), splat(1.0f), f);
    return c;
}

/* n_splits splits of at most n_max training rows and m items, rows stored mw >= m apart (mw a
   multiple of W, sign 0 in the padding).
   rows     (S,)             int64: the split's number of training rows (its first rows)
   sign     (S, n_max, mw)   float32: +1 safe, -1 unsafe, 0 no observation
   theta    (S, .) float32, row s at theta + s * theta_stride; b, a likewise (n_max and m values)
   value    (S,)             float64: the log-likelihood of each split
   g_theta  (S, n_max)       float32: its gradient in theta (0 in rows beyond the split's own)
   g_b, g_a (S, m)           float32: its gradient in b and in a
   work     4 * mw floats */
void loglik_2pl(int64_t n_splits, int64_t n_max, int64_t m, int64_t mw, const int64_t *rows,
                const float *sign, const float *theta, int64_t theta_stride, const float *b,
                int64_t b_stride, const float *a, int64_t a_stride, double *value, float *g_theta,
                float *g_b, float *g_a, float *work) {
    float *pa = work, *pab = work + mw, *m1 = work + 2 * mw, *m0 = work + 3 * mw;
    for (int64_t s = 0; s < n_splits; s++) {
        const float *as = a + s * a_stride, *bs = b + s * b_stride, *ts = theta + s * theta_stride;
        for (int64_t j = 0; j < mw; j++) {
            pa[j] = j < m ? as[j] : 0.0f;
            pab[j] = j < m ? as[j] * bs[j] : 0.0f;
            m1[j] = 0.0f;                                    /* sum_i r_ij theta_i */
            m0[j] = 0.0f;                                    /* sum_i r_ij */
        }
        vf prod = splat(1.0f);
        int64_t count = 0;
        double relu_sum = 0.0, log_sum = 0.0;
        for (int64_t i = 0; i < rows[s]; i++) {
            const float *sg = sign + (s * n_max + i) * mw;
            const vf th = splat(ts[i]);
            vf g_row = splat(0.0f), relu = splat(0.0f);
            for (int64_t lo = 0; lo < mw; lo += FLUSH * W) {
                int64_t hi = lo + FLUSH * W < mw ? lo + FLUSH * W : mw;
                if (count + (hi - lo) / W > FLUSH) {
                    for (int k = 0; k < W; k++) log_sum += log((double)prod[k]);
                    prod = splat(1.0f);
                    count = 0;
                }
                count += (hi - lo) / W;
                int64_t j = lo;
                for (; j + 2 * W <= hi; j += 2 * W) {     /* two vectors at a time, added in column order */
                    cell_t c0 = cell(load(sg + j), load(pa + j), load(pab + j), th);
                    cell_t c1 = cell(load(sg + j + W), load(pa + j + W), load(pab + j + W), th);
                    store(m1 + j, load(m1 + j) + c0.r * th);
                    store(m1 + j + W, load(m1 + j + W) + c1.r * th);
                    store(m0 + j, load(m0 + j) + c0.r);
                    store(m0 + j + W, load(m0 + j + W) + c1.r);
                    g_row += c0.r * load(pa + j);
                    g_row += c1.r * load(pa + j + W);
                    relu += c0.relu;
                    relu += c1.relu;
                    prod *= c0.f;
                    prod *= c1.f;
                }
                if (j < hi) {
                    cell_t c0 = cell(load(sg + j), load(pa + j), load(pab + j), th);
                    store(m1 + j, load(m1 + j) + c0.r * th);
                    store(m0 + j, load(m0 + j) + c0.r);
                    g_row += c0.r * load(pa + j);
                    relu += c0.relu;
                    prod *= c0.f;
                }
            }
            float g = 0.0f;
            double row_relu = 0.0;
            for (int k = 0; k < W; k++) {
                g += g_row[k];
                row_relu += relu[k];
            }
            g_theta[s * n_max + i] = g;
            relu_sum += row_relu;
        }
        for (int64_t i = rows[s]; i < n_max; i++) g_theta[s * n_max + i] = 0.0f;
        for (int k = 0; k < W; k++) log_sum += log((double)prod[k]);
        value[s] = log_sum - relu_sum;
        for (int64_t j = 0; j < m; j++) {                   /* sum_i r_ij (theta_i - b_j), -sum_i r_ij a_j */
            g_a[s * m + j] = m1[j] - bs[j] * m0[j];
            g_b[s * m + j] = -(m0[j] * as[j]);
        }
    }
}

/* exp of len floats, W at a time (the last W through a padded copy: every element by the same code). */
static void exp_row(const float *x, float *out, int64_t len) {
    int64_t j = 0;
    for (; j + W <= len; j += W) store(out + j, exp_clamped(load(x + j)));
    if (j < len) {
        float in[W] = {0}, res[W];
        memcpy(in, x + j, (size_t)(len - j) * sizeof(float));
        store(res, exp_clamped(load(in)));
        memcpy(out + j, res, (size_t)(len - j) * sizeof(float));
    }
}

/* The guide's sample of every split's columns theta | b | log a (width = n_max + 2 m, rows of
   loc and log_scale stride apart, of eps, step and value width apart):
   step = eps exp(log_scale), value = loc + step, a = exp(log a) (S, m). */
void guide_sample(int64_t n_splits, int64_t n_max, int64_t m, const float *loc, const float *log_scale,
                  int64_t stride, const float *eps, float *step, float *value, float *a) {
    int64_t width = n_max + 2 * m;
    for (int64_t s = 0; s < n_splits; s++) {
        const float *ls = log_scale + s * stride, *lc = loc + s * stride, *ep = eps + s * width;
        float *st = step + s * width, *v = value + s * width;
        exp_row(ls, st, width);
        for (int64_t c = 0; c < width; c++) {
            st[c] = ep[c] * st[c];
            v[c] = lc[c] + st[c];
        }
        exp_row(v + n_max + m, a + s * m, m);
    }
}

/* Per split and site (theta: the split's own rows; b; log a), with dev = value - mu and the site's
   mu and u (S, 3, in the order b, theta, a):
   sums (S, 4, 3): sum dev u^2, sum (dev u)^2, sum eps^2, sum log_scale (sites theta, b, log a; in
   double, rounded to float); the gradient of the negative ELBO in the columns (rows stride apart):
   g_loc = dev u^2 - d lik / d value (d lik / d log a = g_a a) and g_log_scale = g_loc step - 1
   (both 0 in rows beyond the split's own). */
void prior_terms(int64_t n_splits, int64_t n_max, int64_t m, const int64_t *rows, const float *value,
                 const float *step, const float *eps, const float *log_scale, int64_t stride, const float *mu,
                 const float *u, const float *g_theta, const float *g_b, const float *g_a, const float *a,
                 float *g_loc, float *g_log_scale, float *sums) {
    int64_t width = n_max + 2 * m;
    for (int64_t s = 0; s < n_splits; s++) {
        const int64_t start[3] = {0, n_max, n_max + m}, stop[3] = {rows[s], n_max + m, width};
        const int site_of[3] = {1, 0, 2};                      /* theta, b, log a -> hyper order b, theta, a */
        const float *v = value + s * width, *st = step + s * width, *ep = eps + s * width;
        const float *ls = log_scale + s * stride;
        float *gl = g_loc + s * stride, *gs = g_log_scale + s * stride;
        for (int site = 0; site < 3; site++) {
            const float mu_s = mu[3 * s + site_of[site]], u_s = u[3 * s + site_of[site]];
            double dev_sum = 0.0, sq_sum = 0.0, eps_sum = 0.0, ls_sum = 0.0;
            for (int64_t c = start[site]; c < stop[site]; c++) {
                float du = (v[c] - mu_s) * u_s, du2 = du * u_s, g_lik;
                if (site == 0) g_lik = g_theta[s * n_max + c];
                else if (site == 1) g_lik = g_b[s * m + c - n_max];
                else g_lik = g_a[s * m + c - n_max - m] * a[s * m + c - n_max - m];
                dev_sum += du2;
                sq_sum += du * du;
                eps_sum += ep[c] * ep[c];
                ls_sum += ls[c];
                gl[c] = du2 - g_lik;
                gs[c] = gl[c] * st[c] - 1.0f;
            }
            float *out = sums + 12 * s + site;
            out[0] = (float)dev_sum;
            out[3] = (float)sq_sum;
            out[6] = (float)eps_sum;
            out[9] = (float)ls_sum;
        }
        for (int64_t c = rows[s]; c < n_max; c++) {
            gl[c] = 0.0f;
            gs[c] = 0.0f;
        }
    }
}
