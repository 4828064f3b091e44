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
#endif
