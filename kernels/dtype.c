/* dtype and f32_products names and sizes (kernels.h), apart from the
 * engines: the runner links this file alone, to check experiments' precision
 * settings, and must not link the engines (their CUDA and cuBLAS libraries).
 * Invariant: nothing here calls into an engine. */
#include "config.h"
#include "kernels/kernels.h"
#include "common/check.h"

#include <string.h>

const char *dtype_name(dtype t) {
  switch (t) {
  case DT_F32: return "f32";
  case DT_BF16: return "bf16";
  case DT_F16: return "f16";
  }
  return "unknown";
}

dtype dtype_of_precision(const char *precision) {
  return strcmp(precision, "bf16") == 0   ? DT_BF16
         : strcmp(precision, "fp16") == 0 ? DT_F16
                                          : DT_F32;
}

const char *f32_products_name(f32_products p) {
  switch (p) {
  case F32_EXACT: return "fp32";
  case F32_TF32: return "tf32";
  case F32_3XTF32: return "3xtf32";
  }
  return "unknown";
}

f32_products f32_products_of_precision(const char *precision) {
  return strcmp(precision, "tf32") == 0     ? F32_TF32
         : strcmp(precision, "3xtf32") == 0 ? F32_3XTF32
                                            : F32_EXACT;
}

size_t dtype_size(dtype t) {
  switch (t) {
  case DT_F32: return 4;
  case DT_BF16: return 2;
  case DT_F16: return 2;
  }
  ASSERT(!"unknown dtype");
  return 0;
}
