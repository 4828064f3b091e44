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

#include "_pairwise_sum.h"

void ability_row_sums(int64_t n_rows, const int64_t *rows, int64_t n_items, const double *theta,
                      const double *X, const uint8_t *observed, const double *A, int64_t lda,
                      const double *B, int64_t ldb, double *g, double *h, double *score_sum, double *info_sum)
{
    for (int64_t i = 0; i < n_rows; i++) {
        const int64_t r = rows ? rows[i] : i;
        const double th = theta[i];
        const double *x = X + r * n_items, *a = A + r * lda, *b = B + r * ldb;
        const uint8_t *o = observed + r * n_items;
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
        score_sum[i] = 0.0 + pairwise_sum(g, n_items);
        info_sum[i] = 0.0 + pairwise_sum(h, n_items);
    }
}
