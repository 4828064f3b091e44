/* Fluid Benchmarking replayed on response rows, one model at a time: irtlib.bank.replay_kernel.
 *
 * For each model i < n (row X[i, :], NaN: unavailable), starting at theta = theta0 with no item, for
 * t < budget: pick the unused available item of largest Fisher information a^2 s(z) s(-z), z = a (theta - b)
 * (ties to the lowest item index), record it and its response, then move theta to the MAP of the responses
 * so far (Normal(prior_mean, prior_sd) prior, clipped to [lo, hi]). A model with no item left gets item -1
 * and keeps its estimate. Writes items[i * budget + t] and est[i * budget + t].
 *
 * Selection is exact without evaluating every item. The items are split into strata of a (largest first),
 * each stratum's items sorted by b and cut into blocks; every block and stratum carries its range of a (and
 * each block its range of b). For a block whose b's are at least d from theta and whose a's lie in [lo, hi],
 * no item holds more information than f(clamp(U / d, lo, hi), d), f(a, d) = a^2 s(a d) s(-a d) (hi^2 / 4 at
 * d = 0): f falls with d, and in a rises up to a = U / d (U maximises u^2 s(u) s(-u)) and falls after. In
 * each stratum the blocks are visited outwards from theta, nearer first; a direction ends once the
 * stratum's range of a cannot beat the best so far at that distance, a block is skipped when its own
 * range cannot. Bounds are compared with a relative slack of 1e-9 (far above their rounding).
 *
 * The MAP is Newton's method on the score, warm-started from the previous estimate, each step capped at
 * max_step and kept inside a bracket of the root (bisection when Newton leaves it); it stops after a step
 * below NEWTON_TOL (Newton is then within about a_max NEWTON_TOL^2 of the mode) or when the bracket is
 * within rounding; a root beyond a bound gives the bound.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define U_STAR 2.3993572805154675       /* argmax of u^2 s(u) s(-u): u tanh(u / 2) = 2 */
#define G_STAR 0.4392288398906447       /* its value */
#define SLACK (1.0 + 1e-9)
#define NEWTON_TOL 1e-7                 /* a step below it leaves Newton within about 1e-13 of the mode */

static double sig(double z) { return 1.0 / (1.0 + exp(-z)); }

static double info(double theta, double a, double b)
{
    double e = exp(-fabs(a * (theta - b)));
    return a * a * e / ((1.0 + e) * (1.0 + e));     /* a^2 s(z) s(-z) */
}

/* The most information an item with a in [lo, hi] and b at distance d from theta can hold. */
static double bound(double lo, double hi, double d)
{
    if (d <= 0.0)
        return 0.25 * hi * hi;
    double a = U_STAR / d;
    a = a < lo ? lo : (a > hi ? hi : a);
    double e = exp(-a * d);
    return a * a * e / ((1.0 + e) * (1.0 + e));
}

static double block_distance(double theta, double bmin, double bmax)
{
    if (theta < bmin)
        return bmin - theta;
    if (theta > bmax)
        return theta - bmax;
    return 0.0;
}

/* The bank's layout for the pick: strata of a (each with its a range), each stratum's items sorted by b
 * and cut into blocks (each with its a and b ranges); blocks never straddle strata. */
typedef struct {
    int64_t n_strata;
    const int64_t *stratum_blocks;   /* n_strata + 1: the blocks of stratum s are [sb[s], sb[s + 1]) */
    const int64_t *block_items;      /* n_blocks + 1: the positions in order[] of block k */
    const int64_t *order;            /* items by stratum, then b */
    const double *bamin, *bamax, *bmin, *bmax;   /* per block */
    const double *samin, *samax;     /* per stratum */
} layout;

static void scan_block(const layout *L, int64_t k, double theta, const double *A, const double *B,
                       const unsigned char *used, double *best, int64_t *bestj)
{
    for (int64_t p = L->block_items[k]; p < L->block_items[k + 1]; p++) {
        int64_t j = L->order[p];
        if (used[j])
            continue;
        double v = info(theta, A[j], B[j]);
        if (v > *best || (v == *best && j < *bestj)) {
            *best = v;
            *bestj = j;
        }
    }
}

static int64_t pick(double theta, const double *A, const double *B, const unsigned char *used, const layout *L)
{
    double best = -1.0;
    int64_t bestj = -1;
    for (int64_t s = 0; s < L->n_strata; s++) {
        double slo = L->samin[s], shi = L->samax[s];
        if (bestj >= 0 && bound(slo, shi, 0.0) * SLACK < best)
            continue;
        int64_t k0 = L->stratum_blocks[s], k1 = L->stratum_blocks[s + 1];
        int64_t lo = k0, hi = k1;        /* the stratum's first block whose largest b is >= theta */
        while (lo < hi) {
            int64_t mid = (lo + hi) / 2;
            if (L->bmax[mid] < theta)
                lo = mid + 1;
            else
                hi = mid;
        }
        int64_t right = lo, left = lo - 1;
        int right_open = right < k1, left_open = left >= k0;
        while (right_open || left_open) {
            double dr = right_open ? block_distance(theta, L->bmin[right], L->bmax[right]) : INFINITY;
            double dl = left_open ? block_distance(theta, L->bmin[left], L->bmax[left]) : INFINITY;
            int go_right = dr <= dl;
            int64_t k = go_right ? right : left;
            double d = go_right ? dr : dl;
            if (bestj >= 0 && bound(slo, shi, d) * SLACK < best) {   /* no block this far can win */
                if (go_right)
                    right_open = 0;
                else
                    left_open = 0;
                continue;
            }
            if (go_right)
                right_open = ++right < k1;
            else
                left_open = --left >= k0;
            if (bestj >= 0 && bound(L->bamin[k], L->bamax[k], d) * SLACK < best)
                continue;
            scan_block(L, k, theta, A, B, used, &best, &bestj);
        }
    }
    return bestj;
}

static void score(double theta, int64_t k, const double *a, const double *b, const double *x, double mean,
                  double inv_var, double *g, double *h)
{
    double sg = 0.0, sh = 0.0;
    for (int64_t s = 0; s < k; s++) {
        double p = sig(a[s] * (theta - b[s]));
        sg += a[s] * (x[s] - p);
        sh += a[s] * a[s] * p * (1.0 - p);
    }
    *g = sg - (theta - mean) * inv_var;
    *h = sh + inv_var;
}

static double map_mode(double theta, int64_t k, const double *a, const double *b, const double *x, double mean,
                       double sd, double lo, double hi, double max_step)
{
    double inv_var = 1.0 / (sd * sd);
    double left = lo, right = hi;
    for (int it = 0; it < 200; it++) {
        double g, h;
        score(theta, k, a, b, x, mean, inv_var, &g, &h);
        if (g == 0.0)
            return theta;
        if (g > 0.0)
            left = theta;
        else
            right = theta;
        if (g > 0.0 && theta >= hi)
            return hi;                  /* the root beyond the upper bound: the bound */
        if (g < 0.0 && theta <= lo)
            return lo;
        double step = g / h;
        if (step > max_step)
            step = max_step;
        if (step < -max_step)
            step = -max_step;
        double next = theta + step;
        if (next > hi)
            next = hi;
        if (next < lo)
            next = lo;
        if (next < left || next > right)    /* Newton left the bracket of the root: bisect */
            next = 0.5 * (left + right);
        if (fabs(next - theta) < NEWTON_TOL || right - left < 1e-15)
            return next;
        theta = next;
    }
    return theta;
}

int fluid_replay(int64_t n, int64_t m, const double *X, const double *A, const double *B, int64_t budget,
                 int64_t n_strata, const int64_t *stratum_blocks, const int64_t *block_items, const int64_t *order,
                 const double *bamin, const double *bamax, const double *bmin, const double *bmax,
                 const double *samin, const double *samax, double theta0, double mean, double sd, double lo,
                 double hi, double max_step, int64_t *items, double *est)
{
    const layout L = {n_strata, stratum_blocks, block_items, order, bamin, bamax, bmin, bmax, samin, samax};
    unsigned char *used = malloc(m > 0 ? m : 1);
    double *wa = malloc(sizeof(double) * (budget > 0 ? budget : 1));
    double *wb = malloc(sizeof(double) * (budget > 0 ? budget : 1));
    double *wx = malloc(sizeof(double) * (budget > 0 ? budget : 1));
    if (!used || !wa || !wb || !wx) {
        free(used); free(wa); free(wb); free(wx);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) {
        const double *row = X + i * m;
        for (int64_t j = 0; j < m; j++)
            used[j] = isnan(row[j]) ? 1 : 0;
        double theta = theta0 < lo ? lo : (theta0 > hi ? hi : theta0);
        int64_t k = 0;
        for (int64_t t = 0; t < budget; t++) {
            int64_t j = pick(theta, A, B, used, &L);
            items[i * budget + t] = j;
            if (j >= 0) {
                used[j] = 1;
                wa[k] = A[j];
                wb[k] = B[j];
                wx[k] = row[j];
                k++;
                theta = map_mode(theta, k, wa, wb, wx, mean, sd, lo, hi, max_step);
            }
            est[i * budget + t] = theta;
        }
    }
    free(used); free(wa); free(wb); free(wx);
    return 0;
}
