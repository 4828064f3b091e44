/* Fluid's MLE score terms in one pass: irtlib.selection.estimators._MleRun._score, cell by cell;
 * below, the whole estimate (mle_estimate) and maximum information's candidates (best_candidates).
 *
 * For every asked row r (rows[i]) and administered step j < t, with a = A[r, j], b = B[r, j],
 * x = X[r, j] and theta = theta[i]:
 *
 *     z = a * (theta - b);  s = 1 / (1 + exp(-z));  q = 1 / (1 + exp(z))      (the expit of z and -z)
 *     g[i, j] = a * (x * q - (1 - x) * s)                                       (score term)
 *     h[i, j] = ((a * a) * s) * q                                               (information term)
 *
 * the numpy path's operations in its order, rounded alike (compiled without contraction into
 * fused multiply-adds), with exp portable_exp (_portable_exp.h; exp(z) and exp(-z) from one
 * reduction), which numpy's path computes too (irtlib.selection.portable_exp): the same bits on
 * every machine, and several cells at a time (four with AVX2). Before it, exp was the C library's,
 * as scipy's expit calls it (MLE_LIBM_EXP builds that, for benchmarks; the terms within 2e-15).
 * Summed in numpy's pairwise order (pairwise_sum, _pairwise_sum.h), the score and slope are those
 * of the numpy path bit for bit.
 * g and h have X's layout (row r's terms in row r, ld columns); only the columns from[i] <= j < t
 * of row rows[i] are written: the caller keeps the earlier ones, computed at the same theta.
 */
#include <math.h>
#include <stdint.h>

#include "_portable_exp.h"

#define MLE_LANES 8

/* One cell's terms from exp(z) and exp(-z) (the operations of the header, in its order). */
#define MLE_CELL_TERMS(ep_, en_, aj, xj, g_out, h_out)                                                \
    do {                                                                                              \
        const double s_ = 1.0 / (1.0 + (en_));                                                        \
        const double q_ = 1.0 / (1.0 + (ep_));                                                        \
        double w_ = (aj) * (aj);                                                                      \
        w_ = w_ * s_;                                                                                 \
        (h_out) = w_ * q_;                                                                            \
        const double xq_ = (xj) * q_;                                                                 \
        const double xs_ = (1.0 - (xj)) * s_;                                                         \
        (g_out) = (aj) * (xq_ - xs_);                                                                 \
    } while (0)

/* One cell's terms. */
#define MLE_CELL(aj, bj, xj, g_out, h_out)                                                            \
    do {                                                                                              \
        double z_ = th - (bj);                                                                        \
        z_ = (aj) * z_;                                                                               \
        double en_, ep_;                                                                              \
        MLE_EXP_PAIR(z_, ep_, en_);                                                                   \
        MLE_CELL_TERMS(ep_, en_, aj, xj, g_out, h_out);                                               \
    } while (0)

/* MLE_CELL from its z, with exp's pair by portable_exp_pair_normal (|z| <= PEXP_NORMAL_RANGE: the same bits). */
#define MLE_CELL_NORMAL(zj, aj, xj, g_out, h_out)                                                     \
    do {                                                                                              \
        double en_, ep_;                                                                              \
        MLE_EXP_PAIR_NORMAL((zj), ep_, en_);                                                          \
        MLE_CELL_TERMS(ep_, en_, aj, xj, g_out, h_out);                                               \
    } while (0)

#ifdef MLE_LIBM_EXP
/* The C library's exp, as scipy's expit calls it: the kernel before portable_exp, for the benchmarks only. */
#define MLE_EXP_PAIR(z, ep, en) ((ep) = exp(z), (en) = exp(-(z)))
#else
#define MLE_EXP_PAIR(z, ep, en) portable_exp_pair((z), &(ep), &(en))
#endif
#ifdef MLE_LIBM_EXP
#define MLE_EXP_PAIR_NORMAL(z, ep, en) MLE_EXP_PAIR(z, ep, en)
#else
#define MLE_EXP_PAIR_NORMAL(z, ep, en) portable_exp_pair_normal((z), &(ep), &(en))
#endif

void mle_terms(int64_t n, int64_t t, int64_t ld, const int64_t *rows, const double *theta, const int64_t *from,
               const double *X, const double *A, const double *B, double *g, double *h)
{
    for (int64_t i = 0; i < n; i++) {
        const int64_t r = rows[i], off = r * ld;
        const double *x = X + off, *a = A + off, *b = B + off;
        const double th = theta[i];
        double *gi = g + off;
        double *hi = h + off;
        int64_t j = from[i];
        /* blocks of MLE_LANES cells through local arrays: a loop of fixed length, which GCC
         * vectorises at -O2 (every lane the scalar operations, so the same bits); a block whose every
         * |z| is within PEXP_NORMAL_RANGE (in practice all) takes portable_exp_pair_normal, the same
         * bits with fewer operations */
        for (; j + MLE_LANES <= t; j += MLE_LANES) {
            double gv[MLE_LANES], hv[MLE_LANES], zv[MLE_LANES];
            int64_t inside = 0;
            for (int l = 0; l < MLE_LANES; l++) {
                double z_ = th - b[j + l];
                zv[l] = a[j + l] * z_;
                inside += fabs(zv[l]) <= PEXP_NORMAL_RANGE;
            }
            if (inside == MLE_LANES) {
                for (int l = 0; l < MLE_LANES; l++)
                    MLE_CELL_NORMAL(zv[l], a[j + l], x[j + l], gv[l], hv[l]);
            }
            else {
                for (int l = 0; l < MLE_LANES; l++)
                    MLE_CELL(a[j + l], b[j + l], x[j + l], gv[l], hv[l]);
            }
            for (int l = 0; l < MLE_LANES; l++) {
                gi[j + l] = gv[l];
                hi[j + l] = hv[l];
            }
        }
        for (; j < t; j++)
            MLE_CELL(a[j], b[j], x[j], gi[j], hi[j]);
    }
}

/* ---------------------------------------------------------------------------------------------
 * The whole estimate: irtlib.selection.estimators._MleRun.estimate, one model at a time.
 *
 * numpy sums a row of float64 (add.reduce along a contiguous last axis, no initial value given)
 * as 0 + pairwise(row) (_pairwise_sum.h): the score and information terms are summed so, and the
 * sums are numpy's bit for bit (the loader checks it on many lengths).
 */
#include "_pairwise_sum.h"

/* numpy's row sums of g[:n] and h[:n] (its add.reduce starts from 0). */
void row_sums(int64_t n_rows, int64_t n, int64_t ld, const double *g, const double *h, double *sg, double *sh)
{
    for (int64_t i = 0; i < n_rows; i++) {
        double a, b;
        pairwise_sum2(g + i * ld, h + i * ld, n, &a, &b);
        sg[i] = 0.0 + a;
        sh[i] = 0.0 + b;
    }
}

typedef struct {
    int64_t t, ld;
    const double *X, *A, *B;
    double *g, *h, *at;
    int64_t *upto;
    int64_t evaluated;      /* cells whose terms were computed (diagnostics) */
} Rows;

/* The score T and its slope dT = -information of row r at theta: the terms of RowTerms.sums (the
 * row's terms at at[r] kept, only the columns from upto[r] computed when theta equals it). */
static void score_at(Rows *R, int64_t r, double th, double *T, double *dT)
{
    const int64_t off = r * R->ld, t = R->t;
    const int64_t from = (R->at[r] == th) ? (R->upto[r] < t ? R->upto[r] : t) : 0;
    mle_terms(1, t, R->ld, &r, &th, &from, R->X, R->A, R->B, R->g, R->h);
    R->evaluated += t - from;
    R->at[r] = th;
    R->upto[r] = t;
    double sg, sh;
    pairwise_sum2(R->g + off, R->h + off, t, &sg, &sh);
    *T = 0.0 + sg;
    *dT = -(0.0 + sh);
}

/* numpy's clip: NaN stays NaN, then max with lo, then min with hi. */
static inline double clip(double x, double lo, double hi)
{
    if (isnan(x))
        return x;
    const double m = x > lo ? x : lo;
    return m < hi ? m : hi;
}

/* _MleRun._fallback for one row: bisection over [lo, hi] where the score changes sign, else the bound. */
static double fallback(Rows *R, int64_t r, double tol, double lo, double hi, int64_t max_bisection)
{
    double s_lo, s_hi, unused;
    score_at(R, r, lo, &s_lo, &unused);
    score_at(R, r, hi, &s_hi, &unused);
    double out = (s_lo > 0 && s_hi > 0) ? hi : lo;
    if (s_lo * s_hi <= 0) {
        double left = lo, right = hi, sl = s_lo;
        for (int64_t k = 0; k < max_bisection; k++) {
            const double mid = 0.5 * (left + right);
            double sm;
            score_at(R, r, mid, &sm, &unused);
            if (fabs(sm) < tol)
                return mid;
            if (sl * sm > 0) {
                left = mid;
                sl = sm;
            }
            else
                right = mid;
        }
        out = 0.5 * (left + right);
    }
    return out;
}

/* _MleRun.estimate for every row: the Newton iteration with halvings, then the fallback, from
 * theta[r] (overwritten with the estimate). g, h (n x ld), at and upto are RowTerms' arrays.
 * Returns the number of cells whose terms were computed. */
int64_t mle_estimate(int64_t n, int64_t t, int64_t ld, const double *X, const double *A, const double *B,
                     double *theta, double *g, double *h, double *at, int64_t *upto, double tol, double lo,
                     double hi, int64_t max_newton, int64_t max_halvings, int64_t max_bisection)
{
    Rows R = {t, ld, X, A, B, g, h, at, upto, 0};
    for (int64_t r = 0; r < n; r++) {
        double th = theta[r], kT = 0.0, kdT = 0.0;
        int known = 0, fall = 1;
        for (int64_t it = 0; it < max_newton; it++) {
            double T, dT;
            if (known) {
                T = kT;
                dT = kdT;
            }
            else
                score_at(&R, r, th, &T, &dT);
            if (fabs(T) < tol) {
                fall = 0;
                break;
            }
            if (!isfinite(dT) || dT == 0.0)
                break;
            double nw = clip(th - T / dT, lo, hi);
            const double absT = fabs(T);
            known = 0;
            if (nw != th) {
                for (int64_t k = 0; k < max_halvings; k++) {
                    double Tn, dTn;
                    score_at(&R, r, nw, &Tn, &dTn);
                    if (fabs(Tn) < absT || !isfinite(Tn)) {
                        known = 1;
                        kT = Tn;
                        kdT = dTn;
                        break;
                    }
                    nw = 0.5 * (nw + th);
                }
            }
            const int stuck = nw == th;
            th = nw;
            if (stuck)
                break;
        }
        if (fall)
            th = fallback(&R, r, tol, lo, hi, max_bisection);
        theta[r] = th;
    }
    return R.evaluated;
}

/* ---------------------------------------------------------------------------------------------
 * Maximum information's candidates (irtlib.selection.selectors.MaxInformation): for every row i,
 * the information ((a * a) * s) * q of its c candidates (ca, cb: row i's c columns) at theta[i],
 * as irtlib.core.kernels.fisher_information computes it (the h term above), used candidates
 * excluded; the first largest (numpy's argmax) in k[i] and its value in best[i] (-inf, k 0, when
 * every candidate is used).
 *
 * A first pass ranks the candidates with one exponential each, a^2 e / (1 + e)^2 with
 * e = exp(-|z|): that and the exact value are each within 16 units in the last place (2^-48
 * relative) of a^2 P (1 - P) while it is a normal number, so the exact argmax is among the
 * candidates within a relative 1e-12 of the first pass's largest, and only those are evaluated
 * exactly (twins with equal a and b: all of them, so the first wins as in numpy). A row whose
 * largest first-pass value is below 1e-280 or not a number is evaluated exactly whole.
 */
#include "_exact_information.h"

void best_candidates(int64_t n, int64_t c, const double *theta, const double *ca, const double *cb,
                     const uint8_t *used, int64_t *k, double *best, double *work)
{
    for (int64_t i = 0; i < n; i++) {
        const double th = theta[i];
        const double *a = ca + i * c, *b = cb + i * c;
        const uint8_t *u = used + i * c;
        double top = -INFINITY, rough = -INFINITY;
        int64_t at = 0, any = 0;
        for (int64_t j = 0; j < c; j++) {
            if (u[j]) {
                work[j] = -INFINITY;
                continue;
            }
            any = 1;
            const double aj = a[j];
            const double z = aj * (th - b[j]);
            const double e = exp(-fabs(z));
            const double d = 1.0 + e;
            const double w = (aj * aj) * e / (d * d);
            work[j] = w;
            if (w > rough || isnan(w))
                rough = w;
        }
        if (any && rough > 1e-280 && rough < INFINITY) {
            const double cut = rough * (1.0 - 1e-12);
            for (int64_t j = 0; j < c; j++) {
                if (work[j] >= cut) {
                    const double w = exact_information(a[j], b[j], th);
                    if (better(w, top)) {
                        top = w;
                        at = j;
                    }
                }
            }
        }
        else if (any) {
            for (int64_t j = 0; j < c; j++) {
                if (u[j])
                    continue;
                const double w = exact_information(a[j], b[j], th);
                if (better(w, top)) {
                    top = w;
                    at = j;
                }
            }
        }
        k[i] = at;
        best[i] = top;
    }
}

/* numpy's minimum of two floats: the smaller, NaN if either is NaN. */
static inline float min_nan(float x, float y)
{
    if (isnan(x) || isnan(y))
        return NAN;
    return y < x ? y : x;
}

#define BOUND_LANES 8

/* The largest min(base + a * r, peak) over a row whose base is below +inf and a, peak are finite,
 * r finite: every value is then finite or -inf, never NaN, so the order of the comparisons does
 * not matter; eight lanes, which the compiler keeps in vector registers. */
static float row_bound(int64_t m, const float *b, const float *a, const float *p, float r)
{
    float acc[BOUND_LANES];
    for (int q = 0; q < BOUND_LANES; q++)
        acc[q] = -INFINITY;
    int64_t j = 0;
    for (; j + BOUND_LANES <= m; j += BOUND_LANES) {
        for (int q = 0; q < BOUND_LANES; q++) {
            float v = a[j + q] * r;
            v = b[j + q] + v;
            v = p[j + q] < v ? p[j + q] : v;
            acc[q] = v > acc[q] ? v : acc[q];
        }
    }
    float top = -INFINITY;
    for (int q = 0; q < BOUND_LANES; q++)
        top = acc[q] > top ? acc[q] : top;
    for (; j < m; j++) {
        float v = a[j] * r;
        v = b[j] + v;
        v = p[j] < v ? p[j] : v;
        top = v > top ? v : top;
    }
    return top;
}

/* Maximum information's candidate bounds (irtlib.selection.selectors._MaxInfoRun._build): for
 * every row i and radius r[l], the largest over the row's m items of min(base + a * r[l], peak),
 * in single precision, operation by operation as numpy's
 * np.minimum(base + a32 * np.float32(r), peak).max(axis=1) computes it (a NaN anywhere makes the
 * maximum NaN, as numpy's). base is (n, m); a32 and peak are (n, m) with row stride ld = m, or
 * one shared row (ld = 0). out is (n, n_radii), n_radii at most 64. A row with no NaN, no +inf
 * base and finite a, peak and radii (every row in practice) runs row_bound, one vectorised pass
 * per radius; any other row the literal element-by-element rule. */
void radius_bounds(int64_t n, int64_t m, int64_t ld, const float *base, const float *a32, const float *peak,
                   int64_t n_radii, const float *radii, float *out)
{
    int finite_radii = 1;
    for (int64_t l = 0; l < n_radii; l++)
        finite_radii &= isfinite(radii[l]) != 0;
    for (int64_t i = 0; i < n; i++) {
        const float *bi = base + i * m, *ai = a32 + i * ld, *pi = peak + i * ld;
        float *oi = out + i * n_radii;
        int clean = finite_radii;
        for (int64_t j = 0; j < m && clean; j++)
            clean = !isnan(bi[j]) && bi[j] < INFINITY && isfinite(ai[j]) && isfinite(pi[j]);
        if (clean) {
            for (int64_t l = 0; l < n_radii; l++)
                oi[l] = row_bound(m, bi, ai, pi, radii[l]);
            continue;
        }
        for (int64_t l = 0; l < n_radii; l++) {
            float top = -INFINITY;
            int nan_seen = 0;
            for (int64_t j = 0; j < m; j++) {
                float v = ai[j] * radii[l];
                v = bi[j] + v;
                v = min_nan(v, pi[j]);
                if (v > top)
                    top = v;
                else if (isnan(v))
                    nan_seen = 1;
            }
            oi[l] = nan_seen ? NAN : top;
        }
    }
}
