/* Job kind `accumulation`: the handout's mixed_precision_accumulation.
 *
 * s = 0, then `additions` times s += value, with the accumulator s and the
 * added value each held in a given format, sequentially (one thread, as
 * the handout's Python loop):
 *
 *   fp32_fp32       fp32 s += fp32 x
 *   fp16_fp16       fp16 s += fp16 x   (the sum rounded to fp16 each time)
 *   fp32_fp16       fp32 s += fp16 x   (x promoted implicitly, as PyTorch
 *                                      promotes a float16 tensor added to a
 *                                      float32 one)
 *   fp32_fp16_cast  fp32 s += (fp32) fp16 x   (the explicit cast)
 *   bf16_bf16       bf16 s += bf16 x
 *   fp32_bf16       fp32 s += bf16 x
 *
 * x is `value` rounded once (from double, nearest even) to its format.
 * Metrics: each final s, and its error s - additions * value.
 *
 * backend cuda runs one GPU thread (jobs/accumulation_cuda.cu), with the
 * device's own fp16 / bf16 additions (__hadd: the exact sum rounded to
 * nearest even). backend cpu emulates them in software: the sum of two
 * fp16 or bf16 values is exact in double (their exponents differ by far
 * less than 53 - 11 bits here), then round_to() rounds it to the format,
 * nearest even, once per addition. Both must agree bit for bit. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/check.h"
#include "harness/kind.h"

static const char *const backends[] = {"cpu", "cuda", NULL};

typedef struct accumulation_settings {
  run_settings run;
  const char *backend;
  int additions;
  double value;
} accumulation_settings;

static const param_def params[] = {
    COMMON_PARAMS(accumulation_settings),
    {"run", "backend", STRING_FIELD(accumulation_settings, backend), 0, 0,
     backends, NULL, NULL,
     "where the sums run: cpu (software fp16 / bf16 rounding) or cuda (one "
     "GPU thread, hardware fp16 / bf16)"},
    {"run", "additions", INT_FIELD(accumulation_settings, additions), 1,
     100000000, NULL, NULL, "1000",
     "how many times value is added (the handout: 1000)"},
    {"run", "value", FLOAT_FIELD(accumulation_settings, value), -1e4, 1e4,
     NULL, NULL, "0.01", "the value added each time (the handout: 0.01)"},
};

static const char *const metrics[] = {
    "sum_fp32_fp32", "err_fp32_fp32", "sum_fp16_fp16", "err_fp16_fp16",
    "sum_fp32_fp16", "err_fp32_fp16", "sum_fp32_fp16_cast",
    "err_fp32_fp16_cast", "sum_bf16_bf16", "err_bf16_bf16", "sum_fp32_bf16",
    "err_fp32_bf16", NULL};

/* ---- the run side: left out of the runner's build (harness/kind.h) ------- */
#ifndef KIND_DECLARATION_ONLY

/* The variants, in this order everywhere (the CUDA file too). */
enum { V_FP32_FP32, V_FP16_FP16, V_FP32_FP16, V_FP32_FP16_CAST, V_BF16_BF16,
       V_FP32_BF16, NVARIANTS };
static const char *const variant[NVARIANTS] = {
    "fp32_fp32", "fp16_fp16", "fp32_fp16", "fp32_fp16_cast", "bf16_bf16",
    "fp32_bf16"};

#ifdef HAVE_CUDA
/* jobs/accumulation_cuda.cu: the six sums on GPU 0, in the order above;
 * x16 and xb16 are the bits of value in fp16 and bf16. */
int accumulation_cuda(long long additions, float x32, unsigned short x16,
                      unsigned short xb16, double out[6]);
#endif

/* ---- software fp16 / bf16 --------------------------------------------------- */

/* A binary format with `p` significant bits, smallest normal exponent emin,
 * largest finite value max: fp16 (11, -14, 65504), bf16 (8, -126,
 * 0x1.fep127). */
typedef struct fmt {
  int p, emin;
  double max;
} fmt;
static const fmt F16 = {11, -14, 65504.0};
static const fmt BF16 = {8, -126, 0x1.fep127};

/* v rounded to f, nearest even: v / q rounded to an integer in the default
 * rounding mode (nearest even), q the spacing of f's values near v (fixed
 * below the normal range: subnormals). Beyond max: +-inf, as a cast. */
static double round_to(double v, fmt f) {
  if (v == 0 || !isfinite(v)) return v;
  int e = ilogb(v);
  if (e < f.emin) e = f.emin;
  double q = ldexp(1.0, e - (f.p - 1));
  double r = nearbyint(v / q) * q;
  if (fabs(r) > f.max) return copysign(INFINITY, v);
  return r;
}

#ifdef HAVE_CUDA
/* The bits of a value of f (exact: v is already rounded to f), for the
 * CUDA kernel's 16-bit inputs. */
static unsigned short bits16(double v, fmt f) {
  if (f.p == 8) {   /* bf16: the top half of the fp32 bits */
    float x = (float)v;
    unsigned int u;
    memcpy(&u, &x, sizeof u);
    return (unsigned short)(u >> 16);
  }
  unsigned short s = v < 0 ? 0x8000 : 0;
  double a = fabs(v);
  if (a == 0) return s;
  if (isinf(a)) return s | 0x7c00;
  int e = ilogb(a);
  if (e < -14) return s | (unsigned short)(a / 0x1p-24);    /* subnormal */
  return s | (unsigned short)((e + 15) << 10) |
         (unsigned short)((a / ldexp(1.0, e) - 1.0) * 1024.0);
}
#endif

static void sums_cpu(long long n, double value, double out[NVARIANTS]) {
  float x32 = (float)value, s32 = 0;
  double x16 = round_to(value, F16), xb = round_to(value, BF16);
  float x16f = (float)x16, xbf = (float)xb;   /* exact */
  double s16 = 0, sb = 0;
  float s3 = 0, s4 = 0, s6 = 0;
  for (long long i = 0; i < n; i++) {
    s32 += x32;
    s16 = round_to(s16 + x16, F16);
    s3 += x16f;           /* fp16 x promoted to fp32: exact, so = the cast */
    s4 += (float)x16;
    sb = round_to(sb + xb, BF16);
    s6 += xbf;
  }
  out[V_FP32_FP32] = s32;
  out[V_FP16_FP16] = s16;
  out[V_FP32_FP16] = s3;
  out[V_FP32_FP16_CAST] = s4;
  out[V_BF16_BF16] = sb;
  out[V_FP32_BF16] = s6;
}

static int run(const void *settings, result *r) {
  const accumulation_settings *s = settings;
  long long n = s->additions;
  double value = s->value, out[NVARIANTS];
  if (strcmp(s->backend, "cuda") == 0) {
#ifdef HAVE_CUDA
    TRY(accumulation_cuda(n, (float)value, bits16(round_to(value, F16), F16),
                          bits16(round_to(value, BF16), BF16), out));
#else
    FAIL(ERR_FAIL, "backend cuda: this build has no CUDA (configure found no "
         "CUDA toolkit)");
#endif
  } else {
    sums_cpu(n, value, out);
  }
  double exact = (double)n * value;
  char msg[sizeof r->message] = "";
  for (int v = 0; v < NVARIANTS; v++) {
    char col[64];
    snprintf(col, sizeof col, "sum_%s", variant[v]);
    result_set(r, col, out[v]);
    snprintf(col, sizeof col, "err_%s", variant[v]);
    result_set(r, col, out[v] - exact);
    snprintf(msg + strlen(msg), sizeof msg - strlen(msg), "%s%s=%.9g",
             v ? " " : "", variant[v], out[v]);
  }
  snprintf(r->message, sizeof r->message, "%s", msg);
  return 0;
}

#endif /* KIND_DECLARATION_ONLY */

const kind_def kind_accumulation = {
    .name = "accumulation",
    .summary = "the handout's mixed_precision_accumulation: `additions` "
               "sequential additions of `value` with fp32 / fp16 / bf16 "
               "accumulators and values; each sum and its error from "
               "additions * value",
    .gpu_backend = "cuda",
    .one_rank = true,
    KIND_TABLES(accumulation_settings, NULL),
};
