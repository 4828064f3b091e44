/* A portable, deterministic exp for the kernels: the same bits on every machine with IEEE-754 doubles.
 *
 * The C library's exp differs between libraries and versions (and glibc's vector exp between
 * machines), so a kernel that calls it is reproducible only where that library is. portable_exp uses
 * only IEEE-754 double additions, multiplications and integer bit operations, each rounded to
 * nearest, in a fixed order, with no branch on the argument:
 *
 *     k  = nearest integer to x log2(e)        (x log2(e) + 1.5 2^52, the integer in its low bits)
 *     hi = x - k ln2_hi  (exact),  lo = k ln2_lo,  r = hi - lo          (Cody and Waite's reduction)
 *     exp(r) = 1 + (hi - (lo - r^2 P(r))),  P(r) = sum_{n=2..13} r^(n-2) / n!  (|r| < 0.35; the even
 *                                              and odd halves by Horner's rule in r^2)
 *     exp(x) = exp(r) 2^k1 2^k2, k1 = k/2 rounded to even, k2 = k - k1   (scalings by exponent bits: 2^1024 and
 *                                              the subnormal results are reached without a branch)
 *
 * with x first clamped to [-746, 746] (beyond which exp rounds to 0 or overflows to +inf: the
 * scalings then give exactly that). NaN stays NaN, +inf gives +inf, -inf 0. Within 1 unit in the
 * last place of the exact exp (tests/selection/test_portable_exp.py measures it against the C
 * library's and long double's exp). Compiled without contraction into fused multiply-adds
 * (-ffp-contract=off) and without fast-math, a vectorised loop computes exactly the scalar
 * operations in every lane, so the bits do not depend on vectorisation or on the instruction set.
 * irtlib.selection.portable_exp computes the same function with numpy, bit for bit.
 */
#ifndef IRTLIB_PORTABLE_EXP_H
#define IRTLIB_PORTABLE_EXP_H

#include <float.h>
#include <stdint.h>
#include <string.h>

#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
#error "portable_exp needs double operations rounded to double (no x87 excess precision)"
#endif

#if defined(__GNUC__)
#define PEXP_INLINE static inline __attribute__((always_inline))      /* inlined into the loops it vectorises */
#else
#define PEXP_INLINE static inline
#endif

#define PEXP_LOG2E 0x1.71547652b82fep+0
#define PEXP_SHIFT 0x1.8p+52                /* 1.5 2^52: adding it rounds to an integer */
#define PEXP_LN2_HI 0x1.62e42feep-1         /* ln 2's leading 32 bits: k ln2_hi is exact for |k| < 2^21 */
#define PEXP_LN2_LO 0x1.a39ef35793c76p-33   /* ln 2 - ln2_hi */
#define PEXP_CLAMP 746.0                    /* exp(-746) rounds to 0, exp(746) overflows */

PEXP_INLINE double pexp_from_bits(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

PEXP_INLINE uint64_t pexp_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

/* c ? a : b by bit masks (no branch, which GCC's if-conversion may keep). */
PEXP_INLINE double pexp_select(int c, double a, double b)
{
    const uint64_t m = -(uint64_t)c;
    return pexp_from_bits((m & pexp_bits(a)) | (~m & pexp_bits(b)));
}

/* The reduced argument's polynomial P(r) = E(r^2) + r O(r^2), E and O the halves of
 * sum_{n=2..13} r^(n-2) / n! with the even and the odd powers of r, each by Horner's rule in r^2:
 * O (pexp_odd_half) and E (pexp_even_half). */
PEXP_INLINE double pexp_odd_half(double r2)
{
    double e = 0x1.6124613a86d09p-33;      /* 1/13! */
    e = e * r2 + 0x1.ae64567f544e4p-26;    /* 1/11! */
    e = e * r2 + 0x1.71de3a556c734p-19;    /* 1/9! */
    e = e * r2 + 0x1.a01a01a01a01ap-13;    /* 1/7! */
    e = e * r2 + 0x1.1111111111111p-7;     /* 1/5! */
    return e * r2 + 0x1.5555555555555p-3;  /* 1/3!: O(0), P's coefficient of r */
}

PEXP_INLINE double pexp_even_half(double r2)
{
    double o = 0x1.1eed8eff8d898p-29;      /* 1/12! */
    o = o * r2 + 0x1.27e4fb7789f5cp-22;    /* 1/10! */
    o = o * r2 + 0x1.a01a01a01a01ap-16;    /* 1/8! */
    o = o * r2 + 0x1.6c16c16c16c17p-10;    /* 1/6! */
    o = o * r2 + 0x1.5555555555555p-5;     /* 1/4! */
    return o * r2 + 0.5;                   /* 1/2!: E(0) = P(0) */
}

/* exp(r) 2^k from the reduction's parts (hi - lo = r, r2 = r^2, kd = k) and P's halves. */
PEXP_INLINE double pexp_finish(double kd, double hi, double lo, double r, double r2, double e, double o)
{
    const double p = e + r * o;            /* P(r) */
    const double c = lo - r2 * p;
    const double y = 1.0 + (hi - c);
    /* k = k1 + k2, both halves in the exponent's range; 2^k1 and 2^k2 from the bits of k1 + 1.5 2^52
     * (whose low 12 bits are k1's, modulo 2^12): only 64-bit additions and shifts, which vectorise */
    const double t1 = kd * 0.5 + PEXP_SHIFT;
    const double k2 = kd - (t1 - PEXP_SHIFT);
    const double t2 = k2 + PEXP_SHIFT;
    const double s1 = pexp_from_bits((pexp_bits(t1) + 1023u) << 52);
    const double s2 = pexp_from_bits((pexp_bits(t2) + 1023u) << 52);
    return (y * s1) * s2;
}

/* The clamp and the reduction: kd = k, hi, lo, r = hi - lo, r2 = r^2. */
PEXP_INLINE void pexp_reduce(double x, double *kd, double *hi, double *lo, double *r, double *r2)
{
    x = pexp_select(x < -PEXP_CLAMP, -PEXP_CLAMP, x);      /* NaN passes both */
    x = pexp_select(x > PEXP_CLAMP, PEXP_CLAMP, x);
    double k = x * PEXP_LOG2E;
    k = k + PEXP_SHIFT;
    k = k - PEXP_SHIFT;                    /* k, an integer, |k| <= 1077 */
    *kd = k;
    *hi = x - k * PEXP_LN2_HI;
    *lo = k * PEXP_LN2_LO;
    *r = *hi - *lo;
    *r2 = *r * *r;
}

PEXP_INLINE double portable_exp(double x)
{
    double kd, hi, lo, r, r2;
    pexp_reduce(x, &kd, &hi, &lo, &r, &r2);
    return pexp_finish(kd, hi, lo, r, r2, pexp_even_half(r2), pexp_odd_half(r2));
}

/* portable_exp(x) and portable_exp(-x), bit for bit, sharing the reduction and the polynomial's
 * halves: every step of the reduction is odd in x (the clamp is symmetric, and rounding to
 * nearest even is), so -x reduces to -kd, -hi, -lo, -r and the same r^2, and P(-r) = E - r O. */
PEXP_INLINE void portable_exp_pair(double x, double *ex, double *enx)
{
    double kd, hi, lo, r, r2;
    pexp_reduce(x, &kd, &hi, &lo, &r, &r2);
    const double e = pexp_even_half(r2), o = pexp_odd_half(r2);
    *ex = pexp_finish(kd, hi, lo, r, r2, e, o);
    *enx = pexp_finish(-kd, -hi, -lo, -r, r2, e, o);
}

/* The largest |x| portable_exp_pair_normal takes: |k| <= 1010, so exp(r) 2^k and exp(-r) 2^-k are normal
 * numbers (exp(r) is within [0.7, 1.42]: 2^-1022 < 0.7 2^-1010, 1.42 2^1010 < 2^1024). */
#define PEXP_NORMAL_RANGE 700.0

/* portable_exp_pair(x) bit for bit where |x| <= PEXP_NORMAL_RANGE (elsewhere wrong: the caller checks), with
 * fewer operations. There the clamp leaves x as it is, and a product by a power of two whose result is a
 * normal number is exact, so pexp_finish's (y 2^k1) 2^k2 is y 2^k: one product by 2^k (and one by 2^-k),
 * each built from k's bits (those of x log2(e) + 1.5 2^52 less those of 1.5 2^52) instead of two halves
 * of k and two products. The reduction and y are pexp_reduce's and pexp_finish's operations, in their order. */
PEXP_INLINE void portable_exp_pair_normal(double x, double *ex, double *enx)
{
    double k = x * PEXP_LOG2E;
    const double shifted = k + PEXP_SHIFT;
    k = shifted - PEXP_SHIFT;
    const double hi = x - k * PEXP_LN2_HI;
    const double lo = k * PEXP_LN2_LO;
    const double r = hi - lo;
    const double r2 = r * r;
    const double e = pexp_even_half(r2), o = pexp_odd_half(r2);
    const double mr = -r;
    const double p = e + r * o;
    const double c = lo - r2 * p;
    const double y = 1.0 + (hi - c);
    const double pn = e + mr * o;
    const double cn = -lo - r2 * pn;
    const double yn = 1.0 + (-hi - cn);
    const uint64_t ki = pexp_bits(shifted) - pexp_bits(PEXP_SHIFT);     /* k modulo 2^64 */
    *ex = y * pexp_from_bits((ki + 1023u) << 52);
    *enx = yn * pexp_from_bits((1023u - ki) << 52);
}

#endif
