/* The item blocks' inverse between the two products of a conjugate-gradient step, in one loop.

   Called through ctypes by irtlib.calibration.arrow_kernel for irtlib.calibration.joint_map's 2PL
   direction: per item j, from the float32 column products c_h = sum_m h[m, j] u[m] and
   c_w = sum_m w[m, j] u[m] of a conjugate-gradient product,

       t0 = a c_h,  t1 = -a^2 c_w                      (cross_t: C^T u)
       y0 = (0 + d_aa t0) + d_ab t1,  y1 = (0 + d_ab t0) + d_bb t1      (B^-1, as newton.row_sum adds)
       y_w = float(-a^2 y1),  y_h = float(a y0)         (the weights of the next product C y)

   in double, each operation rounded as numpy rounds it (IEEE, no fused multiply-add: compiled with
   -ffp-contract=off; 0 + t as numpy's add of 0, which turns -0.0 into 0.0), so the results equal numpy's
   chain of fourteen array operations bit for bit. */

#include <stdint.h>

void arrow_binv_f32(int64_t n, const float *c_h, const float *c_w, const double *a, const double *neg_a2,
                    const double *d_aa, const double *d_ab, const double *d_bb, float *y_w, float *y_h) {
    for (int64_t j = 0; j < n; j++) {
        const double t0 = a[j] * (double)c_h[j], t1 = neg_a2[j] * (double)c_w[j];
        double y0 = d_aa[j] * t0, y1 = d_ab[j] * t0;
        y0 = 0.0 + y0;
        y1 = 0.0 + y1;
        y0 += d_ab[j] * t1;
        y1 += d_bb[j] * t1;
        y_w[j] = (float)(neg_a2[j] * y1);
        y_h[j] = (float)(a[j] * y0);
    }
}

/* The right-hand side's weights: y_w, y_h of the items' gradient (g0, g1) = (d log a, d b) itself,
   B^-1 g as newton.row_sum adds it, then cast (cross(binv(g_items)) before its row products). */
void arrow_rhs_f64(int64_t n, const double *g0, const double *g1, const double *a, const double *neg_a2,
                   const double *d_aa, const double *d_ab, const double *d_bb, float *y_w, float *y_h) {
    for (int64_t j = 0; j < n; j++) {
        double y0 = d_aa[j] * g0[j], y1 = d_ab[j] * g0[j];
        y0 = 0.0 + y0;
        y1 = 0.0 + y1;
        y0 += d_ab[j] * g1[j];
        y1 += d_bb[j] * g1[j];
        y_w[j] = (float)(neg_a2[j] * y1);
        y_h[j] = (float)(a[j] * y0);
    }
}

/* The items' step of a solved direction: h = g - C^T d (h0 = g0 - a c_h, h1 = g1 - (-a^2) c_w from the
   float32 column products), then B^-1 h as newton.row_sum adds it, in double. */
void arrow_back_f64(int64_t n, const double *g0, const double *g1, const float *c_h, const float *c_w,
                    const double *a, const double *neg_a2, const double *d_aa, const double *d_ab,
                    const double *d_bb, double *out0, double *out1) {
    for (int64_t j = 0; j < n; j++) {
        const double h0 = g0[j] - a[j] * (double)c_h[j], h1 = g1[j] - neg_a2[j] * (double)c_w[j];
        double y0 = d_aa[j] * h0, y1 = d_ab[j] * h0;
        y0 = 0.0 + y0;
        y1 = 0.0 + y1;
        y0 += d_ab[j] * h1;
        y1 += d_bb[j] * h1;
        out0[j] = y0;
        out1[j] = y1;
    }
}

/* Each item's gradient in (log a, b) and the inverse of its 2 x 2 information block (joint_map._item_blocks):
   from the column sums s_g, s_gz, s_w, s_wz, s_wz2 (sums, 5 x n, row-major), the priors' means and
   variances (and their reciprocals, as Python rounds 1.0 / s**2) and the Newton weight; the observed block
   where use_newton and it is positive definite (newton_item 1), else the expected one. Each operation in
   numpy's order: -a s_g - (b - mb) / sb2, (s_wz2 + 1/sa2) - newton s_gz, (-a) s_wz + (newton a) s_g, ... */
void item_blocks_f64(int64_t n, const double *a, const double *alpha, const double *b, const double *sums,
                     double ma, double sa2, double inv_sa2, double mb, double sb2, double inv_sb2, double newton,
                     int64_t use_newton, double *g_al, double *g_b, double *d_aa, double *d_ab, double *d_bb,
                     uint8_t *newton_item) {
    const double *s_g = sums, *s_gz = sums + n, *s_w = sums + 2 * n, *s_wz = sums + 3 * n, *s_wz2 = sums + 4 * n;
    for (int64_t j = 0; j < n; j++) {
        const double aj = a[j], na = -aj;
        g_al[j] = s_gz[j] - (alpha[j] - ma) / sa2;
        g_b[j] = na * s_g[j] - (b[j] - mb) / sb2;
        const double j_bb = (aj * aj) * s_w[j] + inv_sb2;
        const double expected_aa = s_wz2[j] + inv_sa2;
        const double obs_aa = expected_aa - newton * s_gz[j];
        const double obs_ab = na * s_wz[j] + (newton * aj) * s_g[j];
        const int nt = use_newton && (obs_aa > 0) && (obs_aa * j_bb - obs_ab * obs_ab > 0);
        const double j_aa = nt ? obs_aa : expected_aa;
        const double j_ab = nt ? obs_ab : na * s_wz[j];
        const double det = j_aa * j_bb - j_ab * j_ab;
        d_aa[j] = j_bb / det;
        d_ab[j] = -j_ab / det;
        d_bb[j] = j_aa / det;
        newton_item[j] = (uint8_t)nt;
    }
}
