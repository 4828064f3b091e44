/* Fluid's MLE score terms in one pass: irtlib.selection.estimators._MleRun._score, cell by cell.
 *
 * For every asked row r (rows[i]) and administered step j < t, with a = A[r, j], b = B[r, j],
 * x = X[r, j] and theta = theta[i]:
 *
 *     z = a * (theta - b);  s = 1 / (1 + exp(-z));  q = 1 / (1 + exp(z))      (scipy's expit of z and -z)
 *     g[i, j] = a * (x * q - (1 - x) * s)                                       (score term)
 *     h[i, j] = ((a * a) * s) * q                                               (information term)
 *
 * the numpy path's operations in its order, rounded alike (compiled without contraction into
 * fused multiply-adds, exp the C library's, as scipy's expit calls it). The row sums stay with
 * numpy (its pairwise summation), so the score and slope are those of the numpy path bit for bit.
 * g and h have X's layout (row r's terms in row r, ld columns); only the columns from[i] <= j < t
 * of row rows[i] are written: the caller keeps the earlier ones, computed at the same theta.
 */
#include <math.h>
#include <stdint.h>

void mle_terms(int64_t n, int64_t t, int64_t ld, const int64_t *rows, const double *theta, const int64_t *from,
               const double *X, const double *A, const double *B, double *g, double *h)
{
    for (int64_t i = 0; i < n; i++) {
        const int64_t r = rows[i], off = r * ld;
        const double *x = X + off, *a = A + off, *b = B + off;
        const double th = theta[i];
        double *gi = g + off;
        double *hi = h + off;
        for (int64_t j = from[i]; j < t; j++) {
            const double aj = a[j];
            double z = th - b[j];
            z = aj * z;
            const double s = 1.0 / (1.0 + exp(-z));
            const double q = 1.0 / (1.0 + exp(z));
            double w = aj * aj;
            w = w * s;
            hi[j] = w * q;
            const double xq = x[j] * q;
            const double xs = (1.0 - x[j]) * s;
            gi[j] = aj * (xq - xs);
        }
    }
}
