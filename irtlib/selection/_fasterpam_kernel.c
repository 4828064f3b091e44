/* FasterPAM (Schubert and Rousseeuw), step for step as the kmedoids package (0.5.5) runs it on float64 distances.
 *
 * The same medoids, labels, loss, iterations and swaps as the package's rand_fasterpam / fasterpam, bit for
 * bit: every comparison is the package's (strict <, the first of equals), every sum is accumulated in the
 * package's order (one rounded subtraction, then one rounded addition), the element read is the one the
 * package reads (D[o, j] is the distance at row o, column j, here at D + o * so + j * sj: the matrix need not
 * be symmetric). irtlib/selection/fasterpam.py compares it with the package's extension before using it.
 *
 * Per point o: its nearest medoid (index c into med, distance nd) and its second nearest (sd). The swap search
 * (find_best_swaps) takes a few candidates at once, one in each lane of a vector, each against the same state as
 * in the package; after a swap, the batch's later candidates are looked at again (swap_loop). For k of 8 or more,
 * every point's distances to the medoids are also kept row by row (dm), for the second-nearest search after a swap.
 * do_swap looks at four points at a time and goes point by point only where one of them changes; the loss it
 * returns in the package (the sum of the nearest distances) is taken where the package reads it, at a pass's end.
 * Where the lanes' work could be split (the swap search's find_min, the second-nearest search), it runs in several
 * independent chains, merged by the package's rule (the least value, the lowest index among equals).
 *
 * Compiled with -ffp-contract=off (no fused multiply-add) and without -ffast-math; with AVX2 (its column reads
 * transposed four by four) and, where the processor has it, with AVX-512 (F, VL, DQ, BW: the same four-lane
 * vectors, with mask registers and 32 vector registers): each lane's operations are the same, so the same bits.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX2__)
#include <immintrin.h>
#define TRANSPOSED 1                                /* the swap search's columns read four rows at a time */
#endif

#define LANES 4
typedef double vd __attribute__((vector_size(8 * LANES)));
typedef int64_t vi __attribute__((vector_size(8 * LANES)));

typedef struct {
    int64_t n, k, so, sj;
    const double *D;
    double *dm;                                     /* NULL, or dm[o * k + m] = D[o, med[m]] (kept up to date) */
    int64_t dm_rows;                                /* rows of dm written by initial_assignment */
    int64_t *med;
    int32_t *near_i, *seco_i;
    double *near_d, *seco_d, *removal, *ploss;
} pam_t;

#define AT(P, o, j) ((P)->D[(o) * (P)->so + (j) * (P)->sj])

/* the package's initial_assignment; returns the loss (its reduce: the first term, then each added) */
static double initial_assignment(pam_t *P)
{
    const int64_t n = P->n, k = P->k;
    const int64_t first = P->med[0];
    for (int64_t i = 0; i < n; i++) {
        P->near_i[i] = 0;
        P->near_d[i] = AT(P, i, first);
        P->seco_i[i] = -1;                          /* u32::MAX in the package: no second yet */
        P->seco_d[i] = 0.0;
    }
    /* medoid by medoid (column by column); each point's state sees the medoids in the package's order. Four points
     * at once, one in each lane (each lane's comparisons and choices are its point's own) */
    int64_t i0 = 0;
    if (P->so == 1) {
        typedef double v4 __attribute__((vector_size(32)));
        typedef int64_t v4l __attribute__((vector_size(32)));
        for (; i0 + 4 <= n; i0 += 4) {
            v4 ndv, sdv;
            v4l niv = (v4l){0}, siv = (v4l){0} - 1;
            __builtin_memcpy(&ndv, P->near_d + i0, sizeof ndv);
            sdv = (v4){0};
            const v4l iv = (v4l){0, 1, 2, 3} + i0;
            double *dm = P->dm ? P->dm + i0 * k : NULL;    /* the four points' rows of the row store, while here */
            if (dm)
                for (int l = 0; l < 4; l++)
                    dm[l * k] = ndv[l];
            for (int64_t m = 1; m < k; m++) {
                const int64_t me = P->med[m];
                v4 d;
                __builtin_memcpy(&d, P->D + me * P->sj + i0, sizeof d);
                if (dm)
                    for (int l = 0; l < 4; l++)
                        dm[l * k + m] = d[l];
                const v4l mv = (v4l){0} + m;
                const v4l near = (d < ndv) | (iv == me);
                const v4l sec = ~near & ((siv == -1) | (d < sdv));
                sdv = (v4)(((v4l)ndv & near) | ((v4l)d & sec) | ((v4l)sdv & ~(near | sec)));
                siv = (niv & near) | (mv & sec) | (siv & ~(near | sec));
                ndv = (v4)(((v4l)d & near) | ((v4l)ndv & ~near));
                niv = (mv & near) | (niv & ~near);
            }
            __builtin_memcpy(P->near_d + i0, &ndv, sizeof ndv);
            __builtin_memcpy(P->seco_d + i0, &sdv, sizeof sdv);
            for (int l = 0; l < 4; l++) {
                P->near_i[i0 + l] = (int32_t)niv[l];
                P->seco_i[i0 + l] = (int32_t)siv[l];
            }
        }
    }
    P->dm_rows = i0;
    for (int64_t m = 1; m < k; m++) {
        const int64_t me = P->med[m];
        for (int64_t i = i0; i < n; i++) {
            const double d = AT(P, i, me);
            if (d < P->near_d[i] || i == me) {
                P->seco_i[i] = P->near_i[i];
                P->seco_d[i] = P->near_d[i];
                P->near_i[i] = (int32_t)m;
                P->near_d[i] = d;
            } else if (P->seco_i[i] == -1 || d < P->seco_d[i]) {
                P->seco_i[i] = (int32_t)m;
                P->seco_d[i] = d;
            }
        }
    }
    double loss = P->near_d[0];
    for (int64_t i = 1; i < n; i++)
        loss = loss + P->near_d[i];
    return loss;
}

static void update_removal_loss(pam_t *P)
{
    for (int64_t m = 0; m < P->k; m++)
        P->removal[m] = 0.0;
    for (int64_t o = 0; o < P->n; o++)
        P->removal[P->near_i[o]] += P->seco_d[o] - P->near_d[o];
}

/* the package's update_second_nearest: the nearest of the medoids other than c and b, b (at doj) first.
 * The package keeps the first medoid strictly nearer than the best so far, from (b, doj): the medoid of least
 * distance below doj, the lowest index among equals, or b where none is below doj. Four lanes (medoids m = l mod 4)
 * keep their own first least, then the least of the lanes' (the lowest index among equals): the same medoid and
 * distance (a NaN distance is never below anything, as in the package), without one long chain of comparisons. */
static inline void least_of_lanes(int32_t *osi, double *osd, int64_t b, double doj, const double *ld, const int64_t *li)
{
    int64_t si = -1;
    double sd = 0.0;
    for (int l = 0; l < 4; l++)
        if (li[l] >= 0 && (si < 0 || ld[l] < sd || (ld[l] == sd && li[l] < si))) {
            sd = ld[l];
            si = li[l];
        }
    if (si >= 0 && sd < doj) {
        *osi = (int32_t)si;
        *osd = sd;
    } else {
        *osi = (int32_t)b;
        *osd = doj;
    }
}

static inline void second_nearest(pam_t *P, int64_t c, int64_t b, int64_t o, double doj, int32_t *osi, double *osd)
{
    const int64_t k = P->k;
    if (P->dm) {                                    /* the row of the medoids' distances, contiguous */
        double *row = P->dm + o * k;
        typedef double v4 __attribute__((vector_size(32)));
        typedef int64_t v4l __attribute__((vector_size(32)));
        /* c and b are left out by a NaN in their places for the scan (never below anything), put back after it;
         * four vectors of four lanes (medoids m = l mod 16), each lane keeping its first least */
        const double keep_c = row[c], keep_b = row[b];
        row[c] = __builtin_nan("");
        row[b] = __builtin_nan("");
        v4 lv[4];
        v4l iv[4];                                  /* the block's first medoid where the lane's least is */
        for (int u = 0; u < 4; u++) {
            lv[u] = (v4){0} + __builtin_inf();
            iv[u] = (v4l){0} - 1;
        }
        int64_t m = 0;
        for (; m + 16 <= k; m += 16) {
            const v4l mb = (v4l){0} + m;
#pragma GCC unroll 4
            for (int u = 0; u < 4; u++) {
                v4 d;
                __builtin_memcpy(&d, row + m + 4 * u, sizeof d);
                const v4l take = d < lv[u];
                lv[u] = (v4)(((v4l)d & take) | ((v4l)lv[u] & ~take));
                iv[u] = (mb & take) | (iv[u] & ~take);
            }
        }
        for (int u = 0; u < 4; u++)                 /* the medoid itself: block + 4 u + lane */
            iv[u] += (iv[u] >= 0) & ((v4l){0, 1, 2, 3} + 4 * u);
        for (; m + 4 <= k; m += 4) {
            v4 d;
            __builtin_memcpy(&d, row + m, sizeof d);
            const v4l mm = (v4l){0, 1, 2, 3} + m;
            const v4l take = d < lv[0];
            lv[0] = (v4)(((v4l)d & take) | ((v4l)lv[0] & ~take));
            iv[0] = (mm & take) | (iv[0] & ~take);
        }
        double ld[4];
        int64_t li[4];
        for (int l = 0; l < 4; l++) {
            ld[l] = lv[0][l];
            li[l] = iv[0][l];
            for (int u = 1; u < 4; u++)
                if (iv[u][l] >= 0 && (li[l] < 0 || lv[u][l] < ld[l] || (lv[u][l] == ld[l] && iv[u][l] < li[l]))) {
                    ld[l] = lv[u][l];
                    li[l] = iv[u][l];
                }
        }
        for (; m < k; m++)
            if (row[m] < ld[0]) {
                ld[0] = row[m];
                li[0] = m;
            }
        row[c] = keep_c;
        row[b] = keep_b;
        least_of_lanes(osi, osd, b, doj, ld, li);
        return;
    }
    const double *row = P->D + o * P->so;
    const int64_t sj = P->sj;
    const int64_t *med = P->med;
    double ld[4] = {__builtin_inf(), __builtin_inf(), __builtin_inf(), __builtin_inf()};
    int64_t li[4] = {-1, -1, -1, -1};
    int64_t m = 0;
    for (; m + 4 <= k; m += 4) {
        for (int l = 0; l < 4; l++) {
            const double d = row[med[m + l] * sj];
            const int skip = (m + l == c) | (m + l == b);
            if (!skip && d < ld[l]) {
                ld[l] = d;
                li[l] = m + l;
            }
        }
    }
    for (; m < k; m++) {
        const double d = row[med[m] * sj];
        if (m != c && m != b && d < ld[0]) {
            ld[0] = d;
            li[0] = m;
        }
    }
    least_of_lanes(osi, osd, b, doj, ld, li);
}

/* the package's do_swap at the new medoid's own point j: medoid b, at distance 0 (its former nearest becomes its
 * second, unless that was b); then its term of the removal loss */
static inline __attribute__((always_inline)) void new_medoid_point(pam_t *P, int64_t b, int64_t j)
{
    const int32_t b32 = (int32_t)b;
    if (P->near_i[j] != b32) {
        P->seco_i[j] = P->near_i[j];
        P->seco_d[j] = P->near_d[j];
    }
    P->near_i[j] = b32;
    P->near_d[j] = 0.0;
    P->removal[b32] += P->seco_d[j] - P->near_d[j];
}

/* one point's part of the package's do_swap (not o == j): its nearest and second nearest after medoid b became
 * the point at distance doj; then its term of the removal loss (the package's update_removal_loss, in this pass) */
static inline __attribute__((always_inline)) void swap_point(pam_t *P, int64_t b, int64_t o, double doj)
{
    const int32_t b32 = (int32_t)b;
    int32_t n_i = P->near_i[o], s_i = P->seco_i[o];
    double n_d = P->near_d[o], s_d = P->seco_d[o];
    if (n_i == b32) {
        if (doj < s_d) {
            n_d = doj;
        } else {
            n_i = s_i;
            n_d = s_d;
            second_nearest(P, n_i, b, o, doj, &s_i, &s_d);
        }
    } else if (doj < n_d) {
        s_i = n_i;
        s_d = n_d;
        n_i = b32;
        n_d = doj;
    } else if (doj < s_d) {
        s_i = b32;
        s_d = doj;
    } else if (s_i == b32) {
        second_nearest(P, n_i, b, o, doj, &s_i, &s_d);
    }
    P->near_i[o] = n_i;
    P->near_d[o] = n_d;
    P->seco_i[o] = s_i;
    P->seco_d[o] = s_d;
    P->removal[n_i] += s_d - n_d;
}

/* the package's do_swap: medoid b becomes point j (its loss, the sum of the nearest distances, is taken by
 * total_loss where it is read: at the end of a pass) */
static void do_swap(pam_t *P, int64_t b, int64_t j)
{
    const int64_t n = P->n, k = P->k, so = P->so;
    const int32_t b32 = (int32_t)b;
    P->med[b] = j;
    const double *col = P->D + j * P->sj;
    double *dmb = P->dm ? P->dm + b : NULL;         /* the row store's column b becomes D[., j] */
    int32_t *ni = P->near_i, *si = P->seco_i;
    double *nd = P->near_d, *sd = P->seco_d, *removal = P->removal;
    for (int64_t m = 0; m < k; m++)
        removal[m] = 0.0;
    int64_t o = 0;
#ifdef TRANSPOSED
    if (so == 1) {                                  /* four points at a time: most points keep their state */
        typedef int32_t v4s __attribute__((vector_size(16)));
        const v4s bv = (v4s){0} + b32;
        for (; o + 4 <= n; o += 4) {
            const __m256d d = _mm256_loadu_pd(col + o);
            if (dmb) {
                if (o + 64 + 4 <= n)                /* the lines of the rows 64 on, for their stores */
                    for (int l = 0; l < 4; l++)
                        __builtin_prefetch(dmb + (o + 64 + l) * k, 1, 3);
                for (int l = 0; l < 4; l++)
                    dmb[(o + l) * k] = d[l];
            }
            v4s n4, s4;
            __builtin_memcpy(&n4, ni + o, sizeof n4);
            __builtin_memcpy(&s4, si + o, sizeof s4);
            const int moved = _mm_movemask_ps((__m128)((n4 == bv) | (s4 == bv)))
                              | _mm256_movemask_pd(_mm256_cmp_pd(d, _mm256_loadu_pd(nd + o), _CMP_LT_OQ))
                              | _mm256_movemask_pd(_mm256_cmp_pd(d, _mm256_loadu_pd(sd + o), _CMP_LT_OQ))
                              | ((uint64_t)(j - o) < 4);
            if (!moved) {                           /* every point keeps its state: its removal term only */
                for (int l = 0; l < 4; l++)
                    removal[ni[o + l]] += sd[o + l] - nd[o + l];
                continue;
            }
            for (int l = 0; l < 4; l++) {
                if (o + l == j)
                    new_medoid_point(P, b, j);
                else
                    swap_point(P, b, o + l, d[l]);
            }
        }
    }
#endif
    for (; o < n; o++) {
        const double doj = col[o * so];
        if (dmb)
            dmb[o * k] = doj;
        if (o == j)
            new_medoid_point(P, b, j);
        else
            swap_point(P, b, o, doj);
    }
}

/* the loss as the package's do_swap returns it: the nearest distances summed in order (its reduce: the first, then
 * each added) */
static double total_loss(const pam_t *P)
{
    double loss = P->near_d[0];
    for (int64_t o = 1; o < P->n; o++)
        loss = loss + P->near_d[o];
    return loss;
}

/* The package's find_best_swap for the nj <= LANES nv candidates js[0 .. nj-1] at once (each lane of each of the
 * nv vectors one candidate): change[t] and bs[t] are candidate t's change of loss and the medoid it replaces,
 * each the package's numbers for that candidate alone against the current state. Where the package skips a
 * point (D[o, j] < nd and D[o, j] < sd both false; or, for ploss, the first false and the second false) the lane
 * adds +0.0 instead, which changes no sum: acc starts at +0.0 and ploss[c] at removal[c], itself a sum from +0.0,
 * and a sum from +0.0 is never -0.0 (a + b is -0.0 only for two -0.0 terms), so adding +0.0 leaves it as it
 * is (NaN and infinities included). Every sum thus sees the package's terms in the package's order. */
#define NV_MAX 4
#define NB (LANES * NV_MAX)
static inline __attribute__((always_inline)) void find_best_swaps(pam_t *P, const int64_t *js, int64_t nj,
                                                                  double *change, int64_t *bs, const int64_t so,
                                                                  const int nv)
{
    const int64_t n = P->n, k = P->k;
    const double *nd = P->near_d, *sd = P->seco_d;
    const int32_t *ni = P->near_i;
    vd *ploss = (vd *)P->ploss;                     /* ploss[m * nv + q]: medoid m, candidates q LANES .. */
    const double *col[NB];
    for (int t = 0; t < LANES * nv; t++)
        col[t] = P->D + js[t < nj ? t : 0] * P->sj;
    for (int64_t m = 0; m < k; m++)
        for (int q = 0; q < nv; q++)
            ploss[m * nv + q] = P->removal[m] - (vd){0};
    vd acc[NV_MAX];
    for (int q = 0; q < nv; q++)
        acc[q] = (vd){0};
    int64_t o = 0;
#ifdef TRANSPOSED
    if (so == 1) {                                  /* four rows of four columns, transposed: rows o .. o+3 in turn */
        for (; o + 4 <= n; o += 4) {
#pragma GCC unroll 4
            for (int q = 0; q < nv; q++) {
                const double *const *cq = col + q * 4;
                const __m256d r0 = _mm256_loadu_pd(cq[0] + o), r1 = _mm256_loadu_pd(cq[1] + o);
                const __m256d r2 = _mm256_loadu_pd(cq[2] + o), r3 = _mm256_loadu_pd(cq[3] + o);
                const __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
                const __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
                vd d[4];
                d[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
                d[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
                d[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
                d[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++) {
                    const vd ndv = _mm256_broadcast_sd(nd + o + i), sdv = _mm256_broadcast_sd(sd + o + i);
                    const vd gone = ndv - sdv, doj = d[i];
                    vd *pl = ploss + (int64_t)ni[o + i] * nv + q;
                    const vi t1 = doj < ndv, t2 = doj < sdv;
                    acc[q] += (vd)((vi)(doj - ndv) & t1);
                    const vd other = (vd)((vi)(doj - sdv) & t2);
                    *pl += (vd)(((vi)gone & t1) | ((vi)other & ~t1));
                }
            }
        }
    }
#endif
    for (; o < n; o++) {
        const vd ndv = nd[o] - (vd){0}, sdv = sd[o] - (vd){0};
        const vd gone = ndv - sdv;
        vd *pl = ploss + (int64_t)ni[o] * nv;
#pragma GCC unroll 4
        for (int q = 0; q < nv; q++) {
            vd doj;
            for (int l = 0; l < LANES; l++)
                doj[l] = col[q * LANES + l][o * so];
            const vi t1 = doj < ndv, t2 = doj < sdv;
            acc[q] += (vd)((vi)(doj - ndv) & t1);
            const vd other = (vd)((vi)(doj - sdv) & t2);
            pl[q] += (vd)(((vi)gone & t1) | ((vi)other & ~t1));
        }
    }
    /* find_min for every lane: the first least of its ploss over the medoids. Four chains per vector, each from
     * ploss[0] over the medoids m = 1 + c, 5 + c, ... (strict <), then the least of the chains' (the lowest index
     * among equals): the package's one chain's medoid and value (where ploss[0] is NaN every chain keeps it) */
    for (int q = 0; q < nv; q++) {
        vd best[4];
        vi b[4], mv[4];
        for (int c = 0; c < 4; c++) {
            best[c] = ploss[q];
            b[c] = (vi){0};
            mv[c] = (vi){0} + (1 + c);
        }
        int64_t m = 1;
        for (; m + 4 <= k; m += 4) {
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const vd v = ploss[(m + c) * nv + q];
                const vi take = v < best[c];
                best[c] = (vd)(((vi)v & take) | ((vi)best[c] & ~take));
                b[c] = (mv[c] & take) | (b[c] & ~take);
                mv[c] += 4;
            }
        }
        for (int c = 0; m < k; m++, c++) {
            const vd v = ploss[m * nv + q];
            const vi take = v < best[c];
            best[c] = (vd)(((vi)v & take) | ((vi)best[c] & ~take));
            b[c] = (mv[c] & take) | (b[c] & ~take);
        }
        for (int c = 1; c < 4; c++) {
            const vi take = (best[c] < best[0]) | ((best[c] == best[0]) & (b[c] < b[0]));
            best[0] = (vd)(((vi)best[c] & take) | ((vi)best[0] & ~take));
            b[0] = (b[c] & take) | (b[0] & ~take);
        }
        for (int l = 0; l < LANES && q * LANES + l < nj; l++) {
            bs[q * LANES + l] = b[0][l];
            change[q * LANES + l] = best[0][l] + acc[q][l];
        }
    }
}

static inline __attribute__((always_inline)) void find_best_swaps_nv(pam_t *P, const int64_t *js, int64_t nj,
                                                                     double *change, int64_t *bs, const int64_t so)
{
    if (nj <= LANES)
        find_best_swaps(P, js, nj, change, bs, so, 1);
    else if (nj <= 2 * LANES)
        find_best_swaps(P, js, nj, change, bs, so, 2);
    else
        find_best_swaps(P, js, nj, change, bs, so, 4);
}

/* The package's passes over the candidates. The candidates are looked at in batches (the batch's width follows how
 * far apart the swaps have been lately: few candidates where swaps come often, as the ones after a swap in the
 * batch are looked at again, up to NB); the numbers are the package's whatever the widths. */
static inline __attribute__((always_inline)) void swap_loop(pam_t *P, const int64_t *seq, int64_t max_iter,
                                                            double *loss, int64_t *n_iter, int64_t *n_swaps,
                                                            const int64_t so)
{
    const int64_t n = P->n;
    int64_t lastswap = n, swaps = 0, iter = 0;
    int64_t js[NB], pos[NB], bs[NB];
    double change[NB];
    double gap = 2.0 * NB;                          /* candidates between swaps, a moving average */
    int64_t since = 0;                              /* candidates looked at since the last swap */
    while (iter < max_iter) {
        iter++;
        const int64_t swaps_before = swaps;
        const double lastloss = *loss;
        int64_t t = 0;
        int done = 0;
        while (!done) {
            const double expect = gap > (double)since ? gap : (double)since;
            const int64_t width = expect >= 2.0 * NB ? NB : expect >= 1.0 * NB ? 2 * LANES : LANES;
            /* the next candidates in the package's order: the pass ends at the last swap's point */
            int64_t nj = 0;
            for (; t < n && nj < width; t++) {
                const int64_t j = seq ? seq[t] : t;
                if (j == lastswap) {
                    done = 1;
                    break;
                }
                if (j == P->med[P->near_i[j]])
                    continue;                               /* already a medoid */
                js[nj] = j;
                pos[nj++] = t;
            }
            if (t >= n)
                done = 1;
            if (nj == 0)
                break;
            find_best_swaps_nv(P, js, nj, change, bs, so);
            int64_t u = 0;
            while (u < nj && change[u] >= 0.0)
                u++;
            if (u == nj) {
                since += nj;
                continue;
            }
            /* the first improving candidate: the package swaps here; the later ones are looked at again */
            since += u + 1;
            gap = 0.5 * gap + 0.5 * (double)since;
            since = 0;
            swaps++;
            lastswap = js[u];
            do_swap(P, bs[u], js[u]);
            t = pos[u] + 1;
            done = 0;
        }
        if (swaps != swaps_before)
            *loss = total_loss(P);
        if (swaps == swaps_before || *loss >= lastloss)
            break;
    }
    *n_iter = iter;
    *n_swaps = swaps;
}

/* k == 1: the package's choose_medoid_within_partition (every point in the one cluster) */
static void one_medoid(int64_t n, const double *D, int64_t so, int64_t sj, int64_t *med, double *sums,
                       double *loss, int64_t *n_swaps)
{
    /* sums[r] = D[r, 0] + D[r, 1] + ... (i != r), from 0.0 in increasing i: every row's sum at once */
    for (int64_t r = 0; r < n; r++)
        sums[r] = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double *c = D + i * sj;
        for (int64_t r = 0; r < n; r++)
            if (r != i)
                sums[r] += c[r * so];
    }
    const int64_t first = med[0];
    int64_t best = first;
    double sumb = sums[first];
    for (int64_t r = 0; r < n; r++)
        if (r != first && sums[r] < sumb) {
            best = r;
            sumb = sums[r];
        }
    med[0] = best;
    *loss = sumb;
    *n_swaps = best != first;
}

/* From this many medoids on, every point's distances to the medoids are also kept row by row (a point's
 * second nearest medoid, looked for again after a swap, is then read from one contiguous row instead of k
 * columns); the buffer is kept for the thread's next call. */
#ifndef DM_MIN_K
#define DM_MIN_K 8
#endif
static __thread double *dm_buf;
static __thread size_t dm_size;

static double *dm_buffer(size_t need)
{
    if (need > dm_size) {
        free(dm_buf);
        dm_buf = malloc(need * sizeof(double));
        dm_size = dm_buf ? need : 0;
    }
    return dm_buf;
}

/* FasterPAM from the k medoids in med (changed in place), visiting the candidates in the order seq (NULL: 0 .. n-1).
 * out: labels[n], and res[0] = loss; stats[0] = iterations, stats[1] = swaps. Returns 0, or -1 (no memory). */
int fasterpam(int64_t n, const double *D, int64_t so, int64_t sj, int64_t k, int64_t *med, const int64_t *seq,
              int64_t max_iter, int64_t *labels, double *res, int64_t *stats)
{
    if (k == 1) {
        double *sums = malloc((size_t)n * sizeof(double));
        if (!sums)
            return -1;
        one_medoid(n, D, so, sj, med, sums, res, &stats[1]);
        free(sums);
        for (int64_t i = 0; i < n; i++)
            labels[i] = 0;
        stats[0] = 1;
        return 0;
    }
    pam_t P = {.n = n, .k = k, .so = so, .sj = sj, .D = D, .med = med};
    const size_t bytes = (size_t)n * (2 * sizeof(int32_t) + 2 * sizeof(double)) + (size_t)k * (NB + 1) * sizeof(double);
    char *mem = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!mem)
        return -1;
    P.ploss = (double *)mem;                        /* k NB, aligned for the vectors */
    P.near_d = P.ploss + k * NB;
    P.seco_d = P.near_d + n;
    P.removal = P.seco_d + n;
    P.near_i = (int32_t *)(P.removal + k);
    P.seco_i = P.near_i + n;
    P.dm = k >= DM_MIN_K ? dm_buffer((size_t)n * (size_t)k) : NULL;
    double loss = initial_assignment(&P);
    if (P.dm) {                                     /* the rows initial_assignment has not written */
        double *dm = P.dm;
        for (int64_t o0 = P.dm_rows; o0 < n; o0 += 128) {   /* in chunks of rows: the chunk's rows stay in cache */
            const int64_t o1 = o0 + 128 < n ? o0 + 128 : n;
            for (int64_t m = 0; m < k; m++) {
                const double *c = D + med[m] * sj;
                for (int64_t o = o0; o < o1; o++)
                    dm[o * k + m] = c[o * so];
            }
        }
    }
    update_removal_loss(&P);
    if (so == 1)
        swap_loop(&P, seq, max_iter, &loss, &stats[0], &stats[1], 1);
    else
        swap_loop(&P, seq, max_iter, &loss, &stats[0], &stats[1], so);
    for (int64_t i = 0; i < n; i++)
        labels[i] = P.near_i[i];
    res[0] = loss;
    free(mem);
    return 0;
}
