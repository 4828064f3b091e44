/* Maximum information's cached candidates, ranked four at a time: irtlib.selection.maxinfo_kernel.
 *
 * For every row i, the information ((a * a) * s) * q of its c candidates (ca, cb: row i's c
 * columns) at theta[i], s = 1 / (1 + exp(-z)), q = 1 / (1 + exp(z)), z = a * (theta - b), as
 * irtlib.core.kernels.fisher_information computes it; used candidates excluded; the first largest
 * (numpy's argmax) in k[i] and its value in best[i] (-inf, k 0, when every candidate is used).
 * What best_candidates in _mle_kernel.c returns, bit for bit.
 *
 * A first pass ranks the unused candidates with a^2 e / (1 + e)^2, e = exp(-|z|) computed by
 * exp_rough below (four lanes at a time, no library call): its relative error is below 1e-12
 * for -|z| >= -700 (Taylor polynomial of degree 11 on |r| <= ln 2 / 2: e^r r^12 / 12! < 9e-15, plus
 * the rounding of about twenty operations), so the first-pass value is within a relative 2e-12 of
 * a^2 P (1 - P), and so is the exact value (16 units in the last place). The exact argmax is
 * therefore among the candidates within a relative 1e-9 of the first pass's largest, and only
 * those are evaluated exactly, in column order. A row is evaluated exactly whole when its
 * first-pass largest is below 1e-280 or not a number, or when any unused candidate has
 * -|z| < -700, |a| above 1e100 or a value that is not a number (not a finite ranking).
 * A twin of the best so far (equal a and b) is not evaluated again: its value is the best's, which
 * it cannot replace (numpy's argmax keeps the first). The exact values use the operations of
 * fisher_information in its order (no contraction into
 * fused multiply-adds, exp the C library's), so k and best are numpy's argmax and value.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>


#include "_exact_information.h"

/* exp(x) for -700 <= x <= 0 (lanes outside give garbage; the caller never uses them): x = n ln2 + r,
 * |r| <= ln2 / 2 (ln2 in two parts, Cody and Waite), the Taylor polynomial of degree 11 in r by
 * Estrin's scheme (short dependency chains), times 2^n. */
#define LANES 4
typedef double vd __attribute__((vector_size(8 * LANES)));
typedef int64_t vl __attribute__((vector_size(8 * LANES)));

static inline vd splat(double x)
{
    vd v;
    for (int q = 0; q < LANES; q++)
        v[q] = x;
    return v;
}

static inline vd exp_rough(vd x)
{
    const vd shifter = splat(0x1.8p52);
    vd n = x * splat(0x1.71547652b82fep0);
    n = n + shifter;
    n = n - shifter;                                   /* round to nearest integer */
    vd r = x - n * splat(0x1.62e42fee00000p-1);
    r = r - n * splat(0x1.a39ef35793c76p-33);
    const vd r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
    const vd p01 = splat(1.0) + r;
    const vd p23 = splat(1.0 / 2) + r * splat(1.0 / 6);
    const vd p45 = splat(1.0 / 24) + r * splat(1.0 / 120);
    const vd p67 = splat(1.0 / 720) + r * splat(1.0 / 5040);
    const vd p89 = splat(1.0 / 40320) + r * splat(1.0 / 362880);
    const vd pab = splat(1.0 / 3628800) + r * splat(1.0 / 39916800);
    const vd q0 = p01 + p23 * r2, q1 = p45 + p67 * r2, q2 = p89 + pab * r2;
    const vd p = (q0 + q1 * r4) + q2 * r8;
    const vl bits = (__builtin_convertvector(n, vl) + 1023) << 52;
    vd scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

void best_candidates4(int64_t n, int64_t c, const double *theta, const double *ca, const double *cb,
                      const uint8_t *used, int64_t *k, double *best, double *work)
{
    for (int64_t i = 0; i < n; i++) {
        const double th = theta[i];
        const double *a = ca + i * c, *b = cb + i * c;
        const uint8_t *u = used + i * c;
        double top = -INFINITY, rough = -INFINITY;
        int64_t at = 0, any = 0, wild = 0;
        int64_t j = 0;
        vl live_acc = {0}, wild_acc = {0};
        vd rough_acc = splat(-INFINITY);
        for (; j + LANES <= c; j += LANES) {                  /* no branches: used lanes masked */
            vd av, bv;
            memcpy(&av, a + j, sizeof av);
            memcpy(&bv, b + j, sizeof bv);
            typedef uint8_t vu8 __attribute__((vector_size(LANES)));
            vu8 u8;
            memcpy(&u8, u + j, sizeof u8);
            const vl live = __builtin_convertvector(u8, vl) == 0;    /* all ones where unused */
            const vd z = av * (splat(th) - bv);
            const vd xv = (vd)((vl)z | (vl)splat(-0.0));              /* -|z| */
            const vl inside = xv >= splat(-700.0);                      /* false for NaN too */
            const vd xs = (vd)(((vl)xv & inside) | ((vl)splat(-700.0) & ~inside));
            const vd e = exp_rough(xs);
            const vd d = splat(1.0) + e;
            const vd w = (av * av) * e / (d * d);
            const vl big = (vd)((vl)av & ~(vl)splat(-0.0)) <= splat(1e100);   /* |a| <= 1e100, false for NaN */
            const vd wq = (vd)(((vl)w & live) | ((vl)splat(-INFINITY) & ~live));
            live_acc |= live;
            wild_acc |= live & (~inside | ~big | (w != w));
            memcpy(work + j, &wq, sizeof wq);
            rough_acc = (vd)(((vl)wq & (wq > rough_acc)) | ((vl)rough_acc & ~(wq > rough_acc)));
        }
        for (int q = 0; q < LANES; q++) {
            any |= live_acc[q] != 0;
            wild |= wild_acc[q] != 0;
            rough = rough_acc[q] > rough ? rough_acc[q] : rough;
        }
        for (; j < c; j++) {
            if (u[j]) {
                work[j] = -INFINITY;
                continue;
            }
            any = 1;
            const double aj = a[j];
            const double z = aj * (th - b[j]);
            const double e = exp(-fabs(z));
            const double d = 1.0 + e;
            const double w = (aj * aj) * e / (d * d);
            wild |= !(fabs(aj) <= 1e100) | isnan(w);
            work[j] = w;
            rough = w > rough ? w : rough;
        }
        if (any && !wild && rough > 1e-280 && rough < INFINITY) {
            const double cut = rough * (1.0 - 1e-9);
            for (int64_t jj = 0; jj < c; jj++) {
                if (work[jj] >= cut && !(a[jj] == a[at] && b[jj] == b[at] && top != -INFINITY)) {
                    const double w = exact_information(a[jj], b[jj], th);
                    if (better(w, top)) {
                        top = w;
                        at = jj;
                    }
                }
            }
        }
        else if (any) {
            for (int64_t jj = 0; jj < c; jj++) {
                if (u[jj] || (a[jj] == a[at] && b[jj] == b[at] && top != -INFINITY))
                    continue;
                const double w = exact_information(a[jj], b[jj], th);
                if (better(w, top)) {
                    top = w;
                    at = jj;
                }
            }
        }
        k[i] = at;
        best[i] = top;
    }
}

/* 1 where compiled for AVX2 (four lanes in one instruction): only then is best_candidates4 the faster. */
int64_t maxinfo_vector_width(void)
{
#ifdef __AVX2__
    return 4;
#else
    return 1;
#endif
}
