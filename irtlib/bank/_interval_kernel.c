/* The 2PL probabilities of a score interval in one pass: irtlib.bank.intervals.score_interval, cell by cell.
 *
 * For every model i < n and item j < m, with theta = theta[i], a = A[j], b = B[j]:
 *
 *     z = theta - b;  z = z * a;  P[i, j] = 1 / (1 + exp(-z))        (logit_z into its work array, then expit)
 *
 * the numpy path's operations in its order, rounded alike (compiled without contraction into fused
 * multiply-adds, exp the C library's, as scipy's expit calls it), so every P is that path's bit for
 * bit. Then the known cells: for k < w with item = known[i * w + k] >= 0, P[i, item] = 0 (the
 * numpy path's np.copyto(P, 0, where=known)). The row sums stay with numpy (its pairwise summation).
 */
#include <math.h>
#include <stdint.h>

void interval_probabilities(int64_t n, int64_t m, const double *theta, const double *A, const double *B,
                            int64_t w, const int64_t *known, double *P)
{
    for (int64_t i = 0; i < n; i++) {
        const double th = theta[i];
        double *p = P + i * m;
        for (int64_t j = 0; j < m; j++) {
            double z = th - B[j];
            z = z * A[j];
            p[j] = 1.0 / (1.0 + exp(-z));
        }
        const int64_t *kn = known + i * w;
        for (int64_t k = 0; k < w; k++) {
            if (kn[k] >= 0)
                p[kn[k]] = 0.0;
        }
    }
}
