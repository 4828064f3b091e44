/* The sums of a score interval for many models on one bank, with a vectorised exp: irtlib.bank.interval_sums.
 *
 * For every model i < n, with t = theta[i] and s = z * se[i], over the items j < m not among its known ones
 * (known[i * w + k] >= 0, k < w):
 *
 *     out[4 i + 0] = sum P_j(t),  out[4 i + 1] = sum P_j(t - s),  out[4 i + 2] = sum P_j(t + s),
 *     out[4 i + 3] = sum P_j(t) (1 - P_j(t)),      P_j(u) = 1 / (1 + exp(-(u - B[j]) A[j]))
 *
 * the sums irtlib.bank.intervals.score_interval forms. exp is declared SIMD so the compiler calls glibc's
 * vector exp (libmvec, within a few units in the last place of the scalar one); the sums run in four
 * lanes over blocks of items. So the sums equal score_interval's to about 1e-15 relative, not bit for bit.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

__attribute__((simd("notinbranch"))) double exp(double);

#define CHUNK 256

__attribute__((optimize("tree-vectorize")))
static void chunk(int64_t c, double t, double s, const double *A, const double *B, const double *keep,
                  double *acc)
{
    double pm[CHUNK], pl[CHUNK], ph[CHUNK];
    for (int64_t j = 0; j < c; j++) {
        double d = t - B[j];
        pm[j] = keep[j] / (1.0 + exp(-(d * A[j])));
        pl[j] = keep[j] / (1.0 + exp(-((d - s) * A[j])));
        ph[j] = keep[j] / (1.0 + exp(-((d + s) * A[j])));
    }
    for (int64_t j = 0; j < c; j++) {
        int64_t lane = j & 3;
        acc[lane] += pm[j];
        acc[4 + lane] += pl[j];
        acc[8 + lane] += ph[j];
        acc[12 + lane] += pm[j] * (1.0 - pm[j]);
    }
}

int interval_sums(int64_t n, int64_t m, const double *theta, const double *se, double z, const double *A,
                  const double *B, int64_t w, const int64_t *known, double *out)
{
    double *keep = malloc(sizeof(double) * (m > 0 ? m : 1));
    if (!keep)
        return -1;
    for (int64_t j = 0; j < m; j++)
        keep[j] = 1.0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t *kn = known + i * w;
        for (int64_t k = 0; k < w; k++)
            if (kn[k] >= 0)
                keep[kn[k]] = 0.0;
        double acc[16] = {0.0};
        for (int64_t j0 = 0; j0 < m; j0 += CHUNK)
            chunk(m - j0 < CHUNK ? m - j0 : CHUNK, theta[i], z * se[i], A + j0, B + j0, keep + j0, acc);
        for (int q = 0; q < 4; q++)
            out[4 * i + q] = (acc[4 * q] + acc[4 * q + 1]) + (acc[4 * q + 2] + acc[4 * q + 3]);
        for (int64_t k = 0; k < w; k++)
            if (kn[k] >= 0)
                keep[kn[k]] = 1.0;
    }
    free(keep);
    return 0;
}
