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

#pragma GCC diagnostic ignored "-Wpsabi"   /* the pair type lives in always-inline functions only */

#define W 8          /* lanes */
#define TERMS_BLOCK 256  /* prior_terms' columns per block */
#define FLUSH 120    /* factors per lane before a log: 2^-120 is a normal float */

typedef float vf __attribute__((vector_size(4 * W)));
typedef int32_t vi __attribute__((vector_size(4 * W)));
/* Two vectors of cells side by side (lanes 0..W-1 the first, W..2W-1 the second): each lane's
   operations are those of vf's lanes, so a pair gives the bits of its two halves computed apart.
   One AVX-512 register where the processor has it (loglik_2pl's clone for it), else two. */
typedef float vf2 __attribute__((vector_size(8 * W)));
typedef int32_t vi2 __attribute__((vector_size(8 * W)));

#define ALWAYS static inline __attribute__((always_inline))

/* The lane-wise helpers for one vector type VF (integer type VI, N lanes), as NAME_SUFFIX. */
#define LANE_HELPERS(SUF, VF, VI, N)                                                                    \
ALWAYS VF splat##SUF(float x) { VF v; for (int k = 0; k < N; k++) v[k] = x; return v; }                 \
ALWAYS VI splat_i##SUF(int32_t x) { VI v; for (int k = 0; k < N; k++) v[k] = x; return v; }             \
ALWAYS VF load##SUF(const float *p) { VF v; memcpy(&v, p, sizeof v); return v; }                         \
ALWAYS void store##SUF(float *p, VF v) { memcpy(p, &v, sizeof v); }                                      \
ALWAYS VF select##SUF(VI mask, VF yes, VF no) { return (VF)((mask & (VI)yes) | (~mask & (VI)no)); }      \
/* exp(x) for x <= 0 (x clamped below at -87, about 1.6e-38): x = k ln 2 + r with |r| <= ln 2 / 2       \
   (ln 2 in two parts), e^r = 1 + r + r^2 P(r) with P of degree 5 fitted by weighted least squares on   \
   Chebyshev nodes (relative error of e^r at most 6.6e-8 in float32), times 2^k built in the exponent.  \
   Inlined (a call would pass the vectors through memory and spill the callers' accumulators). */       \
ALWAYS VF exp_nonpositive##SUF(VF x) {                                                                   \
    x = select##SUF(x < splat##SUF(-87.0f), splat##SUF(-87.0f), x);                                      \
    const VF shift = splat##SUF(12582912.0f);                     /* 1.5 * 2^23: rounds to an integer */ \
    VF k = (x * splat##SUF(1.44269504088896341f) + shift) - shift;                                       \
    VF r = x - k * splat##SUF(0.693145751953125f);                                                       \
    r = r - k * splat##SUF(1.4286068203094172e-6f);                                                      \
    VF p = splat##SUF(1.9826495554e-4f);                                                                 \
    p = p * r + splat##SUF(1.3946021209e-3f);                                                            \
    p = p * r + splat##SUF(8.3334296942e-3f);                                                            \
    p = p * r + splat##SUF(4.1666269302e-2f);                                                            \
    p = p * r + splat##SUF(1.6666665673e-1f);                                                            \
    p = p * r + splat##SUF(0.5f);                                                                        \
    p = p * r * r + r + splat##SUF(1.0f);                                                                \
    VI bits = (__builtin_convertvector(k, VI) + 127) << 23;                                              \
    return p * (VF)bits;                                                                                 \
}

LANE_HELPERS(, vf, vi, W)
LANE_HELPERS(2, vf2, vi2, 2 * W)

/* exp(x), x clamped to [-87, 88] (about 1.6e-38 to 1.7e38): exp_nonpositive's formula, with x
   above 0 clamped at 88 first (the same arithmetic, so the same bits where both apply). */
ALWAYS vf exp_clamped(vf x) {
    return exp_nonpositive(select(x > splat(88.0f), splat(88.0f), x));
}

/* One vector of cells of a row (sign, a, a b and the row's theta): t = -sign z with z = a theta - a b,
   r = d log p / d z, the factor f of the loss (1 where the cell is not an observation) and max(t, 0). */
#define CELL(SUF, VF, VI)                                                                               \
typedef struct { VF r, f, relu; } cell##SUF##_t;                                                         \
ALWAYS cell##SUF##_t cell##SUF(VF sgn, VF av, VF pab, VF th) {                                           \
    VF t = -sgn * (av * th - pab);                                                                       \
    VI neg = t < splat##SUF(0.0f);                                                                       \
    VF e = exp_nonpositive##SUF((VF)((VI)t | splat_i##SUF(INT32_MIN)));   /* exp(-|t|): t, sign bit set */ \
    VF f = splat##SUF(1.0f) / (splat##SUF(1.0f) + e);                                                    \
    cell##SUF##_t c;                                                                                     \
    c.r = sgn * select##SUF(neg, e * f, f);                                                              \
    c.relu = select##SUF(neg, splat##SUF(0.0f), t);                                                      \
    c.f = select##SUF(sgn == splat##SUF(0.0f), splat##SUF(1.0f), f);                                     \
    return c;                                                                                            \
}

CELL(, vf, vi)
CELL(2, vf2, vi2)

/* The first and the second half of a pair. */
ALWAYS vf low(vf2 v) { vf h; memcpy(&h, &v, sizeof h); return h; }
ALWAYS vf high(vf2 v) { vf h; memcpy(&h, (const char *)&v + sizeof h, sizeof h); return h; }

/* n_splits splits of at most n_max training rows and m items, rows stored mw >= m apart (mw a
   multiple of W, sign 0 in the padding).
   rows     (S,)             int64: the split's number of training rows (its first rows)
   sign     (S, n_max, mw)   float32: +1 safe, -1 unsafe, 0 no observation
   theta    (S, .) float32, row s at theta + s * theta_stride; b, a likewise (n_max and m values)
   value    (S,)             float64: the log-likelihood of each split
   g_theta  (S, n_max)       float32: its gradient in theta (0 in rows beyond the split's own)
   g_b, g_a (S, m)           float32: its gradient in b and in a
   work     4 * mw floats */
#define LOGLIK_ARGS int64_t n_splits, int64_t n_max, int64_t m, int64_t mw, const int64_t *rows,        \
                const float *sign, const float *theta, int64_t theta_stride, const float *b,              \
                int64_t b_stride, const float *a, int64_t a_stride, double *value, float *g_theta,          \
                float *g_b, float *g_a, float *work
#define LOGLIK_PASS n_splits, n_max, m, mw, rows, sign, theta, theta_stride, b, b_stride, a, a_stride, value, \
                g_theta, g_b, g_a, work

/* loglik_2pl's pass; wide: two vectors of cells as one pair (vf2), else one after the other (the same
   operations on each lane, the same order of every sum and product: the same bits). */
ALWAYS void loglik_pass(LOGLIK_ARGS, const int wide) {
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
            const vf2 th2 = splat2(ts[i]);
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
                if (wide) {
                    for (; j + 2 * W <= hi; j += 2 * W) {     /* a pair of vectors, added in column order */
                        const vf2 a2 = load2(pa + j);
                        cell2_t c = cell2(load2(sg + j), a2, load2(pab + j), th2);
                        store2(m1 + j, load2(m1 + j) + c.r * th2);
                        store2(m0 + j, load2(m0 + j) + c.r);
                        const vf2 ga = c.r * a2;
                        g_row += low(ga);
                        g_row += high(ga);
                        relu += low(c.relu);
                        relu += high(c.relu);
                        prod *= low(c.f);
                        prod *= high(c.f);
                    }
                }
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

/* The pass for processors with AVX-512 (a pair in one register; x86 only) and for the others. */
#if defined(__x86_64__) || defined(__i386__)
#define WIDE_FEATURES "avx512f,avx512dq,avx512vl,avx512bw"
__attribute__((target(WIDE_FEATURES))) static void loglik_wide(LOGLIK_ARGS) {
    loglik_pass(LOGLIK_PASS, 1);
}

/* Whether this processor has every feature loglik_wide is compiled for. */
static int wide_supported(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
}
#else
static void loglik_wide(LOGLIK_ARGS) { loglik_pass(LOGLIK_PASS, 1); }
static int wide_supported(void) { return 0; }
#endif

static void loglik_narrow(LOGLIK_ARGS) { loglik_pass(LOGLIK_PASS, 0); }

static int wide_mode = -1;     /* -1: not decided yet; 0: narrow; 1: wide */

/* The pass loglik_2pl runs: request 1 (wide where the processor has AVX-512 F, DQ, VL and BW, else narrow), 0
   (narrow) or -1 (as decided before, or as 1 the first time); returns the mode in force (0 or 1). */
int loglik_2pl_mode(int request) {
    if (request >= 0 || wide_mode < 0) wide_mode = request != 0 && wide_supported() ? 1 : 0;
    return wide_mode;
}

void loglik_2pl(LOGLIK_ARGS) {
    if (loglik_2pl_mode(-1)) loglik_wide(LOGLIK_PASS);
    else loglik_narrow(LOGLIK_PASS);
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
        int64_t c = 0;
        for (; c + W <= width; c += W) {                     /* the same IEEE operations on each lane */
            const vf stc = load(ep + c) * load(st + c);
            store(st + c, stc);
            store(v + c, load(lc + c) + stc);
        }
        for (; c < width; c++) {
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
            /* the likelihood's gradient of column c: glik[c - off] (times ascale[c - off] for log a) */
            const float *glik = site == 0 ? g_theta + s * n_max : site == 1 ? g_b + s * m : g_a + s * m;
            const float *ascale = a + s * m;
            const int64_t off = start[site];
            double dev_sum = 0.0, sq_sum = 0.0, eps_sum = 0.0, ls_sum = 0.0;
            /* a block of columns: the float terms W at a time (each lane's IEEE operations as in the
               scalar loop), then the double sums one column after the other, in column order */
            float t_dev[TERMS_BLOCK], t_sq[TERMS_BLOCK], t_eps[TERMS_BLOCK];
            for (int64_t lo = start[site]; lo < stop[site]; lo += TERMS_BLOCK) {
                const int64_t hi = lo + TERMS_BLOCK < stop[site] ? lo + TERMS_BLOCK : stop[site];
                int64_t c = lo;
                for (; c + W <= hi; c += W) {
                    const vf du = (load(v + c) - splat(mu_s)) * splat(u_s), du2 = du * splat(u_s);
                    vf g_lik = load(glik + c - off);
                    if (site == 2) g_lik = g_lik * load(ascale + c - off);
                    const vf g = du2 - g_lik;
                    store(gl + c, g);
                    store(gs + c, g * load(st + c) - splat(1.0f));
                    store(t_dev + c - lo, du2);
                    store(t_sq + c - lo, du * du);
                    store(t_eps + c - lo, load(ep + c) * load(ep + c));
                }
                for (; c < hi; c++) {
                    float du = (v[c] - mu_s) * u_s, du2 = du * u_s, g_lik = glik[c - off];
                    if (site == 2) g_lik = g_lik * ascale[c - off];
                    gl[c] = du2 - g_lik;
                    gs[c] = gl[c] * st[c] - 1.0f;
                    t_dev[c - lo] = du2;
                    t_sq[c - lo] = du * du;
                    t_eps[c - lo] = ep[c] * ep[c];
                }
                for (int64_t k = 0; k < hi - lo; k++) {
                    dev_sum += t_dev[k];
                    sq_sum += t_sq[k];
                    eps_sum += t_eps[k];
                    ls_sum += ls[lo + k];
                }
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
