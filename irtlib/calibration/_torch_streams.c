/* torch's CPU random streams for the batched py-irt fit: one epoch's draws of every split in one call.

   Compiled at first use by irtlib.calibration.stream_kernel and called through ctypes by
   irtlib.calibration.pyirt_batch. Each split of the batched fit has its own generator seeded like a
   separate py-irt fit's (torch.Generator().manual_seed(seed)), and every epoch draws, in py-irt's
   order, for each site b, theta, a: a scalar Normal (the guide's mu) and a scalar Gamma (u); then
   Normal noise for theta (the split's rows), b and log a (n_items each). Made with torch, those are
   nine small calls per split and epoch from Python. Here they are written as torch 2.x computes them
   on the CPU, so that the numbers are the same bit for bit (irtlib.calibration.stream_kernel checks
   it against torch itself before it is used, and otherwise the fit draws with torch):

   - the generator: the 32-bit Mersenne Twister (MT19937), state[0] = seed, the standard
     initialisation and tempering; a 64-bit draw is two 32-bit ones, the first the high word;
   - uniform float in [0, 1): the low 24 bits of a 32-bit draw times 2^-24; uniform double: the low
     53 bits of a 64-bit draw times 2^-53;
   - a scalar Normal (a one-element tensor, torch's serial path): Box-Muller in double precision,
     u1 and u2 uniform doubles, r = sqrt(-2 log1p(-u2)), angle 2 pi u1; r cos(angle) is returned and
     r sin(angle) kept for the generator's next scalar Normal; rounded to float;
   - a scalar Gamma(alpha) (torch's _standard_gamma): Marsaglia and Tsang's rejection method in
     double precision on a float alpha, boosted by a uniform power where alpha < 1, its Normals the
     scalar ones above; rounded to float, at least FLT_MIN;
   - Normal noise for n >= 16 contiguous floats: n uniform floats, then Box-Muller on each block of
     16 (1 - u of the first 8 into a log, the next 8 into the angle: the first 8 outputs r cos, the
     next 8 r sin), and when 16 does not divide n the last 16 drawn afresh and transformed again.
     The logarithm, sine and cosine are the single-precision Cephes polynomials torch uses on AVX2
     processors (mode AVX2) or the C library's logf, sinf and cosf (mode SCALAR, torch's default
     kernels); for n < 16, scalar Normals as above.

   Outside mode 0's vector code, only IEEE operations in a fixed order (-ffp-contract=off). */

#include <math.h>
#include <float.h>
#include <stdint.h>
#include <string.h>

#define MT_N 624
#define MT_M 397

typedef struct {
    uint32_t mt[MT_N];
    int32_t index;
    int32_t has_normal;      /* a cached r sin(angle) from the last scalar Normal */
    double normal;
} stream_t;

int64_t stream_size(void) { return (int64_t)sizeof(stream_t); }

void stream_seed(stream_t *st, uint64_t seed) {
    st->mt[0] = (uint32_t)(seed & 0xffffffffu);
    for (int j = 1; j < MT_N; j++)
        st->mt[j] = 1812433253u * (st->mt[j - 1] ^ (st->mt[j - 1] >> 30)) + (uint32_t)j;
    st->index = MT_N;
    st->has_normal = 0;
    st->normal = 0.0;
}

/* Eight 32-bit words (GNU C vector extensions: AVX2 or SSE pairs, the same integer operations). */
typedef uint32_t vu __attribute__((vector_size(32)));
typedef float vfl __attribute__((vector_size(32)));

static inline __attribute__((always_inline)) vu load_words(const uint32_t *p) { vu v; memcpy(&v, p, sizeof v); return v; }

/* The state's next 624 words, in place: word j from words j, j + 1 and j + 397 (mod 624), in order j =
   0, 1, ..., 623, so that words below j are already new. Written without the modulo, 8 words at a
   time: the first 227 read only old words, the next 396 words made at least 227 steps before. */
static inline uint32_t twist_word(uint32_t here, uint32_t next, uint32_t far) {
    uint32_t y = (here & 0x80000000u) | (next & 0x7fffffffu);
    return far ^ (y >> 1) ^ (-(y & 1u) & 0x9908b0dfu);
}

static inline __attribute__((always_inline)) vu twist_words(vu here, vu next, vu far) {
    vu y = (here & 0x80000000u) | (next & 0x7fffffffu);
    return far ^ (y >> 1) ^ (-(y & 1u) & 0x9908b0dfu);
}

static void twist(stream_t *st) {
    uint32_t *mt = st->mt;
    int j = 0;
    for (; j + 8 <= MT_N - MT_M; j += 8) {
        vu w = twist_words(load_words(mt + j), load_words(mt + j + 1), load_words(mt + j + MT_M));
        memcpy(mt + j, &w, sizeof w);
    }
    for (; j < MT_N - MT_M; j++) mt[j] = twist_word(mt[j], mt[j + 1], mt[j + MT_M]);
    for (; j + 8 <= MT_N - 1; j += 8) {
        vu w = twist_words(load_words(mt + j), load_words(mt + j + 1), load_words(mt + j + MT_M - MT_N));
        memcpy(mt + j, &w, sizeof w);
    }
    for (; j < MT_N - 1; j++) mt[j] = twist_word(mt[j], mt[j + 1], mt[j + MT_M - MT_N]);
    mt[MT_N - 1] = twist_word(mt[MT_N - 1], mt[0], mt[MT_M - 1]);
    st->index = 0;
}

static inline uint32_t temper(uint32_t y) {
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

static inline __attribute__((always_inline)) vu temper_words(vu y) {
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

static inline uint32_t next32(stream_t *st) {
    if (st->index >= MT_N) twist(st);
    return temper(st->mt[st->index++]);
}

/* n uniform floats in [0, 1), each the low 24 bits of the next word times 2^-24, the state's words
   taken in runs up to each twist. */
static void uniform_floats(stream_t *st, float *out, int64_t n) {
    while (n > 0) {
        if (st->index >= MT_N) twist(st);
        int64_t run = MT_N - st->index < n ? MT_N - st->index : n;
        const uint32_t *words = st->mt + st->index;
        int64_t i = 0;
        for (; i + 8 <= run; i += 8) {       /* 24 bits convert exactly, and the scaling by 2^-24 is exact */
            vfl u = __builtin_convertvector(temper_words(load_words(words + i)) & 0xffffffu, vfl) * (1.0f / 16777216.0f);
            memcpy(out + i, &u, sizeof u);
        }
        for (; i < run; i++) out[i] = (float)(temper(words[i]) & 0xffffffu) * (1.0f / 16777216.0f);
        st->index += (int32_t)run;
        out += run;
        n -= run;
    }
}

static inline double uniform_double(stream_t *st) {
    uint64_t hi = next32(st), lo = next32(st);
    return (double)(((hi << 32) | lo) & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

static double normal_double(stream_t *st) {
    if (st->has_normal) {
        st->has_normal = 0;
        return st->normal * 1.0 + 0.0;
    }
    double u1 = uniform_double(st), u2 = uniform_double(st);
    double r = sqrt(-2.0 * log1p(-u2));
    double angle = 2.0 * 3.14159265358979323846 * u1;
    st->normal = r * sin(angle);
    st->has_normal = 1;
    return r * cos(angle) * 1.0 + 0.0;
}

static float gamma_float(stream_t *st, float alpha) {
    double scale = 1.0;
    if (alpha < 1.0f) {
        if (alpha == 0.0f) return FLT_MIN;
        scale *= pow(1.0 - uniform_double(st), (double)(1.0f / alpha));
        alpha += 1.0f;
    }
    const double d = (double)(alpha - 1.0f / 3.0f);
    const double c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, y;
        do {
            x = normal_double(st);
            y = 1.0 + c * x;
        } while (y <= 0.0);
        const double v = y * y * y;
        const double u = 1.0 - uniform_double(st);
        const double xx = x * x;
        if (u < 1.0 - (double)0.0331f * xx * xx || log(u) < 0.5 * xx + d * (1.0 - v + log(v))) {
            float g = (float)(scale * d * v);
            return g > FLT_MIN ? g : FLT_MIN;
        }
    }
}

/* ------------------------------------------------------------------ Box-Muller on 16 floats */
/* Mode 0, torch's AVX2 kernel: its vector code is compiled for AVX2 with fused multiply-adds wherever
   the compiler contracts a product into a sum (as torch's build does), so this part is compiled the
   same way; it runs only where the processor has AVX2 and FMA (stream_kernel checks). */
#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_AVX2_MODE 1
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#pragma GCC optimize("fp-contract=fast")
typedef float vf __attribute__((vector_size(32)));
typedef int32_t vi __attribute__((vector_size(32)));

static inline vf splat(float x) { vf v; for (int k = 0; k < 8; k++) v[k] = x; return v; }
static inline vi splati(int32_t x) { vi v; for (int k = 0; k < 8; k++) v[k] = x; return v; }
static inline vf as_f(vi v) { vf f; memcpy(&f, &v, sizeof f); return f; }
static inline vi as_i(vf v) { vi i; memcpy(&i, &v, sizeof i); return i; }

/* Cephes' single-precision logarithm on 8 lanes (arguments in (0, 1] here): the mantissa m in
   [sqrt(1/2), sqrt(2)) and exponent e, log(1 + x) with x = m - 1 by a degree-9 polynomial, and
   e ln 2 added in two parts. */
static inline vf log8(vf x) {
    vi tiny = as_i(x) < splati(0x00800000);                   /* at least FLT_MIN (x > 0 here) */
    x = as_f((tiny & splati(0x00800000)) | (~tiny & as_i(x)));
    vi bits = as_i(x);
    vf e = __builtin_convertvector((bits >> 23) - splati(0x7f), vf) + splat(1.0);
    x = as_f((bits & splati(~0x7f800000)) | as_i(splat(0.5)));
    vi low = x < splat(0.707106781186547524);
    vf keep = as_f(low & as_i(x));
    x = x - splat(1.0);
    e = e - as_f(low & as_i(splat(1.0)));
    x = x + keep;
    vf z = x * x;
    static const float p[9] = {7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1,
                               1.4249322787E-1, -1.6668057665E-1, 2.0000714765E-1, -2.4999993993E-1,
                               3.3333331174E-1};
    vf y = splat(p[0]);
    for (int k = 1; k < 9; k++) y = y * x + splat(p[k]);
    y = y * x;
    y = y * z;
    y = y + e * splat(-2.12194440e-4);
    y = y - z * splat(0.5);
    return (x + y) + e * splat(0.693359375);
}

/* Cephes' single-precision sine and cosine on 8 lanes: the octant j of |x| (rounded up to even),
   x reduced by j pi/4 in three parts, one polynomial for each half-octant, and the signs. */
static inline void sincos8(vf x, vf *s, vf *c) {
    vi sign_sin = as_i(x) & splati((int32_t)0x80000000);
    x = as_f(as_i(x) & splati(0x7fffffff));
    vi j = __builtin_convertvector(x * splat(1.27323954473516), vi);
    j = (j + splati(1)) & splati(~1);
    vf y = __builtin_convertvector(j, vf);
    vi swap_sin = (j & splati(4)) << 29;
    vi poly = (j & splati(2)) == splati(0);
    x = x + y * splat(-0.78515625);
    x = x + y * splat(-2.4187564849853515625e-4);
    x = x + y * splat(-3.77489497744594108e-8);
    vi sign_cos = (~(j - splati(2)) & splati(4)) << 29;
    sign_sin = sign_sin ^ swap_sin;
    vf z = x * x;
    vf yc = splat(2.443315711809948E-005);
    yc = yc * z + splat(-1.388731625493765E-003);
    yc = yc * z + splat(4.166664568298827E-002);
    yc = yc * z;
    yc = yc * z;
    yc = yc - z * splat(0.5);
    yc = yc + splat(1.0);
    vf ys = splat(-1.9515295891E-4);
    ys = ys * z + splat(8.3321608736E-3);
    ys = ys * z + splat(-1.6666654611E-1);
    ys = ys * z;
    ys = ys * x;
    ys = ys + x;
    vf sin2 = as_f(poly & as_i(ys));
    vf sin1 = as_f(~poly & as_i(yc));
    vf cos2 = ys - sin2;
    vf cos1 = yc - sin1;
    *s = as_f(as_i(sin1 + sin2) ^ sign_sin);
    *c = as_f(as_i(cos1 + cos2) ^ sign_cos);
}

static void box_muller16_avx2(float *data) {
    const float two_pi = (float)(2.0 * 3.14159265358979323846);
    vf u1, u2, s, c;
    memcpy(&u1, data, sizeof u1);
    memcpy(&u2, data + 8, sizeof u2);
    u1 = splat(1.0f) - u1;
    vf radius = splat(-2.0f) * log8(u1);
    for (int k = 0; k < 8; k++) radius[k] = __builtin_sqrtf(radius[k]);
    sincos8(splat(two_pi) * u2, &s, &c);
    vf n1 = radius * c, n2 = radius * s;
    for (int k = 0; k < 8; k++) {                    /* n std + mean with std 1 and mean 0 */
        data[k] = __builtin_fmaf(n1[k], 1.0f, 0.0f);
        data[k + 8] = __builtin_fmaf(n2[k], 1.0f, 0.0f);
    }
}
#pragma GCC pop_options
#endif

/* Mode 1, torch's default kernel: the C library's single-precision functions. */
static void box_muller16_libm(float *data) {
    for (int k = 0; k < 8; k++) {
        const float u1 = 1.0f - data[k], u2 = data[k + 8];
        const float radius = sqrtf(-2.0f * logf(u1));
        const float angle = (float)(2.0 * 3.14159265358979323846 * (double)u2);
        data[k] = radius * cosf(angle) * 1.0f + 0.0f;
        data[k + 8] = radius * sinf(angle) * 1.0f + 0.0f;
    }
}

static inline void box_muller16(float *data, int mode) {
#ifdef HAVE_AVX2_MODE
    if (mode == 0) {
        box_muller16_avx2(data);
        return;
    }
#endif
    box_muller16_libm(data);
}

static void normal_fill(stream_t *st, float *data, int64_t n, int mode) {
    if (n < 16) {
        for (int64_t i = 0; i < n; i++) data[i] = (float)normal_double(st);
        return;
    }
    uniform_floats(st, data, n);
    for (int64_t i = 0; i + 16 <= n; i += 16) box_muller16(data + i, mode);
    if (n % 16) {
        float *tail = data + n - 16;
        uniform_floats(st, tail, 16);
        box_muller16(tail, mode);
    }
}

/* One epoch's draws of every split. streams (S); alpha, eps_mu, gamma (S, 3) in the order b, theta, a
   (drawn only when hyper is non-zero: the hierarchical model's hyper-parameters; with the fixed priors
   the guide draws theta, b and log a alone); eps (S, eps_stride): theta in [0, rows[s]), b in
   [n_max, n_max + m), log a in [n_max + m, n_max + 2m). */
void draw_epoch(int64_t n_splits, stream_t *streams, const float *alpha, float *eps_mu, float *gamma,
                float *eps, int64_t eps_stride, const int64_t *rows, int64_t n_max, int64_t m, int32_t mode,
                int32_t hyper) {
    for (int64_t s = 0; s < n_splits; s++) {
        stream_t *st = streams + s;
        for (int k = 0; k < 3 && hyper; k++) {
            eps_mu[3 * s + k] = (float)normal_double(st);
            gamma[3 * s + k] = gamma_float(st, alpha[3 * s + k]);
        }
        float *row = eps + s * eps_stride;
        normal_fill(st, row, rows[s], mode);
        normal_fill(st, row + n_max, m, mode);
        normal_fill(st, row + n_max + m, m, mode);
    }
}

/* Test hooks: n scalar Normals, or normal noise of n floats, or a Gamma per alpha, from one stream. */
void draw_scalar_normals(stream_t *st, float *out, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = (float)normal_double(st);
}

void draw_normal_fill(stream_t *st, float *out, int64_t n, int32_t mode) { normal_fill(st, out, n, mode); }

/* Whether mode 0 was compiled (x86-64 with GCC or Clang). */
int32_t has_avx2_mode(void) {
#ifdef HAVE_AVX2_MODE
    return 1;
#else
    return 0;
#endif
}

void draw_gammas(stream_t *st, const float *alpha, float *out, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = gamma_float(st, alpha[i]);
}
