/* Job kind `comm_accounting`: the handout's communication_accounting
 * problem evaluated from settings (model/accounting.h), no GPU needed.
 *
 * (a) memory of the fp32 master weights, gradients and AdamW state of an
 *     FFN-only model, the bf16 activations backward keeps for `tokens`
 *     tokens, and how many devices of `device_gb` that state fills;
 * (b) bytes per device with the state and half of the activations
 *     sharded over n_fsdp devices, and the smallest n_fsdp under
 *     `device_gb`;
 * (c) for an X-way FSDP by Y-way TP mesh, the smallest batch (tokens) at
 *     which forward is compute bound, per device and in all, and the
 *     three times of one block at that batch.
 * Sweeping n_fsdp, the mesh or the model is a config edit. GB = 10^9
 * bytes, as the handout's device sizes. */
#include "config.h"
#include "common/check.h"
#include "harness/kind.h"
#include "model/accounting.h"

#include <math.h>
#include <stdio.h>

typedef struct acct_settings {
  run_settings run;
  double d_model, d_ff, blocks, tokens;
  double device_gb;
  double n_fsdp;
  double x, y, m_x, m_y, w_ici, flops;
} acct_settings;

#define ROW(sec, name, lo, hi, unit, def, help)                              \
  {sec, #name, FLOAT_FIELD(acct_settings, name), lo, hi, NULL, unit, def, help}

static const param_def params[] = {
    COMMON_PARAMS(acct_settings),
    ROW("model", d_model, 1, 1e7, NULL, "16384", "model width (XXL's)"),
    ROW("model", d_ff, 1, 1e8, NULL, "53248", "FFN width (XXL's)"),
    ROW("model", blocks, 1, 1e5, NULL, "126", "blocks of two linear layers"),
    ROW("model", tokens, 0, 1e12, NULL, "1",
        "tokens whose bf16 activations backward keeps (1: bytes a token)"),
    ROW("fsdp", device_gb, 1e-3, 1e6, "GB", "95",
        "memory of one device (TPU v5p: 95 GB; H100: 80 GB)"),
    ROW("fsdp", n_fsdp, 0, 1e9, NULL, "0",
        "devices the state and half the activations are sharded over (0: "
        "report only the smallest that fits)"),
    ROW("mesh", x, 1, 1e6, NULL, "16", "FSDP degree X"),
    ROW("mesh", y, 1, 1e6, NULL, "4", "tensor-parallel degree Y"),
    ROW("mesh", m_x, 1, 3, NULL, "2", "mesh axes the FSDP dimension spans"),
    ROW("mesh", m_y, 1, 3, NULL, "1", "mesh axes the TP dimension spans"),
    ROW("mesh", w_ici, 1, 1e15, "B/s", "1.8e11",
        "bidirectional inter-chip bandwidth (TPU v5p: 2 x 9e10)"),
    ROW("mesh", flops, 1, 1e18, "FLOP/s", "4.6e14",
        "a chip's bf16 FLOP/s (TPU v5p: 4.6e14)"),
};

static const char *const metrics[] = {
    "params", "master_gb", "grad_gb", "optim_gb", "state_gb",
    "act_bytes_per_token", "act_gb", "devices_for_state",
    "fsdp_gb_per_device", "fsdp_min_devices", "batch_min_tokens",
    "per_device_batch_min", "y_max", "tp_compute_bound", "t_math_ms",
    "t_fsdp_ms", "t_tp_ms", NULL};

/* ---- the run side: left out of the runner's build (harness/kind.h) ------- */
#ifndef KIND_DECLARATION_ONLY

static int run(const void *settings, result *r) {
  const acct_settings *s = settings;
  const double gb = 1e9;
  acct_model m = {s->d_model, s->d_ff, s->blocks, s->tokens};
  acct_memory mem;
  acct_memory_of(&m, &mem);
  result_set(r, "params", mem.params);
  result_set(r, "master_gb", mem.master_bytes / gb);
  result_set(r, "grad_gb", mem.grad_bytes / gb);
  result_set(r, "optim_gb", mem.optim_bytes / gb);
  result_set(r, "state_gb", mem.state_bytes / gb);
  result_set(r, "act_bytes_per_token", mem.act_bytes_per_token);
  result_set(r, "act_gb", mem.act_bytes / gb);
  result_set(r, "devices_for_state", mem.state_bytes / (s->device_gb * gb));
  if (s->n_fsdp >= 1)
    result_set(r, "fsdp_gb_per_device", acct_fsdp_bytes(&mem, s->n_fsdp) / gb);
  double n = acct_fsdp_min_devices(&mem, s->device_gb * gb);
  result_set(r, "fsdp_min_devices", n > 0 ? n : NAN);
  acct_mesh g = {s->x, s->y, s->m_x, s->m_y, s->w_ici, s->flops};
  acct_bound b;
  acct_compute_bound(&m, &g, &b);
  result_set(r, "batch_min_tokens", b.batch_min);
  result_set(r, "per_device_batch_min", b.per_device_min);
  result_set(r, "y_max", b.y_max);
  result_set(r, "tp_compute_bound", b.tp_ok);
  double tm, tf, tt;
  acct_block_times(&m, &g, b.batch_min, &tm, &tf, &tt);
  result_set(r, "t_math_ms", tm * 1e3);
  result_set(r, "t_fsdp_ms", tf * 1e3);
  result_set(r, "t_tp_ms", tt * 1e3);
  if (n == 0)
    snprintf(r->message, sizeof r->message,
             "half the activations alone exceed %g GB: no FSDP degree fits",
             s->device_gb);
  return 0;
}

#endif /* KIND_DECLARATION_ONLY */

const kind_def kind_comm_accounting = {
    .name = "comm_accounting",
    .summary = "the handout's memory and communication model of an "
               "FFN-only model on an FSDP x TP mesh (no GPU)",
    .gpu_backend = NULL,
    .one_rank = true,
    KIND_TABLES(acct_settings, NULL),
};
