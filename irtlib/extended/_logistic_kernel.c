/* The logistic tables of the M2PL's and the GRM's objectives in one pass: scipy.special's log_expit and
 * expit of z and of -z, cell by cell, sharing each cell's exponential and logarithm.
 *
 * scipy computes, for a double x (and compiles without contraction, exp and log1p the C library's):
 *
 *     log_expit(x) = x < 0 ? x - log1p(exp(x)) : -log1p(exp(-x))        expit(x) = 1 / (1 + exp(-x))
 *
 * For one z both log_expit(z) and log_expit(-z) use the same L = log1p(exp(-|z|)):
 *
 *     z < 0:         log_expit(z) = z - L,   log_expit(-z) = -L          (-z > 0, and -(-z) is z exactly)
 *     otherwise:     log_expit(z) = -L,      log_expit(-z) = -z - L      (-z < 0 for z > 0; for z = +-0
 *                                                                         -z - L is -L, scipy's -log1p(exp(0)))
 *
 * and expit(z) = 1 / (1 + exp(-z)) shares exp(-z) where z >= 0, expit(-z) = 1 / (1 + exp(z)) shares exp(z)
 * where z < 0; NaN takes the second branch, as scipy's (every result NaN). Each value is therefore
 * scipy's operation on scipy's operands, rounded alike: the same bits (irtlib.extended.logistic_kernel
 * checks this against scipy when it loads), with one or two exponentials and one log1p per cell where
 * scipy's four calls make four and two.
 *
 * ep or en may be NULL (that table is not wanted).
 *
 * With row > 0, z is read as rows of that length, and a cell whose z has the same bits as the cell above it
 * (the same column, the previous row) takes that cell's values: the same operations on the same operand give
 * the same results, so this only skips work. The M2PL's confirmatory tables (nodes x items) repeat so: an
 * item's logit depends on its own dimension's node coordinate only, constant over long runs of nodes.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

static int same_bits(double a, double b)
{
    uint64_t x, y;
    memcpy(&x, &a, sizeof x);
    memcpy(&y, &b, sizeof y);
    return x == y;
}

void logistic_tables(int64_t n, const double *z, double *lp, double *ln, double *ep, double *en, int64_t row)
{
    for (int64_t i = 0; i < n; i++) {
        const double x = z[i];
        if (row > 0 && i >= row && same_bits(x, z[i - row])) {
            const int64_t k = i - row;
            lp[i] = lp[k];
            ln[i] = ln[k];
            if (ep)
                ep[i] = ep[k];
            if (en)
                en[i] = en[k];
            continue;
        }
        if (x < 0) {
            const double e = exp(x);
            const double L = log1p(e);
            lp[i] = x - L;
            ln[i] = -L;
            if (ep)
                ep[i] = 1.0 / (1.0 + exp(-x));
            if (en)
                en[i] = 1.0 / (1.0 + e);
        } else {
            const double e = exp(-x);
            const double L = log1p(e);
            lp[i] = -L;
            ln[i] = -x - L;
            if (ep)
                ep[i] = 1.0 / (1.0 + e);
            if (en)
                en[i] = 1.0 / (1.0 + exp(x));
        }
    }
}
