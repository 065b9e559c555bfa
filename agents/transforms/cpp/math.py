"""The kernel's math: the transcendental functions the vector unit can run, as C++ source.

glibc's ``expf``/``logf`` are calls the compiler does not vectorise, which made a first softmax 6x
slower than ATen's. Each function here is the Cephes single-precision polynomial (relative error
~1e-7, the same as the library's), with the edge cases PyTorch gives: ``exp(-inf) = 0``,
``exp(+inf) = inf``, ``log(0) = -inf``, ``log(x < 0) = nan``, NaN in -> NaN out. ``erf`` is
Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7, 5e-7 once computed in float32; an
absolute bound, so GELU's ``x * erf`` keeps it), or with ``ARBOR_ERF`` (the schedule's ``erf``
knob) a rational function without ``exp`` (absolute error 4.3e-7 in float32). ``tests/agents/test_cpp_codegen.py`` compiles
this alone and compares it with torch over 200k points and the edge values.
"""

from __future__ import annotations

MATH = r"""
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ATen/Parallel.h>

namespace {
inline float arbor_bits(int32_t i) { float f; std::memcpy(&f, &i, 4); return f; }
inline int32_t arbor_int(float f) { int32_t i; std::memcpy(&i, &f, 4); return i; }

// exp: n = round(x / ln2), r = x - n ln2 (two-part ln2), Cephes' degree-6 polynomial p(r) in
// [0.7, 1.42], and 2^n added to p's exponent bits (n in [-126, 128] after the clamp: 2^128 p
// overflows to inf exactly when exp does; at the bottom the result is within 1.2e-38 of zero).
inline float arbor_exp(float x) {
  const float xc = x < -87.33654f ? -87.33654f : (x > 88.72283f ? 88.72283f : x);
  const float n = std::floor(xc * 1.44269504088896341f + 0.5f);
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const float y = arbor_bits(arbor_int(p) + ((int32_t)n << 23));
  return x < -87.33654f ? 0.0f : (x > 88.72283f ? INFINITY : y);
}

// log: x = m 2^e with m in [sqrt(1/2), sqrt(2)), Cephes' polynomial in m - 1; subnormals scaled.
inline float arbor_log(float x) {
  const bool tiny = x < 1.17549435e-38f;
  const float xs = tiny ? x * 8388608.0f : x;
  const int32_t b = arbor_int(xs);
  int32_t e = ((b >> 23) & 0xff) - 126 - (tiny ? 23 : 0);
  float m = arbor_bits((b & 0x007fffff) | 0x3f000000);
  const bool low = m < 0.707106781186547524f;
  e = low ? e - 1 : e;
  m = low ? m + m - 1.0f : m - 1.0f;
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  const float ef = (float)e;
  y = y * m * z - 2.12194440e-4f * ef - 0.5f * z;
  float out = m + y + 0.693359375f * ef;
  out = x == 0.0f ? -INFINITY : out;
  out = x < 0.0f ? NAN : out;
  out = x == INFINITY ? INFINITY : out;
  return x != x ? x : out;
}

inline float arbor_sigmoid(float x) { return 1.0f / (1.0f + arbor_exp(-x)); }

inline float arbor_erf(float x) {
#if ARBOR_ERF
  // x P(x^2) / Q(x^2), degrees 5 and 5, fitted here (Lawson-weighted least squares toward the
  // minimax on [0, 3.92]; beyond, float32 erf is within 6e-8 of 1): no exp, one division, and
  // every coefficient positive (no cancellation). Max abs error 4.3e-7 in float32 over 1.2M
  // points in [-6, 6] against double erf. NaN passes the clamp and stays NaN.
  const float xc = x < -3.92f ? -3.92f : (x > 3.92f ? 3.92f : x);
  const float t = xc * xc;
  float p = 1.956119604e-06f;
  p = p * t + 2.945306478e-04f;
  p = p * t + 4.232667852e-03f;
  p = p * t + 5.419798195e-02f;
  p = p * t + 2.013929337e-01f;
  p = p * t + 1.128379107e+00f;
  float q = 3.761923654e-05f;
  q = q * t + 1.273956499e-03f;
  q = q * t + 1.590929180e-02f;
  q = q * t + 1.186458766e-01f;
  q = q * t + 5.118108392e-01f;
  q = q * t + 1.0f;
  return xc * p / q;
#else
  const float a = std::fabs(x);
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  const float p = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t
                   + 0.254829592f) * t;
  const float y = 1.0f - p * arbor_exp(-a * a);
  return x != x ? x : (x < 0.0f ? -y : y);
#endif
}

// NaN-propagating, as torch.maximum / torch.minimum
inline float arbor_max(float a, float b) { return (a > b || a != a) ? a : b; }
inline float arbor_min(float a, float b) { return (a < b || a != a) ? a : b; }
}  // namespace
"""
