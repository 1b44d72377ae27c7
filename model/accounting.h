/* The handout's memory and communication model of a large FFN-only
 * Transformer (problem communication_accounting, after the TPU Scaling
 * Book's training chapter), as plain functions of its settings.
 *
 * The model: `blocks` blocks of two linear layers, d_model -> d_ff ->
 * d_model, no attention, embeddings or activation function. Master
 * weights, accumulated gradients and AdamW's two moments are fp32 (16
 * bytes a parameter); what backward needs is saved in bf16: each linear
 * layer's input, d_model + d_ff values a token a block. No activation
 * checkpointing.
 *
 * The mesh (forward only): X-way FSDP, Y-way tensor parallelism, M_X / M_Y
 * the axes each of them spans, W_ici the bidirectional link bandwidth
 * (bytes/s), C the chip's FLOP/s. For one block, with B tokens in all,
 * D = d_model, F = d_ff and N = X Y chips:
 *     T_math = 4 B D F / (N C)            two products of 2 B D F FLOPs
 *     T_fsdp = 4 D F / (Y W_ici M_X)      all-gather of the bf16 weights
 *     T_tp   = 4 B D / (X W_ici M_Y)      the activations' collectives
 * The block is compute bound when T_math >= T_fsdp and T_math >= T_tp:
 *     B / X >= C / (W_ici M_X)            (per-device batch B / N >= that / Y)
 *     Y <= F W_ici M_Y / C                (else no batch makes it so) */
#ifndef TL_MODEL_ACCOUNTING_H
#define TL_MODEL_ACCOUNTING_H

typedef struct acct_model {
  double d_model, d_ff, blocks;
  double tokens;                 /* tokens of the batch whose activations count */
} acct_model;

typedef struct acct_memory {
  double params;                 /* 2 d_model d_ff blocks */
  double master_bytes;           /* fp32 weights: 4 a parameter */
  double grad_bytes;             /* fp32 accumulated gradients: 4 */
  double optim_bytes;            /* AdamW's m and v in fp32: 8 */
  double state_bytes;            /* the three above */
  double act_bytes_per_token;    /* bf16 inputs of both layers of every block */
  double act_bytes;              /* that times tokens */
} acct_memory;

void acct_memory_of(const acct_model *m, acct_memory *out);

/* Bytes a device holds when the state and half of the activations are
 * sharded over n devices (the other half, every second layer, is not):
 *     (state + act / 2) / n + act / 2 */
double acct_fsdp_bytes(const acct_memory *mem, double n);

/* The smallest n >= 1 with acct_fsdp_bytes(n) < limit; 0 when none is,
 * because the unsharded half of the activations alone reaches the limit. */
double acct_fsdp_min_devices(const acct_memory *mem, double limit);

typedef struct acct_mesh {
  double x, y;                   /* FSDP and tensor-parallel degrees */
  double m_x, m_y;               /* mesh axes each spans */
  double w_ici;                  /* bytes/s, bidirectional */
  double flops;                  /* C, FLOP/s a chip */
} acct_mesh;

typedef struct acct_bound {
  double batch_min;              /* smallest total batch (tokens) compute bound */
  double per_device_min;         /* batch_min / (X Y) */
  double y_max;                  /* largest Y for which some batch is */
  int tp_ok;                     /* y <= y_max */
} acct_bound;

void acct_compute_bound(const acct_model *m, const acct_mesh *mesh,
                        acct_bound *out);

/* The three times for one block at `tokens` tokens in all, seconds. */
void acct_block_times(const acct_model *m, const acct_mesh *mesh,
                      double tokens, double *t_math, double *t_fsdp,
                      double *t_tp);

#endif
