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

/* The first pass's information of LANES candidates at th: a^2 e / (1 + e)^2, e = exp_rough(-|z|), z = a (th - b),
 * with -|z| clamped at -700 (inside: the lanes not clamped); z, e and d = 1 + e are returned for the callers' own
 * uses. */
static inline vd rough_information(vd av, vd bv, double th, vd *z, vl *inside, vd *e, vd *d)
{
    *z = av * (splat(th) - bv);
    const vd xv = (vd)((vl)*z | (vl)splat(-0.0));
    *inside = xv >= splat(-700.0);
    const vd xs = (vd)(((vl)xv & *inside) | ((vl)splat(-700.0) & ~*inside));
    *e = exp_rough(xs);
    *d = splat(1.0) + *e;
    return (av * av) * *e / (*d * *d);
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
 *    of every unused non-candidate not left out: log P (1 - P) is concave in z (its second derivative
 *    is -2 P (1 - P)) with derivative 1 - 2 P, so within r of theta it lies below its tangent at theta:
 *    item j gives at most min(I_j(theta) exp(g_j |a_j| r), a_j^2 / 4), g_j = |1 - 2 P_j| = (1 - e_j) /
 *    (1 + e_j) (below 1: an item near its peak moves little). g_j |a_j| is taken from e_j plus
 *    |a_j| 1e-11 (e's relative error, 2e-12, moves g by less than 1e-11). In logs,
 *    log I_j(theta) = 2 log|a_j| - |z_j| - 2 log(1 + e_j), e_j = exp(-|z_j|), and
 *    log(1 + e) = 2 atanh(e / (2 + e)) is bounded below by its
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
                     uint8_t *has, const int64_t *bankrow)
{
    {
        const int64_t m = rows[i];
        const int64_t mb = bankrow ? bankrow[m] : m;   /* the model's row of a, b, loga2 and twin */
        const double th = theta[i];
        const double *pa = a + mb * ld, *pb = b + mb * ld, *pl = loga2 + mb * ld;
        double *ework = work + N;                /* exp(-|z|) of every item */
        const uint8_t *pu = unused + m * N;
        const int32_t *tw = twin ? twin + mb * ldt : NULL;
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
            vd z, e, d;
            vl inside;
            const vd w = rough_information(av, bv, th, &z, &inside, &e, &d);
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
         * below by its series to s^9 (every term positive); + the slope |a_j| |1 - 2 P_j| (+ |a_j| 1e-11) times r,
         * capped by 2 log|a_j| - log 4. */
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
            /* the slope of log I in theta: |a| |1 - 2 P| = |a| (1 - e) / (1 + e), plus |a| 1e-11 for its rounding */
            const vd slope = absa * ((splat(1.0) - e) / (splat(1.0) + e)) + absa * splat(1e-11);
            const vd absz = (vd)((vl)z & ~(vl)splat(-0.0));
            const vd sv = e / (splat(2.0) + e), s2 = sv * sv;
            const vd series = splat(2.0) * sv * (splat(1.0) + s2 * (splat(1.0 / 3) + s2 * (splat(1.0 / 5)
                              + s2 * (splat(1.0 / 7) + s2 * splat(1.0 / 9)))));
            const vd logw = lv - absz - splat(2.0) * (series - splat(1e-11));
            const vd cap = lv - splat(LOG4);
            for (int64_t l = 0; l < n_radii; l++) {
                vd u = logw + slope * splat(radii[l]);
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
            const double slope = aj * ((1.0 - e) / (1.0 + e)) + aj * 1e-11;
            const double z = fabs(pa[jj] * (th - pb[jj]));
            const double sv = e / (2.0 + e), s2 = sv * sv;
            const double series = 2.0 * sv * (1.0 + s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7 + s2 * (1.0 / 9)))));
            const double logw = pl[jj] - z - 2.0 * (series - 1e-11);
            const double cap = pl[jj] - LOG4;
            for (int64_t l = 0; l < n_radii; l++) {
                double u = logw + slope * radii[l];
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
 * unused[m, pick] = 0, left[m] - 1, its candidate slot used (and unguard). bankrow (NULL: m): model m's row of a,
 * b, loga2 and twin (models with equal banks share one row: less memory streamed). */
static void full_rows(int64_t n, int64_t N, int64_t cache, int64_t n_radii, const int64_t *rows, const double *theta,
                      const double *a, const double *b, const double *loga2, int64_t ld, const int32_t *twin,
                      int64_t ldt, const uint8_t *twinned, uint8_t *unused, const double *radii, int64_t *pick,
                      uint8_t *wild, int64_t *items, double *ca, double *cb, uint8_t *used, int32_t *ctwin,
                      uint8_t *guard, double *theta_c, double *bound, double *work, double *work2, int64_t *lastc,
                      uint8_t *has, int64_t *left, const int64_t *bankrow)
{
    /* lastc (N, -1) and has (N, 0) on entry and on return: per twin label */
    for (int64_t i = 0; i < n; i++) {
        full_row(i, N, cache, n_radii, rows, theta, a, b, loga2, ld, twin, ldt, twinned, unused, radii, pick, wild,
                 items, ca, cb, used, ctwin, guard, theta_c, bound, work, work2, lastc, has, bankrow);
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

void maxinfo_full(int64_t n, int64_t N, int64_t cache, int64_t n_radii, const int64_t *rows, const double *theta,
                  const double *a, const double *b, const double *loga2, int64_t ld, const int32_t *twin, int64_t ldt,
                  const uint8_t *twinned, uint8_t *unused, const double *radii, int64_t *pick, uint8_t *wild,
                  int64_t *items, double *ca, double *cb, uint8_t *used, int32_t *ctwin, uint8_t *guard,
                  double *theta_c, double *bound, double *work, double *work2, int64_t *lastc, uint8_t *has,
                  int64_t *left)
{
    full_rows(n, N, cache, n_radii, rows, theta, a, b, loga2, ld, twin, ldt, twinned, unused, radii, pick, wild, items,
              ca, cb, used, ctwin, guard, theta_c, bound, work, work2, lastc, has, left, NULL);
}

/* maxinfo_full with each model's bank row given (bankrow[m]: its row of a, b, loga2 and twin). */
void maxinfo_full_mapped(int64_t n, int64_t N, int64_t cache, int64_t n_radii, const int64_t *rows,
                         const double *theta, const double *a, const double *b, const double *loga2, int64_t ld,
                         const int32_t *twin, int64_t ldt, const uint8_t *twinned, uint8_t *unused,
                         const double *radii, int64_t *pick, uint8_t *wild, int64_t *items, double *ca, double *cb,
                         uint8_t *used, int32_t *ctwin, uint8_t *guard, double *theta_c, double *bound, double *work,
                         double *work2, int64_t *lastc, uint8_t *has, int64_t *left, const int64_t *bankrow)
{
    full_rows(n, N, cache, n_radii, rows, theta, a, b, loga2, ld, twin, ldt, twinned, unused, radii, pick, wild, items,
              ca, cb, used, ctwin, guard, theta_c, bound, work, work2, lastc, has, left, bankrow);
}

/* The radius level of row m: searchsorted(radii, |theta - theta_c|), numpy's side "left" (n_radii past the last
 * radius or where the distance is not a number). */
static inline int64_t radius_level(int64_t n_radii, const double *radii, double th, double centre)
{
    const double d = fabs(th - centre);
    int64_t level = 0;
    while (level < n_radii && !(radii[level] >= d))
        level++;
    return level;
}

/* Row m's candidate k as the step's pick: out[m], marked as given as in maxinfo_full. */
static inline void take_pick(int64_t m, int64_t k, int64_t N, int64_t cache, int64_t n_radii, const int64_t *items,
                             uint8_t *used, const int32_t *ctwin, const uint8_t *guard, double *bound, uint8_t *unused,
                             int64_t *left, int64_t *out)
{
    const int64_t at = items[m * cache + k];
    out[m] = at;
    used[m * cache + k] = 1;
    unused[m * N + at] = 0;
    left[m]--;
    unguard(m, k, cache, n_radii, used, ctwin, guard, bound);
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
        const int64_t level = radius_level(n_radii, radii, theta[m], theta_c[m]);
        int64_t k;
        double low;
        best_candidates4(1, cache, theta + m, ca + m * cache, cb + m * cache, used + m * cache, &k, &low, work);
        if (low > bound[m * (n_radii + 1) + level])
            take_pick(m, k, N, cache, n_radii, items, used, ctwin, guard, bound, unused, left, out);
        else
            pending[n_pending++] = m;
    }
    return n_pending;
}

/* ---------------------------------------------------------------------------------------------------
 * maxinfo_step_sorted: maxinfo_step with the candidates ranked once per full pass, so that a step evaluates
 * exactly only the few candidates that can still be the largest (the same pick and value, bit for bit).
 *
 * When a row's candidates are new (cready[m] = 0: the caller zeroes it whenever a full pass rebuilds them), its
 * first RANK_AFTER steps scan them whole (best_candidates4). At the next, the step computes every candidate's
 * first-pass value w_t at the candidates' centre theta_c[m] (as best_candidates4's first pass: within a relative
 * 2e-12 of the exact information there) and the slope s_t = a_t (1 - 2 P_t) of its log-information there; it
 * sorts the slots into RANK_GROUPS groups by slope (edges -1, -0.5, -0.2, 0, 0.2, 0.5, 1), each by w decreasing
 * (ties by slot), and keeps the slots in corder, their w and s in cw and cs, and each group's first rank and
 * smallest and largest slope in cm (RANK_META values a row); the largest |a| in camax; cready = RANKED. A row
 * whose values are not all numbers in (1e-280, inf) with -|z| >= -700 and |a| <= 1e100 is UNRANKABLE and left to
 * best_candidates4 (as are abilities more than 1 / camax from the centre, or not numbers).
 *
 * The bounds. log P (1 - P) is concave in z = a (theta - b) (its second derivative is -2 P (1 - P)) with
 * derivative 1 - 2 P, of modulus below 1. So at theta, with D = theta - theta_c, candidate t's exact
 * information is at most w_t (1 + 2e-12) exp(s_t D) (the tangent), with |s_t D| <= |a_t D| <= camax |D|; and
 * exp(y) <= 1 + y + y^2 for |y| <= 1 (for 0 <= y the series' tail is below y^2 (e - 5/2); for y < 0 it
 * alternates in terms decreasing from y^2 / 2). A group's slots have s D at most Y = max(s_min D, s_max D).
 * The scan takes the groups in decreasing order of their first slot's bound, each slot by slot, and keeps the
 * exact argmax so far (exact_information; the first slot among equal values, whatever the order in which they
 * come: numpy's argmax in slot order, which is column order among unused candidates). In a group it stops at
 * the first slot whose w (1 + Y + Y^2) (1 + 1e-9) is below the best so far (the group's later slots have smaller
 * w: none can reach it), and skips a slot whose own w (1 + y + y^2) (1 + 1e-9), y = s_t D, is below it; a twin of
 * the best (equal a and b) takes the best's value without an evaluation. The margin 1e-9 covers the first
 * pass's error (that of s moves y by less than 1e-11 since |a_t D| <= 1), the rounding of D, y and the bounds,
 * and that of the exact values (all below 1e-11). Slots with w below 1e-280 (where relative errors do not hold)
 * are never skipped. An exact value that is not a number sends the row to best_candidates4 (numpy's argmax
 * takes the first NaN).
 * ------------------------------------------------------------------------------------------------- */

#define SORT_TINY 1e-280
#define SORT_MARGIN (1.0 + 1e-9)
#define RANK_GROUPS 8
#define RANK_META (3 * RANK_GROUPS + 1)   /* per row: RANK_GROUPS + 1 group starts, the slopes' minima and maxima */
/* cready: 0 .. RANK_AFTER - 1 the steps the candidates have been scanned whole (the ranking, a sort, pays only
 * when they last: a row's first steps after a full pass often move its ability past every radius), then RANKED or
 * UNRANKABLE */
#define RANK_AFTER 8
#define RANKED (RANK_AFTER + 1)
#define UNRANKABLE (RANK_AFTER + 2)

static const double rank_edges[RANK_GROUPS - 1] = {-1.0, -0.5, -0.2, 0.0, 0.2, 0.5, 1.0};

/* cm's values per row (maxinfo_kernel.FullPass sizes the array with it). */
int64_t maxinfo_rank_meta(void)
{
    return RANK_META;
}

/* Descending by value, ties by slot: a heap sort of (value, slot) pairs (no allocation, no recursion). */
static int pair_before(double v1, int64_t s1, double v2, int64_t s2)
{
    return v1 > v2 || (v1 == v2 && s1 < s2);
}

static void sift_down(double *v, int64_t *s, int64_t root, int64_t n)
{
    for (;;) {
        int64_t child = 2 * root + 1;
        if (child >= n)
            return;
        /* the heap's root is the last pair in the descending order */
        if (child + 1 < n && pair_before(v[child], s[child], v[child + 1], s[child + 1]))
            child++;
        if (!pair_before(v[root], s[root], v[child], s[child]))
            return;
        const double tv = v[root];
        const int64_t ts = s[root];
        v[root] = v[child];
        s[root] = s[child];
        v[child] = tv;
        s[child] = ts;
        root = child;
    }
}

static void sort_descending(double *v, int64_t *s, int64_t n)
{
    for (int64_t i = n / 2 - 1; i >= 0; i--)
        sift_down(v, s, i, n);
    for (int64_t end = n - 1; end > 0; end--) {
        const double tv = v[0];
        const int64_t ts = s[0];
        v[0] = v[end];
        s[0] = s[end];
        v[end] = tv;
        s[end] = ts;
        sift_down(v, s, 0, end);
    }
}

static int slope_group(double slope)
{
    int g = 0;
    while (g < RANK_GROUPS - 1 && slope > rank_edges[g])
        g++;
    return g;
}

/* Rank a row's candidates at th = theta_c (see above); work: 3 cache values of scratch. 1 when ranked, 0 when
 * the row is left to best_candidates4. */
static uint8_t rank_candidates(int64_t cache, double th, const double *a, const double *b, double *cw, double *cs,
                               double *cm, int64_t *corder, double *camax, double *work)
{
    if (!(fabs(th) < INFINITY))
        return 0;
    double *slope = work, *wv_sorted = work + cache;
    int64_t *order = (int64_t *)(work + 2 * cache);
    int64_t j = 0;
    for (; j + LANES <= cache; j += LANES) {
        vd av, bv;
        memcpy(&av, a + j, sizeof av);
        memcpy(&bv, b + j, sizeof bv);
        vd z, e, d;
        vl inside;
        const vd w = rough_information(av, bv, th, &z, &inside, &e, &d);
        const vd g = (splat(1.0) - e) / d;                                  /* |1 - 2 P| */
        const vd sl = (vd)((vl)(av * g) ^ (~(vl)z & (vl)splat(-0.0)));     /* a (1 - 2 P): negated for z >= 0 */
        memcpy(wv_sorted + j, &w, sizeof w);
        memcpy(slope + j, &sl, sizeof sl);
        for (int q = 0; q < LANES; q++)
            if (!inside[q])
                return 0;
    }
    for (; j < cache; j++) {
        const double aj = a[j];
        const double z = aj * (th - b[j]);
        const double x = -fabs(z);
        if (!(x >= -700.0))
            return 0;
        const double e = exp(x);
        const double d = 1.0 + e;
        wv_sorted[j] = (aj * aj) * e / (d * d);
        const double g = (1.0 - e) / d;
        slope[j] = z >= 0 ? -(aj * g) : aj * g;
    }
    double amax = 0.0;
    for (int64_t t = 0; t < cache; t++) {
        const double aa = fabs(a[t]);
        if (!(aa <= 1e100) || !(wv_sorted[t] > SORT_TINY && wv_sorted[t] < INFINITY) || isnan(slope[t]))
            return 0;
        amax = aa > amax ? aa : amax;
        order[t] = t;
    }
    sort_descending(wv_sorted, order, cache);
    /* the groups: counted, then filled in the sorted order (each group by w decreasing) */
    int64_t start[RANK_GROUPS + 1] = {0};
    double smin[RANK_GROUPS], smax[RANK_GROUPS];
    for (int g = 0; g < RANK_GROUPS; g++) {
        smin[g] = INFINITY;
        smax[g] = -INFINITY;
    }
    for (int64_t r = 0; r < cache; r++) {
        const double sl = slope[order[r]];
        const int g = slope_group(sl);
        start[g + 1]++;
        smin[g] = sl < smin[g] ? sl : smin[g];
        smax[g] = sl > smax[g] ? sl : smax[g];
    }
    for (int g = 0; g < RANK_GROUPS; g++)
        start[g + 1] += start[g];
    int64_t fill[RANK_GROUPS];
    for (int g = 0; g < RANK_GROUPS; g++)
        fill[g] = start[g];
    for (int64_t r = 0; r < cache; r++) {
        const int64_t t = order[r];
        const int64_t at = fill[slope_group(slope[t])]++;
        corder[at] = t;
        cw[at] = wv_sorted[r];
        cs[at] = slope[t];
    }
    for (int g = 0; g <= RANK_GROUPS; g++)
        cm[g] = (double)start[g];
    for (int g = 0; g < RANK_GROUPS; g++) {
        cm[RANK_GROUPS + 1 + g] = smin[g];
        cm[2 * RANK_GROUPS + 1 + g] = smax[g];
    }
    *camax = amax;
    return 1;
}

/* The exact argmax of a row's unused candidates at th (D = th - theta_c) by the ranked scan; returns 0 when the
 * row must be left to best_candidates4 (and writes nothing). The used slots a group's scan passes are dropped from
 * the group (a slot stays used until the next full pass, which ranks the candidates again): the group's unused
 * slots scanned are moved, in their order, up to where the scan stopped, and the group starts after the gap. */
static int ranked_best(double th, double D, const double *a, const double *b, const uint8_t *used, double *cw,
                       double *cs, double *cm, int64_t *corder, double amax, int64_t *k, double *best)
{
    const double X = amax * fabs(D);
    if (!(X <= 1.0))
        return 0;
    /* each group's factor (1 + Y + Y^2) (1 + 1e-9), and the groups by their first slot's bound, decreasing */
    double reach[RANK_GROUPS], head[RANK_GROUPS];
    int group[RANK_GROUPS], n_groups = 0;
    for (int g = 0; g < RANK_GROUPS; g++) {
        const int64_t lo = (int64_t)cm[g], hi = (int64_t)cm[g + 1];
        if (lo == hi)
            continue;
        const double y1 = cm[RANK_GROUPS + 1 + g] * D, y2 = cm[2 * RANK_GROUPS + 1 + g] * D;
        const double Y = y1 > y2 ? y1 : y2;
        reach[g] = (1.0 + Y + Y * Y) * SORT_MARGIN;
        head[g] = cw[lo] * reach[g];
        int i = n_groups++;
        while (i > 0 && head[group[i - 1]] < head[g]) {
            group[i] = group[i - 1];
            i--;
        }
        group[i] = g;
    }
    double top = -INFINITY;
    int64_t at = 0;
    for (int i = 0; i < n_groups; i++) {
        const int g = group[i];
        const int64_t lo = (int64_t)cm[g], hi = (int64_t)cm[g + 1];
        const double rg = reach[g];
        int64_t r = lo, n_used = 0;
        for (; r < hi; r++) {
            const double w = cw[r];
            const int64_t s = corder[r];
            if (used[s]) {
                n_used++;
                continue;
            }
            if (w >= SORT_TINY) {
                if (w * rg < top)
                    break;
                const double y = cs[r] * D;
                if (w * ((1.0 + y + y * y) * SORT_MARGIN) < top)
                    continue;
            }
            if (top != -INFINITY && a[s] == a[at] && b[s] == b[at]) {      /* a twin of the best: its value */
                at = s < at ? s : at;
                continue;
            }
            const double v = exact_information(a[s], b[s], th);
            if (isnan(v))
                return 0;
            if (v > top || (v == top && s < at)) {
                top = v;
                at = s;
            }
        }
        if (n_used) {                           /* drop the used slots scanned: the unused ones moved up to r */
            int64_t put = r;
            for (int64_t q = r - 1; q >= lo; q--) {
                if (!used[corder[q]]) {
                    put--;
                    cw[put] = cw[q];
                    cs[put] = cs[q];
                    corder[put] = corder[q];
                }
            }
            cm[g] = (double)put;
        }
    }
    *k = at;
    *best = top;
    return 1;
}

/* maxinfo_step (the same arguments, then the ranking's state: cw, cs and corder a row of cache per model, cm a
 * row of RANK_META, camax and cready one per model; work now 3 cache values), the candidates evaluated by the
 * ranked scan: the same out, pending and marks. */
int64_t maxinfo_step_sorted(int64_t n, int64_t N, int64_t cache, int64_t n_radii, const double *theta,
                            const uint8_t *live, const double *radii, const int64_t *items, const double *ca,
                            const double *cb, uint8_t *used, const int32_t *ctwin, const uint8_t *guard,
                            const double *theta_c, double *bound, uint8_t *unused, int64_t *left, int64_t *out,
                            int64_t *pending, double *work, double *cw, double *cs, double *cm, int64_t *corder,
                            double *camax, uint8_t *cready)
{
    int64_t n_pending = 0;
    for (int64_t m = 0; m < n; m++) {
        out[m] = -1;
        if (!live[m])
            continue;
        const double th = theta[m];
        const int64_t level = radius_level(n_radii, radii, th, theta_c[m]);
        /* a bound of +inf (past every radius, or voided): no candidate can be the pick (maxinfo_step's compare) */
        if (!(bound[m * (n_radii + 1) + level] < INFINITY)) {
            pending[n_pending++] = m;
            continue;
        }
        const double *pa = ca + m * cache, *pb = cb + m * cache;
        uint8_t *pu = used + m * cache;
        double *pw = cw + m * cache, *ps = cs + m * cache, *pm = cm + m * RANK_META;
        int64_t *po = corder + m * cache;
        int64_t k;
        double low;
        if (cready[m] < RANK_AFTER) {           /* new candidates: the full scan for their first steps */
            cready[m]++;
            best_candidates4(1, cache, theta + m, pa, pb, pu, &k, &low, work);
        }
        else {
            if (cready[m] == RANK_AFTER)
                cready[m] = rank_candidates(cache, theta_c[m], pa, pb, pw, ps, pm, po, camax + m, work) ? RANKED
                                                                                                       : UNRANKABLE;
            if (cready[m] != RANKED || !ranked_best(th, th - theta_c[m], pa, pb, pu, pw, ps, pm, po, camax[m], &k,
                                                    &low))
                best_candidates4(1, cache, theta + m, pa, pb, pu, &k, &low, work);
        }
        if (low > bound[m * (n_radii + 1) + level])
            take_pick(m, k, N, cache, n_radii, items, used, ctwin, guard, bound, unused, left, out);
        else
            pending[n_pending++] = m;
    }
    return n_pending;
}
