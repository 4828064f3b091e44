/* numpy's pairwise sum of n contiguous doubles (DOUBLE_pairwise_sum, numpy/_core/src/umath/loops_utils.h.src),
 * shared by the selection kernels that must sum as numpy does (_mle_kernel.c, _greedy_kernel.c).
 *
 * Fewer than 8 values one after the other from -0.0; up to 128 in eight interleaved accumulators combined
 * as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the remainder one by one; more than 128 split
 * at half the length rounded down to a multiple of 8, each half summed so and the two added. numpy's
 * add.reduce of a row (no initial value) is 0.0 + this sum. Compile with -ffp-contract=off.
 * irtlib.calibration.fused_kernel hashes this header into the name of every kernel that includes it.
 */
#ifndef IRTLIB_PAIRWISE_SUM_H
#define IRTLIB_PAIRWISE_SUM_H
#include <stdint.h>

static double pairwise_sum(const double *a, int64_t n)
{
    if (n < 8) {
        double res = -0.0;
        for (int64_t i = 0; i < n; i++) {
            res += a[i];
        }
        return res;
    }
    else if (n <= 128) {
        double r[8], res;
        int64_t i;
        for (int q = 0; q < 8; q++) {
            r[q] = a[q];
        }
        for (i = 8; i < n - (n % 8); i += 8) {
            for (int q = 0; q < 8; q++) {
                r[q] += a[i + q];
            }
        }
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) {
            res += a[i];
        }
        return res;
    }
    else {
        int64_t n2 = n / 2;
        n2 -= n2 % 8;
        return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
    }
}
/* pairwise_sum of a[0..n) into *sa and of b[0..n) into *sb, each in exactly pairwise_sum's order (so the same
 * bits), the two in one pass: their additions are two independent chains, which the processor overlaps (one
 * sum's eight accumulators wait on the latency of the previous addition). */
static void pairwise_sum2(const double *a, const double *b, int64_t n, double *sa, double *sb)
{
    if (n < 8) {
        double ra = -0.0, rb = -0.0;
        for (int64_t i = 0; i < n; i++) {
            ra += a[i];
            rb += b[i];
        }
        *sa = ra;
        *sb = rb;
    }
    else if (n <= 128) {
        double ra[8], rb[8], resa, resb;
        int64_t i;
        for (int q = 0; q < 8; q++) {
            ra[q] = a[q];
            rb[q] = b[q];
        }
        for (i = 8; i < n - (n % 8); i += 8) {
            for (int q = 0; q < 8; q++) {
                ra[q] += a[i + q];
                rb[q] += b[i + q];
            }
        }
        resa = ((ra[0] + ra[1]) + (ra[2] + ra[3])) + ((ra[4] + ra[5]) + (ra[6] + ra[7]));
        resb = ((rb[0] + rb[1]) + (rb[2] + rb[3])) + ((rb[4] + rb[5]) + (rb[6] + rb[7]));
        for (; i < n; i++) {
            resa += a[i];
            resb += b[i];
        }
        *sa = resa;
        *sb = resb;
    }
    else {
        int64_t n2 = n / 2;
        n2 -= n2 % 8;
        double a1, b1, a2, b2;
        pairwise_sum2(a, b, n2, &a1, &b1);
        pairwise_sum2(a + n2, b + n2, n - n2, &a2, &b2);
        *sa = a1 + a2;
        *sb = b1 + b2;
    }
}
#endif
