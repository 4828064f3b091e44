/* The exact Fisher information of one 2PL item, a^2 P (1 - P), in the operations and order of
 * irtlib.core.kernels.fisher_information (compiled without contraction into fused multiply-adds, exp
 * the C library's), and numpy's argmax step; included by _mle_kernel.c and _maxinfo_kernel.c. */
#ifndef IRTLIB_EXACT_INFORMATION_H
#define IRTLIB_EXACT_INFORMATION_H
#include <math.h>

static inline double exact_information(double aj, double bj, double th)
{
    double z = th - bj;
    z = aj * z;
    const double s = 1.0 / (1.0 + exp(-z));
    const double q = 1.0 / (1.0 + exp(z));
    double w = aj * aj;
    w = w * s;
    return w * q;
}

/* numpy's argmax step: w replaces the best so far when larger, or the first NaN. */
static inline int better(double w, double top)
{
    return w > top || (isnan(w) && !isnan(top));
}

#endif
