/* portable_exp and portable_exp_pair (_portable_exp.h) over arrays, for their tests and benchmarks
 * (irtlib.selection.portable_exp.load_c). Blocks of PEXP_LANES values in loops of fixed length,
 * which GCC vectorises at -O2; the rest one by one. */
#include "_portable_exp.h"

#define PEXP_LANES 8

void portable_exp_array(int64_t n, const double *x, double *out)
{
    int64_t i = 0;
    for (; i + PEXP_LANES <= n; i += PEXP_LANES) {
        double v[PEXP_LANES];
        for (int l = 0; l < PEXP_LANES; l++)
            v[l] = portable_exp(x[i + l]);
        for (int l = 0; l < PEXP_LANES; l++)
            out[i + l] = v[l];
    }
    for (; i < n; i++)
        out[i] = portable_exp(x[i]);
}

/* exp(x) into ex and exp(-x) into enx. */
void portable_exp_pair_array(int64_t n, const double *x, double *ex, double *enx)
{
    int64_t i = 0;
    for (; i + PEXP_LANES <= n; i += PEXP_LANES) {
        double v[PEXP_LANES], w[PEXP_LANES];
        for (int l = 0; l < PEXP_LANES; l++)
            portable_exp_pair(x[i + l], &v[l], &w[l]);
        for (int l = 0; l < PEXP_LANES; l++) {
            ex[i + l] = v[l];
            enx[i + l] = w[l];
        }
    }
    for (; i < n; i++)
        portable_exp_pair(x[i], &ex[i], &enx[i]);
}

/* portable_exp_pair_normal's exp(x) and exp(-x), for |x| <= PEXP_NORMAL_RANGE only (its tests: the pair's bits). */
void portable_exp_pair_normal_array(int64_t n, const double *x, double *ex, double *enx)
{
    int64_t i = 0;
    for (; i + PEXP_LANES <= n; i += PEXP_LANES) {
        double v[PEXP_LANES], w[PEXP_LANES];
        for (int l = 0; l < PEXP_LANES; l++)
            portable_exp_pair_normal(x[i + l], &v[l], &w[l]);
        for (int l = 0; l < PEXP_LANES; l++) {
            ex[i + l] = v[l];
            enx[i + l] = w[l];
        }
    }
    for (; i < n; i++)
        portable_exp_pair_normal(x[i], &ex[i], &enx[i]);
}
