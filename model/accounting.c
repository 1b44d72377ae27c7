/* The handout's memory and communication model (accounting.h). */
#include "config.h"
#include "model/accounting.h"

#include <math.h>

void acct_memory_of(const acct_model *m, acct_memory *out) {
  out->params = 2.0 * m->d_model * m->d_ff * m->blocks;
  out->master_bytes = 4.0 * out->params;
  out->grad_bytes = 4.0 * out->params;
  out->optim_bytes = 8.0 * out->params;
  out->state_bytes = out->master_bytes + out->grad_bytes + out->optim_bytes;
  out->act_bytes_per_token = 2.0 * (m->d_model + m->d_ff) * m->blocks;
  out->act_bytes = out->act_bytes_per_token * m->tokens;
}

double acct_fsdp_bytes(const acct_memory *mem, double n) {
  return (mem->state_bytes + mem->act_bytes / 2) / n + mem->act_bytes / 2;
}

double acct_fsdp_min_devices(const acct_memory *mem, double limit) {
  double fixed = mem->act_bytes / 2, shared = mem->state_bytes + fixed;
  if (fixed >= limit) return 0;
  /* shared / n + fixed < limit  <=>  n > shared / (limit - fixed) */
  double n = floor(shared / (limit - fixed)) + 1;
  return n < 1 ? 1 : n;
}

void acct_compute_bound(const acct_model *m, const acct_mesh *g,
                        acct_bound *out) {
  out->batch_min = g->x * g->flops / (g->w_ici * g->m_x);
  out->per_device_min = out->batch_min / (g->x * g->y);
  out->y_max = m->d_ff * g->w_ici * g->m_y / g->flops;
  out->tp_ok = g->y <= out->y_max;
}

void acct_block_times(const acct_model *m, const acct_mesh *g, double tokens,
                      double *t_math, double *t_fsdp, double *t_tp) {
  double d = m->d_model, f = m->d_ff;
  *t_math = 4 * tokens * d * f / (g->x * g->y * g->flops);
  *t_fsdp = 4 * d * f / (g->y * g->w_ici * g->m_x);
  *t_tp = 4 * tokens * d / (g->x * g->w_ici * g->m_y);
}
