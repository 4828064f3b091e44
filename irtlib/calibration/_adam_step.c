/* torch.optim.Adam's step for the batched py-irt fit, in one pass over the parameters.

   Compiled at first use by irtlib.calibration.adam_kernel and called through ctypes by
   irtlib.calibration.pyirt_batch (the step of adam_kernel.TorchAdam). pyro's Adam (betas 0.9 and 0.999, eps 1e-8, no weight
   decay) on one float32 parameter tensor is seven torch passes over it per epoch, two of them
   allocating a new tensor; written here as torch 2.x computes each of them on the CPU, so that the
   numbers are the same bit for bit (irtlib.calibration.adam_kernel checks it against torch itself
   before it is used, and otherwise the fit steps with torch):

     exp_avg.lerp_(grad, w)             exp_avg = fma(w, grad - exp_avg, exp_avg)    (w = 1 - beta1 < 1/2)
     exp_avg_sq.mul_(beta2)
       .addcmul_(grad, grad, value=v)   exp_avg_sq = fma(v grad, grad, exp_avg_sq beta2)
     exp_avg_sq.sqrt() / c2 + eps       denom = root(exp_avg_sq) / c2 + eps
     param.addcdiv_(exp_avg, denom,
                    value=-step_size)   param = param + (-step_size exp_avg) / denom

   every scalar a float32 (torch rounds a Python number to the tensor's type), the two
   multiply-adds fused as torch's AVX2 kernels compute them (a product rounded, then a fused
   multiply-add), the rest IEEE operations in that order (-ffp-contract=off). The square root is
   not the correctly rounded one: torch calls its math library's vectorised square root (MKL's
   vsSqrt), which differs from sqrtf in the last bit for about a sixth of the values; the caller
   passes that very function in (root), applied to one block of BLOCK values at a time while they
   are in cache (its result does not depend on where a value sits in the array). */

#include <math.h>
#include <stdint.h>
#include <string.h>

#define BLOCK 1024
#define LANES 8

/* Eight floats (GNU C vector extensions: one AVX register, or an SSE pair; each lane's IEEE operations alike). */
typedef float vf __attribute__((vector_size(4 * LANES)));
static inline __attribute__((always_inline)) vf splat(float x) { vf v; for (int k = 0; k < LANES; k++) v[k] = x; return v; }
static inline __attribute__((always_inline)) vf load(const float *p) { vf v; memcpy(&v, p, sizeof v); return v; }
static inline __attribute__((always_inline)) void store(float *p, vf v) { memcpy(p, &v, sizeof v); }

typedef void (*root_fn)(int32_t n, const float *in, float *out);

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_FMA_PATH 1
#include <immintrin.h>

/* The moments of n values with the processor's fused multiply-add, 8 at a time (the tail one by one). */
__attribute__((target("avx2,fma"))) static void moments_fma(int64_t n, const float *grad, float *exp_avg,
                                                           float *exp_avg_sq, float w, float beta2, float v) {
    const __m256 vw = _mm256_set1_ps(w), vb = _mm256_set1_ps(beta2), vv = _mm256_set1_ps(v);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 g = _mm256_loadu_ps(grad + j), m = _mm256_loadu_ps(exp_avg + j), s = _mm256_loadu_ps(exp_avg_sq + j);
        _mm256_storeu_ps(exp_avg + j, _mm256_fmadd_ps(vw, _mm256_sub_ps(g, m), m));
        _mm256_storeu_ps(exp_avg_sq + j, _mm256_fmadd_ps(_mm256_mul_ps(vv, g), g, _mm256_mul_ps(s, vb)));
    }
    for (; j < n; j++) {
        exp_avg[j] = __builtin_fmaf(w, grad[j] - exp_avg[j], exp_avg[j]);
        exp_avg_sq[j] = __builtin_fmaf(v * grad[j], grad[j], exp_avg_sq[j] * beta2);
    }
}
#endif

/* The same with the C library's fmaf (correctly rounded, so the same numbers). */
static void moments_libm(int64_t n, const float *grad, float *exp_avg, float *exp_avg_sq, float w, float beta2,
                         float v) {
    for (int64_t j = 0; j < n; j++) {
        exp_avg[j] = fmaf(w, grad[j] - exp_avg[j], exp_avg[j]);
        exp_avg_sq[j] = fmaf(v * grad[j], grad[j], exp_avg_sq[j] * beta2);
    }
}

/* One Adam step of n parameters. w = 1 - beta1, v = 1 - beta2, c2 = sqrt(1 - beta2^step) (bias
   correction), neg_step = -lr / (1 - beta1^step), all as float32; fma_path 1 where the processor
   has AVX2 and FMA (the caller checks), else 0. */
void adam_step(int64_t n, float *param, const float *grad, float *exp_avg, float *exp_avg_sq, float w,
               float beta2, float v, float c2, float eps, float neg_step, root_fn root, int32_t fma_path) {
    float denom[BLOCK];
    for (int64_t lo = 0; lo < n; lo += BLOCK) {
        const int64_t len = n - lo < BLOCK ? n - lo : BLOCK;
#ifdef HAVE_FMA_PATH
        if (fma_path)
            moments_fma(len, grad + lo, exp_avg + lo, exp_avg_sq + lo, w, beta2, v);
        else
#endif
            moments_libm(len, grad + lo, exp_avg + lo, exp_avg_sq + lo, w, beta2, v);
        root((int32_t)len, exp_avg_sq + lo, denom);
        int64_t j = 0;
        for (; j + LANES <= len; j += LANES) {      /* the same IEEE operations on each lane */
            const vf d = load(denom + j) / splat(c2) + splat(eps);
            store(param + lo + j, load(param + lo + j) + (splat(neg_step) * load(exp_avg + lo + j)) / d);
        }
        for (; j < len; j++) {
            const float d = denom[j] / c2 + eps;
            param[lo + j] = param[lo + j] + (neg_step * exp_avg[lo + j]) / d;
        }
    }
}

/* Whether the fused multiply-add path was compiled (x86-64 with GCC or Clang). */
int32_t has_fma_path(void) {
#ifdef HAVE_FMA_PATH
    return 1;
#else
    return 0;
#endif
}
