/* The authors' Fluid path in one call: maximum information (irtlib.selection.maxinfo_kernel) and the
 * bounded MLE (irtlib.selection.score_kernel), every step of every model's test.
 *
 * irtlib.selection.adaptive.run_adaptive with MaxInformation and MleEstimator runs, at each step, one
 * vectorised operation over all models: the selector's cached step (maxinfo_step) and full passes
 * (maxinfo_full), the estimator's push (the item's a, b and response written to its column) and its
 * estimate (mle_estimate), with some thirty numpy and ctypes calls between them. Every one of those
 * kernels treats each model on its own (a model's test depends only on its own row), so this file
 * runs the same kernels, the same calls with the same arguments, model by model: the whole test of a
 * model, then the next. The picks and estimates are those of the step-by-step loop, bit for bit
 * (the two kernels' sources are included here unchanged; irtlib.selection.fluid_path checks the
 * library against the class-based loop on random runs before it uses it).
 *
 * A model whose full pass the maximum-information kernel leaves to numpy (wild: a value that is not
 * a number, |a (theta - b)| beyond 700, ...) is stopped and flagged; the caller runs its test again
 * in the class-based loop.
 */
#include "_maxinfo_kernel.c"
#include "_mle_kernel.c"

/* Every model's test of `budget` steps.
 *
 * Selector state (one row per model, as irtlib.selection.selectors._MaxInfoRun keeps it; NULL where the
 * run has no cache or no twins): unused (n x N), left, items, ca, cb, used, ctwin, guard (n x cache),
 * theta_c, bound (n x (n_radii + 1)); the bank a, b, loga2 (row stride ld: N per model, 0 shared), twin
 * labels (stride ldt) and twinned; the work arrays of FullPass (work 2N, work2 N, lastc 2N, has N) and
 * of the step (cwork, 3 cache). Where _maxinfo_kernel.c has the ranked step (maxinfo_step_sorted, RANK_META
 * defined) and the selector keeps its ranking (cw, cs: n x cache, cm: n x RANK_META, corder: n x cache, camax,
 * cready: n; FullPass.step's arrays), the step is maxinfo_step_sorted with them, as FullPass.step calls it, and
 * a model's cready is zeroed after each full pass (new candidates), as FullPass.full does; with cw NULL, or
 * without the ranked step, maxinfo_step (the same picks: _maxinfo_kernel.c's loader checks the two agree).
 * Estimator state (_MleRun and its RowTerms; row stride cap >= budget): X, A, B, g, h, at, upto.
 * responses: n x N (NaN: not available; such items are never picked). theta0: the first item's ability.
 * Out: items_out, est_out (n x budget), theta_out (n: the last estimate), wild_out (n: 1 where the model
 * was stopped; its other outputs are then meaningless). Returns the cells whose MLE terms were computed. */
int64_t fluid_mle_path(int64_t n, int64_t N, int64_t budget, int64_t cache, int64_t n_radii, const double *radii,
                       uint8_t *unused, int64_t *left, int64_t *items, double *ca, double *cb, uint8_t *used,
                       int32_t *ctwin, uint8_t *guard, double *theta_c, double *bound, const double *a,
                       const double *b, const double *loga2, int64_t ld, const int32_t *twin, int64_t ldt,
                       const uint8_t *twinned, double *work, double *work2, int64_t *lastc, uint8_t *has,
                       double *cwork, double *cw, double *cs, double *cm, int64_t *corder, double *camax,
                       uint8_t *cready, const double *responses, const double *theta0, int64_t cap, double *X,
                       double *A, double *B, double *g, double *h, double *at, int64_t *upto, double tol, double lo,
                       double hi, int64_t max_newton, int64_t max_halvings, int64_t max_bisection,
                       int64_t *items_out, double *est_out, double *theta_out, uint8_t *wild_out)
{
    int64_t evaluated = 0;
    for (int64_t m = 0; m < n; m++) {
        double th_sel = theta0[m];                          /* AdaptiveTest.theta: the estimator's start() */
        double th_est = clip(theta0[m], lo, hi);            /* _MleRun.theta: theta0 clipped to the bounds */
        const double *xm = responses + m * N;
        const double *pa = a + m * ld, *pb = b + m * ld;
        double *Xm = X + m * cap, *Am = A + m * cap, *Bm = B + m * cap;
        wild_out[m] = 0;
        for (int64_t t = 0; t < budget; t++) {
            int64_t j = -1;
            if (left[m] > 0) {                             /* live: _MaxInfoRun._select_c */
                int64_t pending = 0, pick = 0;
                uint8_t live = 1, wild = 0;
                if (cache) {
                    int64_t k;
#ifdef RANK_META
                    if (cw)
                        k = maxinfo_step_sorted(1, N, cache, n_radii, &th_sel, &live, radii, items + m * cache,
                                                ca + m * cache, cb + m * cache, used + m * cache,
                                                ctwin ? ctwin + m * cache : NULL, guard + m * cache, theta_c + m,
                                                bound + m * (n_radii + 1), unused + m * N, left + m, &j, &pending,
                                                cwork, cw + m * cache, cs + m * cache, cm + m * RANK_META,
                                                corder + m * cache, camax + m, cready + m);
                    else
#endif
                        k = maxinfo_step(1, N, cache, n_radii, &th_sel, &live, radii, items + m * cache,
                                         ca + m * cache, cb + m * cache, used + m * cache,
                                         ctwin ? ctwin + m * cache : NULL, guard + m * cache, theta_c + m,
                                         bound + m * (n_radii + 1), unused + m * N, left + m, &j, &pending, cwork);
                    pending = k;
                }
                else
                    pending = 1;
                if (pending) {
                    maxinfo_full(1, N, cache, n_radii, &m, &th_sel, a, b, loga2, ld, twin, ldt, twinned, unused,
                                 radii, &pick, &wild, items, ca, cb, used, ctwin, guard, theta_c, bound, work, work2,
                                 lastc, has, left);
                    if (wild) {
                        wild_out[m] = 1;
                        break;
                    }
                    if (cready)
                        cready[m] = 0;                      /* new candidates: ranked again at the next step */
                    j = pick;
                }
            }
            items_out[m * budget + t] = j;
            /* _MleRun.push: the item's a, b (item 0's where none, masked) and response; 0 where none */
            const int64_t jj = j >= 0 ? j : 0;
            const double xv = j >= 0 ? xm[j] : NAN;
            const int obs = (j >= 0) && !isnan(xv);
            Am[t] = obs ? pa[jj] : 0.0;
            Bm[t] = obs ? pb[jj] : 0.0;
            Xm[t] = obs ? xv : 0.0;
            /* _MleRun.estimate: RowTerms.estimate of this row from the previous estimate */
            evaluated += mle_estimate(1, t + 1, cap, Xm, Am, Bm, &th_est, g + m * cap, h + m * cap, at + m,
                                      upto + m, tol, lo, hi, max_newton, max_halvings, max_bisection);
            est_out[m * budget + t] = th_est;
            th_sel = th_est;
        }
        theta_out[m] = th_sel;
    }
    return evaluated;
}
