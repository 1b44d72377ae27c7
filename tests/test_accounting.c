/* model/accounting.c against values worked out by hand for the handout's
 * XXL model (d_model 16384, d_ff 53248, 126 blocks) and TPU v5p mesh
 * (W_ici 1.8e11 B/s, C 4.6e14 FLOP/s, M_X 2, M_Y 1, X 16, Y 4), and
 * against a tiny model whose every number is small enough to check on
 * paper. Exit 0 when every check passes, 1 when one fails. */
#include "config.h"
#include "tests/testlib.h"
#include "model/accounting.h"

#include <math.h>

static int near(double got, double want) {
  return fabs(got - want) <= 1e-12 * fabs(want) + 1e-12;
}

int main(void) {
  /* XXL: P = 2 * 16384 * 53248 * 126 = 219,848,638,464 parameters. */
  acct_model xxl = {16384, 53248, 126, 0};   /* no activations */
  acct_memory mem;
  acct_memory_of(&xxl, &mem);
  check(near(mem.params, 219848638464.0), "XXL parameters %.0f", mem.params);
  check(near(mem.state_bytes, 3517578215424.0),
        "XXL fp32 weights + gradients + AdamW = 16 P = %.0f bytes",
        mem.state_bytes);
  check(near(mem.master_bytes, 879394553856.0) &&
            near(mem.optim_bytes, 1758789107712.0),
        "weights 4 P, optimizer 8 P");
  /* bf16 inputs of both layers: 2 * (16384 + 53248) * 126 = 17,547,264 */
  check(near(mem.act_bytes_per_token, 17547264.0),
        "activations %.0f bytes a token", mem.act_bytes_per_token);
  /* No activations: 3517578215424 / 95e9 = 37.03 -> 38 devices. */
  check(acct_fsdp_min_devices(&mem, 95e9) == 38, "N_FSDP for 95 GB: 38");
  check(near(acct_fsdp_bytes(&mem, 38), 3517578215424.0 / 38),
        "per-device bytes at 38");
  /* 4096 tokens: act = 71,873,593,344 bytes; half stays whole (35.9 GB),
   * the rest shards: (3517578215424 + 35936796672) / n < 95e9 - 35936796672
   * = 59063203328 -> n > 60.16 -> 61. */
  acct_model xxl_b = xxl;
  xxl_b.tokens = 4096;
  acct_memory_of(&xxl_b, &mem);
  check(near(mem.act_bytes, 71873593344.0), "activations at 4096 tokens");
  check(acct_fsdp_min_devices(&mem, 95e9) == 61, "N_FSDP at 4096 tokens: 61");
  /* 8192 tokens: the unsharded half alone (71.9 GB) fits, 16384 tokens
   * (143.7 GB) does not: no N is enough. */
  xxl_b.tokens = 16384;
  acct_memory_of(&xxl_b, &mem);
  check(acct_fsdp_min_devices(&mem, 95e9) == 0,
        "no N_FSDP when half the activations exceed the device");

  /* The mesh: B / X >= C / (W M_X) = 4.6e14 / 3.6e11 = 1277.78, so
   * B >= 16 * 1277.78 = 20444.4 tokens in all, 319.44 per device (64);
   * Y <= F W M_Y / C = 53248 * 1.8e11 / 4.6e14 = 20.84. */
  acct_mesh v5p = {16, 4, 2, 1, 1.8e11, 4.6e14};
  acct_bound b;
  acct_compute_bound(&xxl, &v5p, &b);
  check(near(b.batch_min, 16 * 4.6e14 / 3.6e11), "batch %.2f", b.batch_min);
  check(near(b.per_device_min, 4.6e14 / 3.6e11 / 4), "per device %.2f",
        b.per_device_min);
  check(near(b.y_max, 53248 * 1.8e11 / 4.6e14) && b.tp_ok, "Y max %.2f",
        b.y_max);
  double tm, tf, tt;
  acct_block_times(&xxl, &v5p, b.batch_min, &tm, &tf, &tt);
  check(near(tm, tf) && tt < tm,
        "at the smallest batch math equals the FSDP gather (%.3g s, %.3g s)",
        tm, tf);
  acct_mesh wide = v5p;
  wide.y = 32;
  acct_compute_bound(&xxl, &wide, &b);
  check(!b.tp_ok, "Y = 32 > 20.84 is never compute bound");

  /* Tiny, on paper: d 2, f 3, 1 block, 5 tokens. P = 12; state 192
   * bytes; act = 2 * 5 * 5 = 50 bytes; limit 100: (192 + 25) / n + 25 <
   * 100 -> n > 2.89 -> 3. Mesh X 2, Y 1, M 1, W 1, C 10: B >= 20, per
   * device 10, Y max 0.3. */
  acct_model tiny = {2, 3, 1, 5};
  acct_memory_of(&tiny, &mem);
  check(mem.params == 12 && mem.state_bytes == 192 && mem.act_bytes == 50,
        "tiny: 12 parameters, 192 + 50 bytes");
  check(acct_fsdp_min_devices(&mem, 100) == 3, "tiny: 3 devices");
  acct_mesh m1 = {2, 1, 1, 1, 1, 10};
  acct_compute_bound(&tiny, &m1, &b);
  check(b.batch_min == 20 && b.per_device_min == 10 && near(b.y_max, 0.3) &&
            !b.tp_ok, "tiny mesh: B 20, 10 a device, Y max 0.3");
  return tl_finish();
}
