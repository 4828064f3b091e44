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
 *
 * Compiled with -ffp-contract=off (no fused multiply-add) and without -ffast-math.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__)
#define LANES 8
#else
#define LANES 4
#endif
typedef double vd __attribute__((vector_size(8 * LANES)));
typedef int64_t vi __attribute__((vector_size(8 * LANES)));

typedef struct {
    int64_t n, k, so, sj;
    const double *D;
    double *dm;                                     /* NULL, or dm[o * k + m] = D[o, med[m]] (kept up to date) */
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
    /* medoid by medoid (column by column); each point's state sees the medoids in the package's order */
    for (int64_t m = 1; m < k; m++) {
        const int64_t me = P->med[m];
        for (int64_t i = 0; i < n; i++) {
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
static inline void least_of_lanes(pam_t *P, int64_t o, int64_t b, double doj, const double *ld, const int64_t *li)
{
    int64_t si = -1;
    double sd = 0.0;
    for (int l = 0; l < 4; l++)
        if (li[l] >= 0 && (si < 0 || ld[l] < sd || (ld[l] == sd && li[l] < si))) {
            sd = ld[l];
            si = li[l];
        }
    if (si >= 0 && sd < doj) {
        P->seco_i[o] = (int32_t)si;
        P->seco_d[o] = sd;
    } else {
        P->seco_i[o] = (int32_t)b;
        P->seco_d[o] = doj;
    }
}

static inline void second_nearest(pam_t *P, int64_t c, int64_t b, int64_t o, double doj)
{
    const int64_t k = P->k;
    if (P->dm) {                                    /* the row of the medoids' distances, contiguous */
        const double *row = P->dm + o * k;
        typedef double v4 __attribute__((vector_size(32)));
        typedef int64_t v4l __attribute__((vector_size(32)));
        v4 lv = (v4){0} + __builtin_inf();
        v4l iv = (v4l){0} - 1, mv = {0, 1, 2, 3};
        const v4l cv = (v4l){0} + c, bv = (v4l){0} + b;
        int64_t m = 0;
        for (; m + 4 <= k; m += 4, mv += 4) {
            v4 d;
            __builtin_memcpy(&d, row + m, sizeof d);
            const v4l take = (d < lv) & ~((mv == cv) | (mv == bv));
            lv = (v4)(((v4l)d & take) | ((v4l)lv & ~take));
            iv = (mv & take) | (iv & ~take);
        }
        double ld[4];
        int64_t li[4];
        for (int l = 0; l < 4; l++) {
            ld[l] = lv[l];
            li[l] = iv[l];
        }
        for (; m < k; m++)
            if (m != c && m != b && row[m] < ld[0]) {
                ld[0] = row[m];
                li[0] = m;
            }
        least_of_lanes(P, o, b, doj, ld, li);
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
    least_of_lanes(P, o, b, doj, ld, li);
}

/* the package's do_swap: medoid b becomes point j; returns the new loss (the package's reduce) */
static double do_swap(pam_t *P, int64_t b, int64_t j)
{
    const int64_t n = P->n;
    const int32_t b32 = (int32_t)b;
    P->med[b] = j;
    const double *col = P->D + j * P->sj;
    double *dmb = P->dm ? P->dm + b : NULL;         /* the row store's column b becomes D[., j] */
    const int64_t k = P->k;
    double loss = 0.0;
    for (int64_t o = 0; o < n; o++) {
        double term;
        if (dmb)
            dmb[o * k] = col[o * P->so];
        if (o == j) {
            if (P->near_i[o] != b32) {
                P->seco_i[o] = P->near_i[o];
                P->seco_d[o] = P->near_d[o];
            }
            P->near_i[o] = b32;
            P->near_d[o] = 0.0;
            term = 0.0;
        } else {
            const double doj = col[o * P->so];
            if (P->near_i[o] == b32) {
                if (doj < P->seco_d[o]) {
                    P->near_d[o] = doj;
                } else {
                    P->near_i[o] = P->seco_i[o];
                    P->near_d[o] = P->seco_d[o];
                    second_nearest(P, P->near_i[o], b, o, doj);
                }
            } else if (doj < P->near_d[o]) {
                P->seco_i[o] = P->near_i[o];
                P->seco_d[o] = P->near_d[o];
                P->near_i[o] = b32;
                P->near_d[o] = doj;
            } else if (doj < P->seco_d[o]) {
                P->seco_i[o] = b32;
                P->seco_d[o] = doj;
            } else if (P->seco_i[o] == b32) {
                second_nearest(P, P->near_i[o], b, o, doj);
            }
            term = P->near_d[o];
        }
        loss = o == 0 ? term : loss + term;
    }
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
    for (int64_t o = 0; o < n; o++) {
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
    /* find_min for every lane: the first least of its ploss over the medoids, lane by lane in one vector */
    for (int q = 0; q < nv; q++) {
        vd best = ploss[q];
        vi b = (vi){0}, mv = (vi){0};
        for (int64_t m = 1; m < k; m++) {
            mv += 1;
            const vd v = ploss[m * nv + q];
            const vi take = v < best;
            best = (vd)(((vi)v & take) | ((vi)best & ~take));
            b = (mv & take) | (b & ~take);
        }
        for (int l = 0; l < LANES && q * LANES + l < nj; l++) {
            bs[q * LANES + l] = b[l];
            change[q * LANES + l] = best[l] + acc[q][l];
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
            *loss = do_swap(P, bs[u], js[u]);
            update_removal_loss(P);
            t = pos[u] + 1;
            done = 0;
        }
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
    double *dm = NULL;
    if (k >= DM_MIN_K) {
        dm = dm_buffer((size_t)n * (size_t)k);
        if (dm) {
            for (int64_t o0 = 0; o0 < n; o0 += 128) {   /* in chunks of rows: the chunk's rows stay in cache */
                const int64_t o1 = o0 + 128 < n ? o0 + 128 : n;
                for (int64_t m = 0; m < k; m++) {
                    const double *c = D + med[m] * sj;
                    for (int64_t o = o0; o < o1; o++)
                        dm[o * k + m] = c[o * so];
                }
            }
        }
    }
    P.dm = dm;
    double loss = initial_assignment(&P);
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
