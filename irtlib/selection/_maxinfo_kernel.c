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
#if defined(__AVX512F__)
#define LANES 8                 /* maxinfo_kernel.AVX512_FLAGS' build: eight lanes a vector */
#else
#define LANES 4
#endif
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

/* The lanes of a vector where compiled for AVX2 (four in one instruction; eight with AVX-512): only then is
 * best_candidates4 the faster. 1 otherwise. */
int64_t maxinfo_vector_width(void)
{
#ifdef __AVX2__
    return LANES;
#else
    return 1;
#endif
}

/* ---------------------------------------------------------------------------------------------------
 * maxinfo_full: maximum information's full pass over the bank for some models, fused (selectors.py,
 * _MaxInfoRun._full). For row i (model m = rows[i], ability theta[i], items j < N with a[m * ld + j],
 * b[m * ld + j], unused[m * N + j]):
 *
 * 1. every unused item's first-pass value w_j = a^2 e / (1 + e)^2, e = exp_rough(-|z|) (relative
 *    error below 2e-12 of the exact information, as in best_candidates4); blocked items -inf;
 * 2. the pick: the exact information (exact_information, numpy's operations) of the unused items
 *    within a relative 1e-9 of the largest w, in column order (a twin of the best so far skipped):
 *    numpy's argmax of fisher_information over the unused items, bit for bit (the argument of
 *    best_candidates4);
 * 3. with cache > 0, the candidates: the cache largest w among the unused items, ties at the cut
 *    lowest column first, listed by column (fewer unused items: all of them, then blocked columns
 *    marked used), written to the model's rows of items, ca, cb, used, ctwin, theta_c;
 * 4. twins (twin labels given and twinned[m]): an unused non-candidate whose label's last candidate
 *    has a lower column is left out of the bound (it cannot be the argmax while that label has an
 *    unused candidate), and the candidates of such labels are marked in guard (selectors.py voids
 *    the bounds when the last of them is used);
 * 5. the bounds: for radius r_l, bound[m, l] >= the exact information, anywhere within r_l of theta,
 *    of every unused non-candidate not left out: log P (1 - P) is 1-Lipschitz in z, so item j gives at
 *    most min(I_j(theta) exp(|a_j| r), a_j^2 / 4). In logs, log I_j(theta) = 2 log|a_j| - |z_j|
 *    - 2 log(1 + e_j), e_j = exp(-|z_j|), and log(1 + e) = 2 atanh(e / (2 + e)) is bounded below by its
 *    series to the ninth power less 1e-11 (the series' terms are all positive; e's relative error,
 *    2e-12, moves the logarithm by less than that), so the value used is above log I_j(theta); the
 *    maximum over items is raised by 1e-9 before exp and the result by a relative 1e-9 (the
 *    rounding of these few operations, of 2 log|a| (loga2, numpy's) and of the exact information's
 *    own evaluation are all below 1e-11). No non-candidate: 0.
 *
 * The bounds only decide when the next full pass comes (the pick at every step is the exact argmax
 * whatever they are, as long as they are not below the truth). A row whose unused items include a
 * NaN value, |a| above 1e100 or -|z| below -700, or whose largest w is not in (1e-280, inf), is left
 * to the caller (wild[i] = 1, nothing written).
 */

static void swap_d(double *x, int64_t i, int64_t j)
{
    const double t = x[i];
    x[i] = x[j];
    x[j] = t;
}

/* The value of rank k (0-based, ascending) of x[0..n), x reordered (no NaN). */
static double select_rank(double *x, int64_t n, int64_t k)
{
    int64_t lo = 0, hi = n - 1;
    while (hi > lo) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (x[mid] < x[lo])
            swap_d(x, mid, lo);
        if (x[hi] < x[lo])
            swap_d(x, hi, lo);
        if (x[hi] < x[mid])
            swap_d(x, hi, mid);
        const double pivot = x[mid];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (x[i] < pivot)
                i++;
            while (x[j] > pivot)
                j--;
            if (i <= j) {
                swap_d(x, i, j);
                i++;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return x[k];
    }
    return x[k];
}

#define BOUND_MARGIN (1.0 + 1e-9)
#define LOG4 1.3862943611198906
#define MAX_FULL_RADII 64
#define HIST_BUCKETS 256

static void full_row(int64_t i, int64_t N, int64_t cache, int64_t n_radii, const int64_t *rows, const double *theta,
                     const double *a, const double *b, const double *loga2, int64_t ld, const int32_t *twin,
                     int64_t ldt, const uint8_t *twinned, const uint8_t *unused, const double *radii, int64_t *pick,
                     uint8_t *wild, int64_t *items, double *ca, double *cb, uint8_t *used, int32_t *ctwin,
                     uint8_t *guard, double *theta_c, double *bound, double *work, double *work2, int64_t *lastc,
                     uint8_t *has)
{
    {
        const int64_t m = rows[i];
        const double th = theta[i];
        const double *pa = a + m * ld, *pb = b + m * ld, *pl = loga2 + m * ld;
        double *ework = work + N;                /* exp(-|z|) of every item */
        const uint8_t *pu = unused + m * N;
        const int32_t *tw = twin ? twin + m * ldt : NULL;
        double rough = -INFINITY;
        int64_t any = 0, bad = 0, j = 0;
        vl live_acc = {0}, wild_acc = {0};
        vd rough_acc = splat(-INFINITY);
        for (; j + LANES <= N; j += LANES) {
            vd av, bv;
            memcpy(&av, pa + j, sizeof av);
            memcpy(&bv, pb + j, sizeof bv);
            typedef uint8_t vu8 __attribute__((vector_size(LANES)));
            vu8 u8;
            memcpy(&u8, pu + j, sizeof u8);
            const vl live = __builtin_convertvector(u8, vl) != 0;      /* all ones where unused */
            const vd z = av * (splat(th) - bv);
            const vd xv = (vd)((vl)z | (vl)splat(-0.0));
            const vl inside = xv >= splat(-700.0);
            const vd xs = (vd)(((vl)xv & inside) | ((vl)splat(-700.0) & ~inside));
            const vd e = exp_rough(xs);
            const vd d = splat(1.0) + e;
            const vd w = (av * av) * e / (d * d);
            const vl big = (vd)((vl)av & ~(vl)splat(-0.0)) <= splat(1e100);
            const vd wq = (vd)(((vl)w & live) | ((vl)splat(-INFINITY) & ~live));
            live_acc |= live;
            wild_acc |= live & (~inside | ~big | (w != w));
            memcpy(work + j, &wq, sizeof wq);
            memcpy(ework + j, &e, sizeof e);
            rough_acc = (vd)(((vl)wq & (wq > rough_acc)) | ((vl)rough_acc & ~(wq > rough_acc)));
        }
        for (int q = 0; q < LANES; q++) {
            any |= live_acc[q] != 0;
            bad |= wild_acc[q] != 0;
            rough = rough_acc[q] > rough ? rough_acc[q] : rough;
        }
        for (; j < N; j++) {
            if (!pu[j]) {
                work[j] = -INFINITY;
                continue;
            }
            any = 1;
            const double aj = pa[j];
            const double z = aj * (th - pb[j]);
            const double x = -fabs(z);
            const double e = exp(x);
            const double d = 1.0 + e;
            const double w = (aj * aj) * e / (d * d);
            bad |= !(fabs(aj) <= 1e100) | isnan(w) | !(x >= -700.0);
            work[j] = w;
            ework[j] = e;
            rough = w > rough ? w : rough;
        }
        if (!any || bad || !(rough > 1e-280 && rough < INFINITY)) {
            wild[i] = 1;
            return;
        }
        wild[i] = 0;
        /* 2. the exact argmax */
        {
            const double cut = rough * (1.0 - 1e-9);
            double top = -INFINITY;
            int64_t at = 0;
            for (int64_t jj = 0; jj < N; jj++) {
                if (work[jj] >= cut && !(pa[jj] == pa[at] && pb[jj] == pb[at] && top != -INFINITY)) {
                    const double w = exact_information(pa[jj], pb[jj], th);
                    if (better(w, top)) {
                        top = w;
                        at = jj;
                    }
                }
            }
            pick[i] = at;
        }
        if (cache <= 0)
            return;
        /* 3. the candidates */
        int64_t *it = items + m * cache;
        double *pca = ca + m * cache, *pcb = cb + m * cache;
        uint8_t *pus = used + m * cache, *pg = guard + m * cache;
        int32_t *pct = ctwin ? ctwin + m * cache : NULL;
        double *pbound = bound + m * (n_radii + 1);
        /* the cut: a histogram of the unused values by their distance below the largest, in sixteenths
         * of an octave (the bits of positive doubles order like their values), then the rank among the
         * items of the buckets down to the one holding the cache-th largest */
        int64_t hist[HIST_BUCKETS] = {0};
        uint64_t top_bits;
        memcpy(&top_bits, &rough, sizeof top_bits);
        int64_t nu = 0;
        for (int64_t jj = 0; jj < N; jj++) {
            if (pu[jj]) {
                uint64_t wb;
                memcpy(&wb, work + jj, sizeof wb);
                const uint64_t d = (top_bits - wb) >> 48;
                hist[d < HIST_BUCKETS - 1 ? d : HIST_BUCKETS - 1]++;
                nu++;
            }
        }
        int64_t s = 0;
        if (nu <= cache) {
            for (int64_t jj = 0; jj < N && s < cache; jj++)
                if (pu[jj]) {
                    it[s] = jj;
                    pus[s++] = 0;
                }
            for (int64_t jj = 0; jj < N && s < cache; jj++)
                if (!pu[jj]) {
                    it[s] = jj;
                    pus[s++] = 1;
                }
        }
        else {
            uint64_t last = 0;
            for (int64_t cum = 0; last < HIST_BUCKETS; last++) {
                cum += hist[last];
                if (cum >= cache)
                    break;
            }
            int64_t *idx = lastc + N, cnt = 0;
            for (int64_t jj = 0; jj < N; jj++) {
                if (pu[jj]) {
                    uint64_t wb;
                    memcpy(&wb, work + jj, sizeof wb);
                    if (((top_bits - wb) >> 48) <= last || last >= HIST_BUCKETS - 1) {
                        idx[cnt] = jj;
                        work2[cnt++] = work[jj];
                    }
                }
            }
            const double thr = select_rank(work2, cnt, cnt - cache);
            int64_t above = 0;
            for (int64_t t = 0; t < cnt; t++)
                above += work[idx[t]] > thr;
            int64_t ties = cache - above;
            for (int64_t t = 0; t < cnt; t++) {
                const int64_t jj = idx[t];
                const double w = work[jj];
                if (w > thr || (w == thr && ties > 0)) {
                    if (w == thr)
                        ties--;
                    it[s] = jj;
                    pus[s++] = 0;
                    work[jj] = NAN;          /* a candidate: not in the bound */
                }
            }
        }
        for (int64_t t = 0; t < cache; t++) {
            const int64_t jj = it[t];
            pca[t] = pa[jj];
            pcb[t] = pb[jj];
            if (pct)
                pct[t] = tw[jj];
            pg[t] = 0;
        }
        theta_c[m] = th;
        for (int64_t l = 0; l < n_radii; l++)
            pbound[l] = 0.0;
        if (nu <= cache)
            return;
        /* 4. twins: non-candidates after their label's last candidate are left out of the bound */
        const int use_twins = tw != NULL && twinned != NULL && twinned[m];
        if (use_twins) {
            for (int64_t t = 0; t < cache; t++)
                lastc[tw[it[t]]] = it[t];           /* listed by column: the last write is the last */
            for (int64_t jj = 0; jj < N; jj++) {
                if (pu[jj] && !isnan(work[jj])) {
                    const int64_t last = lastc[tw[jj]];
                    if (last >= 0 && jj > last) {
                        work[jj] = NAN;
                        has[tw[jj]] = 1;
                    }
                }
            }
            for (int64_t t = 0; t < cache; t++)
                pg[t] = has[tw[it[t]]];
            for (int64_t t = 0; t < cache; t++) {
                lastc[tw[it[t]]] = -1;
                has[tw[it[t]]] = 0;
            }
        }
        /* 5. the bounds over the unused non-candidates left (work neither NaN nor -inf), in logs:
         * log w_j <= 2 log|a_j| - |z_j| - 2 log(1 + e_j), log(1 + e) = 2 atanh(s), s = e / (2 + e) <= 1/3, bounded
         * below by its series to s^9 (every term positive); + |a_j| r, capped by 2 log|a_j| - log 4. */
        vd top[MAX_FULL_RADII];
        for (int64_t l = 0; l < n_radii; l++)
            top[l] = splat(-INFINITY);
        int64_t jj = 0;
        for (; jj + LANES <= N; jj += LANES) {
            vd w, e, av, lv, bv;
            memcpy(&w, work + jj, sizeof w);
            memcpy(&e, ework + jj, sizeof e);
            memcpy(&av, pa + jj, sizeof av);
            memcpy(&bv, pb + jj, sizeof bv);
            memcpy(&lv, pl + jj, sizeof lv);
            const vl live = w > splat(-INFINITY);                      /* false for NaN */
            const vd z = av * (splat(th) - bv);
            const vd absa = (vd)((vl)av & ~(vl)splat(-0.0));
            const vd absz = (vd)((vl)z & ~(vl)splat(-0.0));
            const vd sv = e / (splat(2.0) + e), s2 = sv * sv;
            const vd series = splat(2.0) * sv * (splat(1.0) + s2 * (splat(1.0 / 3) + s2 * (splat(1.0 / 5)
                              + s2 * (splat(1.0 / 7) + s2 * splat(1.0 / 9)))));
            const vd logw = lv - absz - splat(2.0) * (series - splat(1e-11));
            const vd cap = lv - splat(LOG4);
            for (int64_t l = 0; l < n_radii; l++) {
                vd u = logw + absa * splat(radii[l]);
                u = (vd)(((vl)u & (u < cap)) | ((vl)cap & ~(u < cap)));
                u = (vd)(((vl)u & live) | ((vl)splat(-INFINITY) & ~live));
                top[l] = (vd)(((vl)u & (u > top[l])) | ((vl)top[l] & ~(u > top[l])));
            }
        }
        for (int64_t l = 0; l < n_radii; l++) {
            double t = -INFINITY;
            for (int q = 0; q < LANES; q++)
                t = top[l][q] > t ? top[l][q] : t;
            pbound[l] = t;
        }
        for (; jj < N; jj++) {
            if (!(work[jj] > -INFINITY))
                continue;
            const double aj = fabs(pa[jj]), e = ework[jj];
            const double z = fabs(pa[jj] * (th - pb[jj]));
            const double sv = e / (2.0 + e), s2 = sv * sv;
            const double series = 2.0 * sv * (1.0 + s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7 + s2 * (1.0 / 9)))));
            const double logw = pl[jj] - z - 2.0 * (series - 1e-11);
            const double cap = pl[jj] - LOG4;
            for (int64_t l = 0; l < n_radii; l++) {
                double u = logw + aj * radii[l];
                u = u < cap ? u : cap;
                pbound[l] = u > pbound[l] ? u : pbound[l];
            }
        }
        for (int64_t l = 0; l < n_radii; l++)
            pbound[l] = exp(pbound[l] + 1e-9) * BOUND_MARGIN;
    }
}

/* A used candidate whose label's non-candidates were left out of the bound (guard) and which was the label's
 * last unused candidate: the row's bounds are voided (selectors.py, _MaxInfoRun._unguard). */
static void unguard(int64_t m, int64_t slot, int64_t cache, int64_t n_radii, const uint8_t *used, const int32_t *ctwin,
                    const uint8_t *guard, double *bound)
{
    if (ctwin == NULL || !guard[m * cache + slot])
        return;
    const int32_t lab = ctwin[m * cache + slot];
    for (int64_t t = 0; t < cache; t++)
        if (ctwin[m * cache + t] == lab && !used[m * cache + t])
            return;
    for (int64_t l = 0; l <= n_radii; l++)
        bound[m * (n_radii + 1) + l] = INFINITY;
}

/* full_row for rows[0..n); with left given, each row's pick (wild rows excepted) is then marked as given:
 * unused[m, pick] = 0, left[m] - 1, its candidate slot used (and unguard). */
void maxinfo_full(int64_t n, int64_t N, int64_t cache, int64_t n_radii, const int64_t *rows, const double *theta,
                  const double *a, const double *b, const double *loga2, int64_t ld, const int32_t *twin, int64_t ldt,
                  const uint8_t *twinned, uint8_t *unused, const double *radii, int64_t *pick, uint8_t *wild,
                  int64_t *items, double *ca, double *cb, uint8_t *used, int32_t *ctwin, uint8_t *guard,
                  double *theta_c, double *bound, double *work, double *work2, int64_t *lastc, uint8_t *has,
                  int64_t *left)
{
    /* lastc (N, -1) and has (N, 0) on entry and on return: per twin label */
    for (int64_t i = 0; i < n; i++) {
        full_row(i, N, cache, n_radii, rows, theta, a, b, loga2, ld, twin, ldt, twinned, unused, radii, pick, wild,
                 items, ca, cb, used, ctwin, guard, theta_c, bound, work, work2, lastc, has);
        if (left == NULL || wild[i])
            continue;
        const int64_t m = rows[i], at = pick[i];
        unused[m * N + at] = 0;
        left[m]--;
        for (int64_t t = 0; t < cache; t++) {
            if (items[m * cache + t] == at) {
                used[m * cache + t] = 1;
                unguard(m, t, cache, n_radii, used, ctwin, guard, bound);
                break;
            }
        }
    }
}

/* One step of maximum information for the rows with live[m]: the best unused candidate (best_candidates4: numpy's
 * argmax of the exact information, and its value), the bound of the radius searchsorted(radii, |theta -
 * theta_c|) (numpy's side "left"; past the last radius, or not a number, the +inf column); where the candidate's
 * value is above it, it is the pick: out[m], marked as given as in maxinfo_full. Other live rows are listed in
 * pending (their count returned), out -1 everywhere else. */
int64_t maxinfo_step(int64_t n, int64_t N, int64_t cache, int64_t n_radii, const double *theta, const uint8_t *live,
                     const double *radii, const int64_t *items, const double *ca, const double *cb, uint8_t *used,
                     const int32_t *ctwin, const uint8_t *guard, const double *theta_c, double *bound,
                     uint8_t *unused, int64_t *left, int64_t *out, int64_t *pending, double *work)
{
    int64_t n_pending = 0;
    for (int64_t m = 0; m < n; m++) {
        out[m] = -1;
        if (!live[m])
            continue;
        const double th = theta[m], d = fabs(th - theta_c[m]);
        int64_t level = 0;
        while (level < n_radii && !(radii[level] >= d))
            level++;
        int64_t k;
        double low;
        best_candidates4(1, cache, theta + m, ca + m * cache, cb + m * cache, used + m * cache, &k, &low, work);
        if (low > bound[m * (n_radii + 1) + level]) {
            const int64_t at = items[m * cache + k];
            out[m] = at;
            used[m * cache + k] = 1;
            unused[m * N + at] = 0;
            left[m]--;
            unguard(m, k, cache, n_radii, used, ctwin, guard, bound);
        }
        else
            pending[n_pending++] = m;
    }
    return n_pending;
}
