/* Sympson-Hetter's choice on a shared 2PL bank, one model at a time, from the few items its first ranks need.
 *
 * irtlib.selection.selectors.choose_items defines the choice: each model's available items ranked by their Fisher
 * information at its ability (largest first, ties: the lowest item first), the item at rank r let through when
 * u[model, r] < K[item] (u: rng.random((n_models, n_items)) of the step), the first let through given (the pick-th
 * of the first k, pick = floor(v k) + 1, for randomesque), the available items tried before it set aside.
 *
 * sh_choose walks those ranks lazily. The items of the model's ability cell come sorted by an upper bound of their
 * information over the cell (irtlib.selection.selectors.SympsonHetterCandidates' bound, with its slack); an item's
 * exact information (exact_information: fisher_information's operations, the C library's exp) is computed only when
 * its bound reaches the best exact value not yet ranked, so the next rank is known once that value exceeds every
 * bound left. An item whose bound could be wrong (an underflow, a NaN) comes with an infinite bound, first: it is
 * always evaluated. The draws u[model, r] come from numpy's PCG64 (a float64 draw is one step): the
 * generator's state at the step's start jumped to (model * n_items + r), so they are the values of the full array.
 * A model whose ranks run out before k items are let through (or whose set-aside items overflow the output) is
 * left to the caller (enough = 0), as is every item of NaN information ranked after the finite ones. */
#include <math.h>
#include <stdint.h>
#include "_exact_information.h"

typedef __uint128_t u128;

static const u128 PCG_MULT = (((u128)2549297995355413924ULL) << 64) | (u128)4865540595714422341ULL;

/* numpy's pcg_advance_lcg_128: the state after `delta` steps. */
static u128 pcg_advance(u128 state, u128 delta, u128 inc)
{
    u128 cur_mult = PCG_MULT, cur_plus = inc, acc_mult = 1, acc_plus = 0;
    while (delta > 0) {
        if (delta & 1) {
            acc_mult *= cur_mult;
            acc_plus = acc_plus * cur_mult + cur_plus;
        }
        cur_plus = (cur_mult + 1) * cur_plus;
        cur_mult *= cur_mult;
        delta >>= 1;
    }
    return acc_mult * state + acc_plus;
}

/* numpy's random() of PCG64: one step, the XSL-RR output, its top 53 bits. */
static inline double pcg_double(u128 *state, u128 inc)
{
    *state = *state * PCG_MULT + inc;
    const uint64_t x = ((uint64_t)(*state >> 64)) ^ (uint64_t)(*state);
    const unsigned rot = (unsigned)(*state >> 122);
    const uint64_t out = (x >> rot) | (x << ((-rot) & 63u));
    return (double)(out >> 11) * (1.0 / 9007199254740992.0);
}

/* Max-heap of (value, item): larger value first, then the lower item. */
static inline int above(double v1, int64_t j1, double v2, int64_t j2)
{
    return v1 > v2 || (v1 == v2 && j1 < j2);
}

static void heap_push(double *val, int64_t *idx, int64_t *size, double v, int64_t j)
{
    int64_t i = (*size)++;
    while (i > 0) {
        const int64_t parent = (i - 1) / 2;
        if (!above(v, j, val[parent], idx[parent]))
            break;
        val[i] = val[parent];
        idx[i] = idx[parent];
        i = parent;
    }
    val[i] = v;
    idx[i] = j;
}

static void heap_pop(double *val, int64_t *idx, int64_t *size)
{
    const int64_t n = --(*size);
    const double v = val[n];
    const int64_t j = idx[n];
    int64_t i = 0;
    for (;;) {
        int64_t child = 2 * i + 1;
        if (child >= n)
            break;
        if (child + 1 < n && above(val[child + 1], idx[child + 1], val[child], idx[child]))
            child++;
        if (!above(val[child], idx[child], v, j))
            break;
        val[i] = val[child];
        idx[i] = idx[child];
        i = child;
    }
    if (n > 0) {
        val[i] = v;
        idx[i] = j;
    }
}

/* The choice of `n_rows` models (rows[i], increasing; ability theta[i] in cell cell[i]).
 * order, bound: (n_cells, n_items), each cell's items by decreasing bound and those bounds.
 * avail: (n_models, n_items) bytes. kexp: (n_items,). v: (n_rows,) randomesque draws, or NULL for k = 1.
 * state/inc: the PCG64 state at the step's start (high and low words).
 * heap_val, heap_idx: work, n_items each. Outputs: item[i] (-1: no item let through among the ranks walked),
 * enough[i], and the set-aside (model, item) pairs in model then rank order, at most `capacity`.
 * Returns the number of pairs. */
int64_t sh_choose(int64_t n_rows, const int64_t *rows, const double *theta, const int64_t *cell, int64_t n_items,
                  const int32_t *order, const double *bound, const double *a, const double *b, const uint8_t *avail,
                  const double *kexp, int64_t k, const double *v, uint64_t state_hi, uint64_t state_lo,
                  uint64_t inc_hi, uint64_t inc_lo, double *heap_val, int64_t *heap_idx,
                  int64_t *item, uint8_t *enough, int64_t *set_row, int64_t *set_col, int64_t capacity)
{
    const u128 start = (((u128)state_hi) << 64) | (u128)state_lo;
    const u128 inc = (((u128)inc_hi) << 64) | (u128)inc_lo;
    int64_t n_set = 0;
    for (int64_t i = 0; i < n_rows; i++) {
        const int64_t r = rows[i];
        const double th = theta[i];
        const int32_t *ord = order + cell[i] * n_items;
        const double *ub = bound + cell[i] * n_items;
        const uint8_t *av = avail + r * n_items;
        u128 st = pcg_advance(start, (u128)r * (u128)n_items, inc);
        const int64_t pick = k == 1 ? 1 : (int64_t)floor(v[i] * (double)k) + 1;
        const int64_t first_set = n_set;
        int64_t p = 0, size = 0, accepts = 0, chosen = -1;
        int ok = 1;
        for (;;) {
            while (p < n_items) {               /* evaluate until the best so far exceeds every bound left */
                const int64_t j = ord[p];
                if (!av[j]) {
                    p++;
                    continue;
                }
                if (size > 0 && heap_val[0] > ub[p])
                    break;
                const double w = exact_information(a[j], b[j], th);
                if (!isnan(w))
                    heap_push(heap_val, heap_idx, &size, w, j);
                p++;
            }
            if (size == 0) {                    /* the finite ranks ran out before k items were let through */
                ok = 0;
                break;
            }
            const int64_t j = heap_idx[0];
            heap_pop(heap_val, heap_idx, &size);
            const double u = pcg_double(&st, inc);
            if (u < kexp[j]) {
                accepts++;
                if (accepts == pick)
                    chosen = j;
                if (accepts == k)
                    break;
            } else if (accepts < pick) {
                if (n_set == capacity) {
                    ok = 0;
                    break;
                }
                set_row[n_set] = r;
                set_col[n_set] = j;
                n_set++;
            }
        }
        if (ok) {
            item[i] = chosen;
            enough[i] = 1;
        } else {
            item[i] = -1;
            enough[i] = 0;
            n_set = first_set;
        }
    }
    return n_set;
}

/* The first `n` draws of rng.random after jumping `delta` steps from the state (for the load check). */
void sh_draws(uint64_t state_hi, uint64_t state_lo, uint64_t inc_hi, uint64_t inc_lo, uint64_t delta_hi,
              uint64_t delta_lo, int64_t n, double *out)
{
    const u128 inc = (((u128)inc_hi) << 64) | (u128)inc_lo;
    u128 st = pcg_advance((((u128)state_hi) << 64) | (u128)state_lo, (((u128)delta_hi) << 64) | (u128)delta_lo, inc);
    for (int64_t i = 0; i < n; i++)
        out[i] = pcg_double(&st, inc);
}
