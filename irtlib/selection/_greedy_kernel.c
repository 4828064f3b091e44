/* Marginal Fisher's lazy greedy (irtlib/selection/greedy_kernel.py), one bin, in C.
 *
 * The numpy path (static._greedy_picks) spends most of its time in a dozen numpy calls per pick.
 * Here a max-heap of stale gains (upper bounds) ordered by (gain desc, position asc) does the same
 * lazy evaluation: the top item, if its gain is fresh (computed at this step), is the item with the
 * largest fresh gain, ties to the lowest position -- the numpy path's pick. A gain is computed with
 * the numpy path's operations in its order: r1 = sqrt(s), r2 = sqrt(s + I), I / ((r1 * r2) * (r1 + r2)),
 * summed over models by numpy's pairwise summation (DOUBLE_pairwise_sum), so the floats are equal.
 * Built with AVX2, the terms are computed four models at a time and summed as they are computed, the
 * pairwise sum's eight accumulators held in two registers: the same operations on the same values, so
 * the same bits (tests/selection/test_greedy_kernel.py compares the two builds).
 * Compile with -ffp-contract=off (irtlib.calibration.fused_kernel's flags).
 */
#include <math.h>
#include <stdint.h>

#include "_pairwise_sum.h"

static inline double term(const double *col, const double *s, const double *r1, int64_t m)
{
    double r2 = sqrt(s[m] + col[m]);
    return col[m] / ((r1[m] * r2) * (r1[m] + r2));
}

#if defined(__AVX2__)
#include <immintrin.h>

/* four models' terms: square root, products, sum and quotient are IEEE-754 operations rounded exactly
 * as term()'s (no contraction: -ffp-contract=off), so each lane is term() bit for bit */
static inline __m256d term4(const double *col, const double *s, const double *r1, int64_t m)
{
    __m256d c = _mm256_loadu_pd(col + m);
    __m256d r = _mm256_loadu_pd(r1 + m);
    __m256d r2 = _mm256_sqrt_pd(_mm256_add_pd(_mm256_loadu_pd(s + m), c));
    return _mm256_div_pd(c, _mm256_mul_pd(_mm256_mul_pd(r, r2), _mm256_add_pd(r, r2)));
}

/* pairwise_sum (_pairwise_sum.h) of the terms of models [m0, m0 + n), computed as they are summed: its
 * eight interleaved accumulators are two four-lane registers (lane q adds exactly what r[q] adds, in
 * the same order), its short and long cases and its combination unchanged */
static double term_sum(const double *col, const double *s, const double *r1, int64_t m0, int64_t n)
{
    if (n < 8) {
        double res = -0.0;
        for (int64_t i = 0; i < n; i++) {
            res += term(col, s, r1, m0 + i);
        }
        return res;
    }
    else if (n <= 128) {
        double r[8], res;
        int64_t i;
        __m256d lo = term4(col, s, r1, m0), hi = term4(col, s, r1, m0 + 4);
        for (i = 8; i < n - (n % 8); i += 8) {
            lo = _mm256_add_pd(lo, term4(col, s, r1, m0 + i));
            hi = _mm256_add_pd(hi, term4(col, s, r1, m0 + i + 4));
        }
        _mm256_storeu_pd(r, lo);
        _mm256_storeu_pd(r + 4, hi);
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) {
            res += term(col, s, r1, m0 + i);
        }
        return res;
    }
    else {
        int64_t n2 = n / 2;
        n2 -= n2 % 8;
        return term_sum(col, s, r1, m0, n2) + term_sum(col, s, r1, m0 + n2, n - n2);
    }
}
#endif

static double gain(const double *col, const double *s, const double *r1, double *work, int64_t n_models)
{
#if defined(__AVX2__)
    (void)work;
    return term_sum(col, s, r1, 0, n_models);
#else
    for (int64_t m = 0; m < n_models; m++) {
        work[m] = term(col, s, r1, m);
    }
    return pairwise_sum(work, n_models);
#endif
}

/* the gains of every item (rows of info_t), for tests and the bounds after the first pick */
void greedy_gains(int64_t n_items, int64_t n_models, const double *info_t, const double *s, const double *r1,
                  double *work, double *out)
{
    for (int64_t j = 0; j < n_items; j++) {
        out[j] = gain(info_t + j * n_models, s, r1, work, n_models);
    }
}

/* A heap entry carries its item's bound beside its position, so that sifting reads the heap only (the
 * bounds array, indexed by position, was a cache miss per comparison on banks of thousands of items).
 * heap order: a before b when its bound is larger, or equal with a lower position */
typedef struct {
    double ub;
    int64_t pos;
} entry;

static int before(const entry *a, const entry *b)
{
    return a->ub > b->ub || (a->ub == b->ub && a->pos < b->pos);
}

static void sift_down(entry *heap, int64_t size, int64_t i)
{
    entry item = heap[i];
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= size) {
            break;
        }
        if (c + 1 < size && before(&heap[c + 1], &heap[c])) {
            c++;
        }
        if (!before(&heap[c], &item)) {
            break;
        }
        heap[i] = heap[c];
        i = c;
    }
    heap[i] = item;
}

/* Build the heap of the items positions[0:size] by the bounds ub into heap (room for size entries:
 * 16 bytes each). */
void greedy_heapify(int64_t size, const int64_t *positions, const double *ub, entry *heap)
{
    for (int64_t i = 0; i < size; i++) {
        heap[i].ub = ub[positions[i]];
        heap[i].pos = positions[i];
    }
    for (int64_t i = size / 2 - 1; i >= 0; i--) {
        sift_down(heap, size, i);
    }
}

/* Up to n_out more picks. state[0]: heap size, state[1]: step number (stamp of fresh gains).
 * s: every model's information so far (updated), ub: bounds (updated), stamp: step at which
 * ub[j] was computed. Returns the number of picks written to out.
 * next (or NULL): items whose information rows are equal bit for bit are one heap entry, their lowest
 * position not yet chosen (the group's head); next[j] is the group's next position after j (-1: none). Equal
 * rows have equal gains, so when the head is picked its successor takes its place with the same bound (stale
 * from the next step on, as any bound): the largest fresh gain, ties to the lowest position, as before. */
int64_t greedy_next(int64_t n_models, const double *info_t, double *s, double *r1, double *sm, double *work,
                    double *ub, int64_t *stamp, entry *heap, int64_t *state, int64_t n_out, int64_t *out,
                    const int64_t *next)
{
    int64_t size = state[0], step = state[1], done = 0;
    while (done < n_out && size > 0) {
        /* this step's floored s and its square root, as numpy's _gains computes them */
        for (int64_t m = 0; m < n_models; m++) {
            sm[m] = s[m] > 1e-300 ? s[m] : 1e-300;
            r1[m] = sqrt(sm[m]);
        }
        for (;;) {
            int64_t top = heap[0].pos;
            if (stamp[top] == step) {
                out[done++] = top;
                const int64_t succ = next ? next[top] : -1;
                if (succ >= 0) {           /* the group's next member, with the head's (now stale) bound */
                    heap[0].pos = succ;
                    ub[succ] = heap[0].ub;
                    stamp[succ] = step;
                    sift_down(heap, size, 0);
                }
                else {
                    heap[0] = heap[--size];
                    if (size > 0) {
                        sift_down(heap, size, 0);
                    }
                }
                const double *col = info_t + top * n_models;
                for (int64_t m = 0; m < n_models; m++) {
                    s[m] = s[m] + col[m];
                }
                break;
            }
            ub[top] = gain(info_t + top * n_models, sm, r1, work, n_models);
            heap[0].ub = ub[top];
            stamp[top] = step;
            sift_down(heap, size, 0);
        }
        step++;
    }
    state[0] = size;
    state[1] = step;
    return done;
}

/* Up to n_out more picks of the constrained greedy, round-robin over bins (greedy_kernel.binned_lazy_picks):
 * each pick moves to the next bin with items left (left[b]: items not chosen in bin b) and takes that
 * bin's heap's next pick, the step counter shared by every bin. heap_at[b]: the address of bin b's heap;
 * states: (size, step) per bin; cursor: (current bin, step, picks remaining), updated. Returns the number
 * of picks written to out. next: as greedy_next's (groups never span two bins). */
int64_t greedy_binned_next(int64_t n_models, const double *info_t, double *s, double *r1, double *sm, double *work,
                           double *ub, int64_t *stamp, int64_t n_bins, const int64_t *heap_at, int64_t *states,
                           int64_t *left, int64_t *cursor, int64_t n_out, int64_t *out, const int64_t *next)
{
    int64_t cur = cursor[0], step = cursor[1], remaining = cursor[2], done = 0;
    while (done < n_out && remaining > 0) {
        cur = (cur + 1) % n_bins;
        while (!left[cur]) {
            cur = (cur + 1) % n_bins;
        }
        left[cur]--;
        int64_t *state = states + 2 * cur;
        state[1] = step;
        done += greedy_next(n_models, info_t, s, r1, sm, work, ub, stamp, (entry *)(intptr_t)heap_at[cur], state, 1,
                            out + done, next);
        step = state[1];
        remaining--;
    }
    cursor[0] = cur;
    cursor[1] = step;
    cursor[2] = remaining;
    return done;
}
