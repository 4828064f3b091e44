/* Fluid's MAP estimate: the Taylor-moment Newton iteration of
 * irtlib.selection.estimators._MapRun._estimate_taylor in C, every model of a step in one call.
 *
 * Per iteration, for every model i still moving (act, sorted), at d = theta[i] - theta_r[i]:
 *
 *     terms[n] = d^n * invfact[n]                                   n = 0 .. N - 2
 *     g  = (sax - dot(M[i, 0:N-1], terms)) - ((theta - prior_mean) * inv_var)
 *     h  = dot(M[i, 1:N], terms);  dh = dot(M[i, 2:N], terms[0:N-2])
 *     hp = h + inv_var;  raw = g / hp
 *     new = min(max(theta + min(max(raw, -cap), cap), lo), hi)
 *     stop = |new - theta| < tol  or  (|dh| raw raw < tol5 hp and |raw| < cap and lo < new < hi)
 *
 * the numpy path's operations in its order (compiled without contraction into fused multiply-adds).
 * The powers are repeated products, as the numpy path's (estimators._taylor_terms): d^0 = 1,
 * d^1 = d, d^n = d^(n-1) * d, each a correctly rounded IEEE product, so the same bits on every
 * machine (numpy's ``power`` is not correctly rounded, and differs between processors: SVML with
 * AVX-512). dot is numpy's einsum "ij,ij->i" on a row of two
 * contiguous operands (sum_of_products_contig_contig_outstride0_two, two lanes wide at numpy's
 * baseline): per lane, blocks of four lane-pairs added innermost first, then the lanes' remaining
 * pairs with zero padding, then lane 0 + lane 1, then added to the zero output.
 *
 * Before each iteration the models checked for re-centring (the previous iteration's, or every
 * model at the first) whose a_max |d| exceeds radius are written to far and the call returns their
 * count without changing anything: the caller re-centres them (numpy, as before) and calls again,
 * which then runs the iteration. A return of 0: the loop ended (act empty, or max_newton
 * iterations; act then holds the models that did not converge).
 *
 * state: [n_act, n_prev (-1 before the first iteration), iterations done].
 */
#include <math.h>
#include <stdint.h>

static inline double np_max(double a, double b) { return (a >= b || isnan(a)) ? a : b; }
static inline double np_min(double a, double b) { return (a <= b || isnan(a)) ? a : b; }

/* numpy's einsum "ij,ij->i" of one row (see the header). */
static double einsum_dot(const double *x, const double *y, int64_t count)
{
    double acc0 = 0.0, acc1 = 0.0;
    for (; count >= 8; count -= 8, x += 8, y += 8) {
        const double p30 = x[6] * y[6], p31 = x[7] * y[7];
        const double p20 = x[4] * y[4], p21 = x[5] * y[5];
        const double p10 = x[2] * y[2], p11 = x[3] * y[3];
        const double p00 = x[0] * y[0], p01 = x[1] * y[1];
        acc0 = p00 + (p10 + (p20 + (p30 + acc0)));
        acc1 = p01 + (p11 + (p21 + (p31 + acc1)));
    }
    for (; count > 0; count -= 2, x += 2, y += 2) {
        const double p0 = x[0] * y[0];
        const double p1 = count > 1 ? x[1] * y[1] : 0.0 * 0.0;
        acc0 = p0 + acc0;
        acc1 = p1 + acc1;
    }
    return 0.0 + (acc0 + acc1);
}

/* dot of each of n rows (for the loader's check against numpy's einsum). */
void map_einsum_rows(int64_t n, int64_t count, const double *x, int64_t ldx, const double *y, int64_t ldy,
                     double *out)
{
    for (int64_t i = 0; i < n; i++) out[i] = einsum_dot(x + i * ldx, y + i * ldy, count);
}

int64_t map_newton(int64_t n, double *theta, double *info, int64_t N, const double *M, const double *sax,
                   const double *theta_r, const double *amax, const double *invfact, int64_t *act, int64_t *prev,
                   int64_t *state, int64_t *far, double *terms, double prior_mean, double inv_var, double cap, double lo,
                   double hi, double tol, double tol5, double radius, int64_t max_newton)
{
    const int64_t K = N - 1;
    int64_t n_act = state[0], n_prev = state[1], it = state[2];
    (void)n;
    while (it < max_newton && n_act > 0) {
        const int64_t *check = n_prev < 0 ? act : prev;
        const int64_t n_check = n_prev < 0 ? n_act : n_prev;
        int64_t n_far = 0;
        for (int64_t k = 0; k < n_check; k++) {
            const int64_t r = check[k];
            const double d = theta[r] - theta_r[r];
            if (amax[r] * fabs(d) > radius) far[n_far++] = r;
        }
        if (n_far) {
            state[0] = n_act; state[1] = n_prev; state[2] = it;
            return n_far;
        }
        int64_t kept = 0;
        for (int64_t k = 0; k < n_act; k++) {
            const int64_t r = act[k];
            const double th = theta[r];
            const double d = th - theta_r[r];
            double p = 1.0;                         /* d^m: 1, then the previous power times d */
            for (int64_t m = 0; m < K; m++) {
                terms[m] = p * invfact[m];
                p = p * d;
            }
            const double *Mr = M + r * N;
            const double e0 = einsum_dot(Mr, terms, K);
            const double h = einsum_dot(Mr + 1, terms, K);
            const double dh = einsum_dot(Mr + 2, terms, K - 1);
            const double g = (sax[r] - e0) - ((th - prior_mean) * inv_var);
            const double hp = h + inv_var;
            const double raw = g / hp;
            const double nw = np_min(np_max(th + np_min(np_max(raw, -cap), cap), lo), hi);
            const double moved = fabs(nw - th);
            theta[r] = nw;
            info[r] = h;
            const int stop = (moved < tol) | ((fabs(dh) * raw * raw < tol5 * hp) & (fabs(raw) < cap)
                                              & (nw > lo) & (nw < hi));
            prev[k] = r;
            if (!stop) act[kept++] = r;
        }
        n_prev = n_act;
        n_act = kept;
        it++;
    }
    state[0] = n_act; state[1] = n_prev; state[2] = it;
    return 0;
}

/* v, v^2, ..., v^n of each of m values (out: m rows of n), each the previous times v:
 * estimators._powers, whose numpy passes multiply in the same order. */
void map_powers(int64_t m, int64_t n, const double *v, double *out)
{
    for (int64_t i = 0; i < m; i++) {
        const double x = v[i];
        double p = x;
        double *o = out + i * n;
        o[0] = p;
        for (int64_t k = 1; k < n; k++) {
            p = p * x;
            o[k] = p;
        }
    }
}

/* The Taylor push's work around numpy's expit and matmul (estimators._MapRun._push), one model a row, the
 * numpy path's operations in its order. map_push_columns: the item's a, b and response x written to column t of
 * A, B and X, a * b to AB (rows ld apart), sax[i] = sax[i] + a * x, and z = a * (theta_r - b) (expit's argument).
 * map_push_moments: M[i, k] = M[i, k] + (deriv[i, k] * a^(k + 1) + 0.0), the powers repeated products (a, then
 * each the previous times a: map_powers), the + 0.0 numpy's sum over the length-one axis (which turns -0.0 into
 * 0.0). */
void map_push_columns(int64_t n, int64_t t, int64_t ld, const double *a, const double *b, const double *x, double *A,
                      double *B, double *X, double *AB, double *sax, const double *theta_r, double *z)
{
    for (int64_t i = 0; i < n; i++) {
        const double ai = a[i], bi = b[i], xi = x[i];
        A[i * ld + t] = ai;
        B[i * ld + t] = bi;
        X[i * ld + t] = xi;
        AB[i * ld + t] = ai * bi;
        sax[i] = sax[i] + ai * xi;
        z[i] = ai * (theta_r[i] - bi);
    }
}

void map_push_moments(int64_t n, int64_t K, const double *deriv, const double *a, double *M)
{
    for (int64_t i = 0; i < n; i++) {
        const double ai = a[i];
        double p = ai;
        for (int64_t k = 0; k < K; k++) {
            M[i * K + k] = M[i * K + k] + (deriv[i * K + k] * p + 0.0);
            p = p * ai;
        }
    }
}

/* _MapRun._recentre's exact pass around numpy's matmul, models rows[i] (n of them, distinct) at theta[i], their first
 * t items (A, AB: rows ld apart).
 * map_recentre_powers: z = a * theta - ab (A * theta[:, None] - AB), s = 1 / (1 + exp(-z)) (scipy's expit: the C
 * library's exp), S[i, j, :] = s, s^2, ..., s^ns (map_powers' products); numpy's matmul then makes deriv = S @ coef.
 * map_recentre_moments: M[rows[i], k] = sum over j of deriv[i, j, k] * a_j^(k + 1) (K columns; the powers map_powers'
 * products, each term one rounded product), summed from 0.0 in item order as numpy's sum over that axis sums
 * (deriv *= powers; deriv.sum(axis=-2)); theta_r[rows[i]] = theta[i]. */
void map_recentre_powers(int64_t n, int64_t t, int64_t ld, const int64_t *rows, const double *theta, const double *A,
                         const double *AB, int64_t ns, double *S)
{
    for (int64_t i = 0; i < n; i++) {
        const double *a = A + rows[i] * ld, *ab = AB + rows[i] * ld;
        const double th = theta[i];
        for (int64_t j = 0; j < t; j++) {
            const double za = a[j] * th;
            const double z = za - ab[j];
            const double s = 1.0 / (1.0 + exp(-z));
            double *o = S + (i * t + j) * ns;
            double p = s;
            o[0] = p;
            for (int64_t k = 1; k < ns; k++) {
                p = p * s;
                o[k] = p;
            }
        }
    }
}

void map_recentre_moments(int64_t n, int64_t t, int64_t ld, int64_t K, const int64_t *rows, const double *theta,
                          const double *deriv, const double *A, double *M, double *theta_r)
{
    for (int64_t i = 0; i < n; i++) {
        const double *a = A + rows[i] * ld;
        double *m = M + rows[i] * K;
        for (int64_t k = 0; k < K; k++) {
            m[k] = 0.0;
        }
        for (int64_t j = 0; j < t; j++) {
            const double aj = a[j];
            const double *d = deriv + (i * t + j) * K;
            double p = aj;
            for (int64_t k = 0; k < K; k++) {
                const double term = d[k] * p;
                m[k] = m[k] + term;
                p = p * aj;
            }
        }
        theta_r[rows[i]] = theta[i];
    }
}
