/* The 3PL's cell arithmetic of irtlib.calibration.models' Fisher scoring in one pass per table.
 *
 * irtlib.calibration.threepl_kernel documents what each function computes: numpy's expressions of
 * irtlib.calibration.models (_Point, _z_derivatives, _step), cell by cell, with the same operations on
 * the same operands in the same order (compiled without contraction), and scipy's expit as scipy computes
 * it, 1 / (1 + exp(-t)) with the C library's exp. The sums stay with numpy. Every array is C-ordered,
 * models x items; a, b, c, omc (1 - c), dc (c (1 - c)) and logc (log c) are per item, theta per model.
 */
#include <math.h>
#include <stdint.h>

static double expit(double t)
{
    return 1.0 / (1.0 + exp(-t));
}

/* z = a (theta - b), s = expit(z), p = clip(c + (1 - c) s, lo, hi) as numpy's clip (NaN stays NaN). */
void threepl_point(int64_t m, int64_t n, const double *theta, const double *a, const double *b,
                   const double *c, const double *omc, double lo, double hi, double *z, double *s, double *p)
{
    for (int64_t i = 0; i < m; i++) {
        const double t = theta[i];
        for (int64_t j = 0; j < n; j++) {
            const int64_t k = i * n + j;
            const double zz = a[j] * (t - b[j]);
            const double sv = expit(zz);
            double v = c[j] + omc[j] * sv;
            if (!isnan(v)) {
                v = v > lo ? v : lo;
                v = v < hi ? v : hi;
            }
            z[k] = zz;
            s[k] = sv;
            p[k] = v;
        }
    }
}

/* The step's cell tables (out: 12 arrays of m x n, in the order of threepl_kernel.STEP_TABLES):
 * g_z, w_zz, g_g, w_zg, w_gg (masked when mask is given), wa = w_zz a, wz = w_zz z, g_z z, wz z, w_zg z,
 * wz a, (-wa) a, w_zg a. */
void threepl_step(int64_t m, int64_t n, const double *x, const double *mask, const double *z, const double *s,
                  const double *p, const double *a, const double *c, const double *omc, const double *dc,
                  const double *logc, double **out)
{
    double *gz_o = out[0], *wzz_o = out[1], *gg_o = out[2], *wzg_o = out[3], *wgg_o = out[4], *wa_o = out[5],
           *wz_o = out[6], *gzz_o = out[7], *wzzz_o = out[8], *wzgz_o = out[9], *c0_o = out[10],
           *c1_o = out[11], *c2_o = out[12];
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            const int64_t k = i * n + j;
            const double zz = z[k], sv = s[k], pv = p[k], xv = x[k];
            const double q = 1.0 / (1.0 + exp(zz));            /* expit(-z): exp(-(-z)) is exp(z) */
            const double ratio = expit(zz - logc[j]);
            double gz = ((xv - 1.0) + omc[j] * q) * ratio;
            double wzz = ((omc[j] * sv) * q) * ratio;
            double gg = ((xv - pv) * c[j]) / pv;
            double wzg = ((dc[j] * sv) * q) / pv;
            double wgg = ((c[j] * dc[j]) * q) / pv;
            if (mask) {
                const double w = mask[k];
                gg = gg * w;
                wzg = wzg * w;
                wgg = wgg * w;
                gz = gz * w;
                wzz = wzz * w;
            }
            const double wa = wzz * a[j];
            const double wz = wzz * zz;
            gz_o[k] = gz;
            wzz_o[k] = wzz;
            gg_o[k] = gg;
            wzg_o[k] = wzg;
            wgg_o[k] = wgg;
            wa_o[k] = wa;
            wz_o[k] = wz;
            gzz_o[k] = gz * zz;
            wzzz_o[k] = wz * zz;
            wzgz_o[k] = wzg * zz;
            c0_o[k] = wz * a[j];
            c1_o[k] = (-wa) * a[j];
            c2_o[k] = wzg * a[j];
        }
    }
}
