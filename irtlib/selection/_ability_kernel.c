/* The MAP ability's per-model sums in one pass: irtlib.core.ability._score_and_information for the 2PL.
 *
 * For every asked row r (rows[i], or i without rows) and item j, with a = A[r, j], b = B[r, j],
 * x = X[r, j] and theta = theta[i], the numpy path (irtlib.core.kernels.score_and_information) computes
 *
 *     z = a * (theta - b);  s = 1 / (1 + exp(-z));  q = 1 / (1 + exp(z))     (scipy's expit of z and -z)
 *     score = a * (x * q - (1 - x) * s);  info = ((a * a) * s) * q
 *
 * then zeroes the cells not observed (np.where(observed, ., 0.0)) and sums each row (ndarray.sum(axis=1):
 * 0.0 + numpy's pairwise sum of the row, _pairwise_sum.h). This kernel does the same operations in the same
 * order, IEEE double without contraction into fused multiply-adds (-ffp-contract=off), with the C library's
 * exp, which scipy's expit calls: the same bits. A, B have row strides lda, ldb (0: one row for every model).
 * g and h are work rows of n_items doubles.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_pairwise_sum.h"

/* One row's sums (the loop body of ability_row_sums): score and information summed as numpy sums them. */
static void row_sum(int64_t n_items, double th, const double *x, const uint8_t *o, const double *a,
                    const double *b, double *g, double *h, double *score_sum, double *info_sum)
{
    for (int64_t j = 0; j < n_items; j++) {
        double z = th - b[j];
        z = a[j] * z;
        const double s = 1.0 / (1.0 + exp(-z));
        const double q = 1.0 / (1.0 + exp(z));
        double w = a[j] * a[j];
        w = w * s;
        const double info = w * q;
        const double xq = x[j] * q;
        const double ys = (1.0 - x[j]) * s;
        const double score = a[j] * (xq - ys);
        g[j] = o[j] ? score : 0.0;
        h[j] = o[j] ? info : 0.0;
    }
    *score_sum = 0.0 + pairwise_sum(g, n_items);
    *info_sum = 0.0 + pairwise_sum(h, n_items);
}

void ability_row_sums(int64_t n_rows, const int64_t *rows, int64_t n_items, const double *theta,
                      const double *X, const uint8_t *observed, const double *A, int64_t lda,
                      const double *B, int64_t ldb, double *g, double *h, double *score_sum, double *info_sum)
{
    for (int64_t i = 0; i < n_rows; i++) {
        const int64_t r = rows ? rows[i] : i;
        row_sum(n_items, theta[i], X + r * n_items, observed + r * n_items, A + r * lda, B + r * ldb, g, h,
                score_sum + i, info_sum + i);
    }
}

/* numpy's clip of a double (numpy/_core/src/umath/clip.cpp: _NPY_MIN(_NPY_MAX(x, lo), hi), NaN kept) */
static inline double clip(double x, double lo, double hi)
{
    double v = isnan(x) ? x : (x > lo ? x : lo);
    return isnan(v) ? v : (v < hi ? v : hi);
}

/* the gradient of the log posterior as irtlib.core.ability's posterior forms it: score - (theta - mean) / var */
static inline double gradient(int64_t n_items, double th, const double *x, const uint8_t *o, const double *a,
                              const double *b, double *g, double *h, double mean, double var, double *info)
{
    double score;
    row_sum(n_items, th, x, o, a, b, g, h, &score, info);
    return score - (th - mean) / var;
}

/* map_ability's damped Newton and bisection fallback (irtlib.core.ability.map_ability), row by row.
 *
 * The numpy loop moves every active row one step at a time; a row's steps read only its own row and
 * its own theta, so running each row's steps to the end gives the same values: Newton steps
 * clip(grad / (info + 1 / var), -max_step, max_step), theta clipped to [lo, hi], converged once a
 * step moved it by less than tol (at most max_newton steps); a row that did not converge bisects the
 * score's sign on [lo, hi] for at most max_bisection steps, stopping at the first step that left its
 * bracket as it was (every later step would too, as the joint loop's stop does), then takes the bound
 * whose gradient points out of the bracket, else the bracket's midpoint. theta (in: the clipped
 * starts, out: the estimates) and converged (out, 0 or 1) have n_rows entries. */
/* One row's estimate from its clipped start th (ability_map_rows' loop body); *converged: 0 or 1. */
static double map_row(int64_t n_items, double th, const double *x, const uint8_t *o, const double *a,
                      const double *b, double *g, double *h, double mean, double var, double inv_var,
                      int64_t max_newton, double max_step, double tol, int64_t max_bisection, double lo, double hi,
                      uint8_t *converged)
{
    double info, saved = th;
    uint8_t done = 0;
    int64_t power = 1, length = 0;
    for (int64_t it = 0; it < max_newton && !done; it++) {
        const double grad = gradient(n_items, th, x, o, a, b, g, h, mean, var, &info);
        const double step = clip(grad / (info + inv_var), -max_step, max_step);
        const double next = clip(th + step, lo, hi);
        done = fabs(next - th) < tol;
        th = next;
        /* A step depends on theta alone: a theta met before (the same 64 bits) starts a cycle of steps
         * none of which converged, so Newton never converges and the bisection below decides the row
         * (its Newton iterate is not kept). Found by Brent's cycle search. */
        if (!done && memcmp(&th, &saved, sizeof th) == 0) {
            break;
        }
        if (++length == power) {
            saved = th;
            power *= 2;
            length = 0;
        }
    }
    if (!done) {
        double left = lo, right = hi;
        for (int64_t it = 0; it < max_bisection; it++) {
            const double mid = 0.5 * (left + right);
            const double gm = gradient(n_items, mid, x, o, a, b, g, h, mean, var, &info);
            const double new_left = gm > 0 ? mid : left;
            const double new_right = gm > 0 ? right : mid;
            if (new_left == left && new_right == right) {
                break;
            }
            left = new_left;
            right = new_right;
        }
        th = 0.5 * (left + right);
        const double g_lo = gradient(n_items, lo, x, o, a, b, g, h, mean, var, &info);
        const double g_hi = gradient(n_items, hi, x, o, a, b, g, h, mean, var, &info);
        th = g_hi > 0 ? hi : (g_lo < 0 ? lo : th);
    }
    *converged = done;
    return th;
}

void ability_map_rows(int64_t n_rows, int64_t n_items, double *theta, const double *X, const uint8_t *observed,
                      const double *A, int64_t lda, const double *B, int64_t ldb, double *g, double *h,
                      double mean, double var, int64_t max_newton, double max_step, double tol,
                      int64_t max_bisection, double lo, double hi, uint8_t *converged)
{
    const double inv_var = 1.0 / var;
    for (int64_t r = 0; r < n_rows; r++) {
        theta[r] = map_row(n_items, theta[r], X + r * n_items, observed + r * n_items, A + r * lda, B + r * ldb, g,
                           h, mean, var, inv_var, max_newton, max_step, tol, max_bisection, lo, hi, converged + r);
    }
}

/* ability_map_rows for blocks of rows that each read their cells through an item list: block i's rows are the
 * n_rows rows (row stride ld, the number of columns) of its responses X (NaN: not observed), its items the n_items
 * positions items, its parameters A[items[j]], B[items[j]]. Each row's cells are gathered (x = 0 where X is NaN,
 * observed = X is not NaN: map_ability's np.where(observed, x, 0.0)) and the row solved as ability_map_rows solves
 * a row of the gathered matrices with one shared parameter row: the same operations on the same values, so the same
 * bits, without the stacked matrices (rows x items, three of them) that one map_ability call over the blocks needs.
 * desc holds 9 int64 per block: X (an address), n_rows, ld, the offset of its items in ITEMS, n_items, A, B
 * (addresses), the offset of its rows' clipped starts in THETA (overwritten by the estimates) and n_ab (the length
 * of A and B).
 * First every block is checked as map_ability checks its input: every item in [0, ld) and [0, n_ab), every
 * parameter finite and at most limit in absolute value, every response 0, 1 or NaN; the first block that fails is
 * returned (its caller asks map_ability, which states the error) and nothing is solved. Else -1.
 * work: 5 * max n_items doubles; obuf: max n_items bytes. */
int64_t ability_map_blocks(int64_t n_blocks, const int64_t *desc, const int64_t *ITEMS, double *THETA, double mean,
                           double var, int64_t max_newton, double max_step, double tol, int64_t max_bisection, double lo, double hi, double limit,
                           double *work, uint8_t *obuf)
{
    for (int64_t i = 0; i < n_blocks; i++) {
        const int64_t *d = desc + 9 * i;
        const double *X = (const double *)(intptr_t)d[0];
        const int64_t n_rows = d[1], ld = d[2], n_items = d[4], n_ab = d[8];
        const int64_t *items = ITEMS + d[3];
        const double *A = (const double *)(intptr_t)d[5], *B = (const double *)(intptr_t)d[6];
        for (int64_t j = 0; j < n_items; j++) {
            const int64_t c = items[j];
            if (c < 0 || c >= ld || c >= n_ab || !(fabs(A[c]) <= limit) || !(fabs(B[c]) <= limit)) {
                return i;
            }
            for (int64_t r = 0; r < n_rows; r++) {
                const double v = X[r * ld + c];
                if (!(v == 0.0 || v == 1.0 || isnan(v))) {
                    return i;
                }
            }
        }
    }
    const double inv_var = 1.0 / var;
    for (int64_t i = 0; i < n_blocks; i++) {
        const int64_t *d = desc + 9 * i;
        const double *X = (const double *)(intptr_t)d[0];
        const int64_t n_rows = d[1], ld = d[2], n_items = d[4];
        const int64_t *items = ITEMS + d[3];
        const double *A = (const double *)(intptr_t)d[5], *B = (const double *)(intptr_t)d[6];
        double *theta = THETA + d[7];
        double *a = work, *b = work + n_items, *x = work + 2 * n_items, *g = work + 3 * n_items;
        double *h = work + 4 * n_items;
        for (int64_t j = 0; j < n_items; j++) {
            a[j] = A[items[j]];
            b[j] = B[items[j]];
        }
        for (int64_t r = 0; r < n_rows; r++) {
            const double *row = X + r * ld;
            for (int64_t j = 0; j < n_items; j++) {
                const double v = row[items[j]];
                obuf[j] = !isnan(v);
                x[j] = obuf[j] ? v : 0.0;
            }
            uint8_t done;
            theta[r] = map_row(n_items, theta[r], x, obuf, a, b, g, h, mean, var, inv_var, max_newton, max_step, tol,
                               max_bisection, lo, hi, &done);
        }
    }
    return -1;
}

/* irtlib.selection.estimators._MapRun.estimate's exact pass (MapEstimator(order=0)), row by row.
 *
 * The Python loop moves every model not yet converged one Newton step at a time, each step from the row's sums at
 * its theta (every one of the first n_items cells counted: a cell without a response has a = 0 and x = 0, as
 * ability_row_sums sums it with observed 1); a row's steps read only its own row and theta, so running each row's
 * steps to the end gives the same values: grad = score - (theta - mean) / var, step clip(grad / (info + inv_var),
 * -max_step, max_step), theta clip(theta + step, lo, hi), converged once a step moved theta by less than tol, at
 * most max_newton steps (no cycle search and no bisection here: the caller hands the rows not converged to
 * map_ability, as the Python loop does). X, A, B: the run's (n_rows x ld) arrays, read in their first n_items
 * columns. theta (in: the starts, out: the last iterates), info (out: the information at the last theta a step
 * started from; left as it was where max_newton is 0), done (out, 0 or 1). ones: n_items bytes of 1; g, h: work
 * rows of n_items doubles. */
void ability_newton_rows(int64_t n_rows, int64_t n_items, int64_t ld, double *theta, double *info, uint8_t *done,
                         const double *X, const double *A, const double *B, const uint8_t *ones, double *g, double *h,
                         double mean, double var, double inv_var, int64_t max_newton, double max_step, double tol,
                         double lo, double hi)
{
    for (int64_t r = 0; r < n_rows; r++) {
        double th = theta[r];
        uint8_t converged = 0;
        for (int64_t it = 0; it < max_newton && !converged; it++) {
            double score, inf;
            row_sum(n_items, th, X + r * ld, ones, A + r * ld, B + r * ld, g, h, &score, &inf);
            const double prior = (th - mean) / var;
            const double grad = score - prior;
            const double step = clip(grad / (inf + inv_var), -max_step, max_step);
            const double next = clip(th + step, lo, hi);
            converged = fabs(next - th) < tol;
            th = next;
            info[r] = inf;
        }
        theta[r] = th;
        done[r] = converged;
    }
}
