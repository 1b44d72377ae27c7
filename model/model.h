/* The course's Transformer LM (shared/spec/model.md) on any engine.
 *
 * Parameters, gradients and the two AdamW moments each live in ONE engine
 * allocation laid out from the size table (model_layout); every tensor is a
 * named view (offset, shape) carrying the reference's state_dict name, so
 * checkpointing, flattened all-reduce, buckets and sharding are offsets into
 * one buffer. Activations saved for backward are a second table of named
 * views over one allocation, so memory is accounted per tensor. */
#ifndef TL_MODEL_H
#define TL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

/* The block's normalisation: model.md's RMSNorm (a gain per norm), or,
 * for the 2024 edition's pytorch_layernorm, torch.nn.LayerNorm (a weight
 * and a bias per norm: every norm of every block and the final one). It
 * changes the parameter table, so it is part of the architecture. */
typedef enum model_norm { NORM_RMS = 0, NORM_LAYER = 1 } model_norm;
/* "rmsnorm" / "layernorm"; model_norm_parse: 0, or -1 for another name. */
const char *model_norm_name(model_norm n);
int model_norm_parse(const char *name, model_norm *n);

typedef struct model_config {
  int vocab, d_model, d_ff, layers, heads;
  float rope_theta;   /* 10000 */
  float norm_eps;     /* 1e-5 */
  model_norm norm;    /* NORM_RMS (model.md's sizes) */
} model_config;

/* Named sizes of model.md (small, medium, large, xl, 2.7B, 10B) with vocab
 * 10000, plus tiny ones for tests and CI ("tiny": vocab 64, d 32, d_ff 48,
 * 2 layers, 4 heads; "nano": vocab 16, d 8, d_ff 12, 1 layer, 2 heads).
 * Returns -1 for an unknown name. */
int model_config_by_name(const char *name, model_config *c);
const char *const *model_size_names(void);     /* NULL-terminated */
/* A job's `size` setting: a name above or explicit dimensions "D/F/L/H"
 * (d_model/d_ff/layers/heads, the rest as "nano"), with the given
 * vocabulary; 0, or -1 with "what is wrong (allowed: ...)" in err. */
int model_config_parse(const char *size, int vocab, model_config *c,
                       char *err, size_t n);
/* 0, or -1 with "what is wrong (what is allowed)" in err (heads divide
 * d_model, d_head even for RoPE, every size positive). */
int model_config_check(const model_config *c, char *err, size_t n);

/* One named tensor of a flat buffer. */
typedef struct tensor_view {
  char name[64];      /* "layers.3.attn.q_proj.weight" */
  size_t offset;      /* in elements from the buffer start */
  size_t numel;
  int ndim;
  int shape[2];
} tensor_view;

/* The parameter table, in the reference's state_dict order. Computed from
 * the config alone (no allocation), so the counts of the big sizes can be
 * checked anywhere. With NORM_LAYER each norm's "weight" is followed by
 * its "bias" (torch.nn.LayerNorm's state_dict order). *views is malloc'd;
 * the caller frees it. */
int model_layout(const model_config *c, tensor_view **views, int *nviews,
                 size_t *nparams);

typedef struct adamw_config {
  float lr, beta1, beta2, eps, weight_decay;  /* 1e-3, .9, .999, 1e-8, .01 */
} adamw_config;
adamw_config adamw_defaults(void);

typedef struct model model;

/* Allocate parameters, gradients, AdamW state and activations for batches of
 * at most `batch` sequences of `seq` tokens on engine e. `compute` is the
 * matrix-product precision (kernels.h). ERR_OOM if memory runs out.
 * LayerNorm (model_config.norm) runs on the op-by-op path only: the fused
 * path's kernels fuse RMSNorm, so model_create_ex refuses it there. */
int model_create(model **out, engine *e, const model_config *c, int batch,
                 int seq, dtype compute);
/* How the model computes (model_create_ex). */
typedef struct model_options {
  dtype compute;       /* matrix-product inputs: f32, bf16 or f16 */
  int fused;           /* 0: op-by-op (one kernel per operation, attention
                        * materialised, as PyTorch eager runs the reference);
                        * 1: the fused path (forward_fused.c) */
  attn_impl attention; /* fused path: ATTN_FLASH or ATTN_MATERIALIZED;
                        * op-by-op is always materialised */
  f32_products f32;    /* how f32 products run: F32_EXACT (true fp32),
                        * F32_TF32, F32_3XTF32 (kernels.h) */
  int graphs;          /* 1: forward's and backward's engine work is
                        * recorded as a CUDA graph (the cuda engine only)
                        * and replayed, see model_graph_replays */
  int grad_slots;      /* 1 (fused path): trained with model_backward_adamw
                        * only; the gradients live in two slots, one of a
                        * layer's size, the other of the largest of a
                        * layer, the head and the embedding (which both
                        * use it), each group's only until
                        * its update, not in a buffer of every gradient
                        * (model_grads is then NULL); and, unless
                        * keep_norms, backward rebuilds, rather than
                        * forward saves, the norms' 16-bit outputs (two
                        * RMSNorm passes a layer) and the fp32 residual
                        * after attention (one product of d_model^2 a
                        * token): 8 x d_model bytes a token a layer with
                        * 16-bit products */
  int keep_norms;      /* with grad_slots: forward saves those tensors as
                        * it does without slots (the memory for the time
                        * of the rebuilds, where the memory is there);
                        * without slots they are saved anyway */
  int adamw_blocks;    /* model_backward_adamw's updates, beside backward,
                        * hold at most this many thread blocks (one per SM
                        * on Hopper: eng_side_view); 0: as many as they
                        * need */
  int sm_reserve;      /* model_backward_adamw's backward runs with its
                        * matrix products shaped for the device's SMs
                        * minus this many (eng_ctx.sm_reserve; the cuda
                        * engine only), left to the updates beside it;
                        * 0: the whole device */
  int ckpt_layers;      /* activation checkpointing (fused path): 0 off;
                        * k > 0: forward keeps every layer's activations
                        * only for the k layers it is in (a workspace of
                        * k layers' tensors that every group of k reuses)
                        * and the input of each group's first layer;
                        * backward reruns a group's forward from that
                        * input before its backward (the last group's
                        * are still there), so one extra forward of all
                        * but the last group buys L - k layers' tensors
                        * for L / k inputs. Gradients are bit for bit
                        * those without it. */
  int ckpt_keep_attn;  /* 1 (with ckpt_layers > 0 and flash attention):
                        * every layer keeps its attention output and
                        * logsumexp (their own tensors, not the group
                        * workspace's), so backward's rerun of a group
                        * skips the attention kernels, the most costly
                        * part of a long context's forward, for
                        * 2 x d_model + 4 x heads bytes a token a layer
                        * (16-bit products). The same bits: flash's
                        * forward is deterministic, so the rerun would
                        * have rewritten what is kept. */
  int head_chunk;      /* R > 0 (fused path): the head's logits (fp32,
                        * [B*T, vocab]) and their gradient are made R
                        * rows at a time: forward keeps each row's loss
                        * and logsumexp, backward makes each chunk's
                        * logits again (one more head product) for its
                        * gradient; model_logits is then NULL and
                        * forward needs targets. At the 2026
                        * leaderboard's 32768 tokens a GPU and
                        * vocabulary 151936 the whole logits and their
                        * 16-bit gradient take 27.8 GiB. The same
                        * losses; the weights to rounding (the head's
                        * weight gradient adds its chunks in turn).
                        * 0: the whole head at once */
  int bound_weights;   /* W > 0 (fused path; gradient slots follow):
                        * the weight matrices are the caller's, bound
                        * group by group (model_set_weight_hook), as
                        * fully sharded data parallelism over W ranks
                        * gathers them (parallel/fsdp.h), each group cut
                        * in W chunks (model_group_chunk); the model
                        * keeps only the norms' gains, and trains through
                        * model_backward with a grad hook, the caller
                        * stepping the optimizer. 0: off */
  int adamw_in_products; /* 1 (with grad_slots): model_backward_adamw
                        * updates each weight matrix inside the product
                        * that makes its gradient (k_matmul_adamw, on
                        * backward's stream; the gradient is never
                        * stored); the norms' gains and the embedding as
                        * without it, beside backward */
  int grad_lt;         /* 1 (with grad_slots, not bound_weights or
                        * adamw_in_products): the weight matrices'
                        * gradients (every 2-D view but the embedding's,
                        * and the head's only when it is made whole,
                        * head_chunk 0) are stored as the products' input
                        * dtype, rounded by the product that makes them,
                        * and AdamW widens them as it reads them: what
                        * PyTorch's autocast computes (its weight
                        * gradient is the 16-bit product's output), for
                        * half the bytes written and read. The norms'
                        * gains and the embedding, sums over rows, stay
                        * fp32. Nothing with an fp32 compute dtype. */
  int adamw_serial;    /* 1: model_backward_adamw's updates run on
                        * backward's own stream, each as its gradient is
                        * final, rather than beside backward on a side
                        * stream: the optimizer in backward's memory
                        * without the overlap, for a GPU at its power cap
                        * (where updates beside the products slow every
                        * kernel by more than they hide). The same
                        * weights. */
} model_options;
/* model_create with options; model_create is {compute, op-by-op,
 * materialised, F32_EXACT, no graphs}. On the fused path with 16-bit
 * compute the model also keeps a 16-bit copy of the weights
 * ("params.low"), which its products read. The copy is the model's own
 * business and never stale: the weights are written only through the
 * model (model_init, model_set_params, st_load_model, model_adamw_step,
 * which keep the copy current as they write) or through a pointer from
 * model_params_writable / model_place_params, after which the model
 * rebuilds the copy before every pass. Nobody has to announce a write. */
int model_create_ex(model **out, engine *e, const model_config *c, int batch,
                    int seq, const model_options *o);
void model_destroy(model *m);
const model_config *model_get_config(const model *m);

/* Seeded initialisation by model.md's rules (truncated normals, ones;
 * LayerNorm's biases zeros, as PyTorch's), from the portable generator of model/rng.h: the same seed gives the same
 * weights on every machine and engine. Also zeroes the gradients and the
 * AdamW state and resets the step counter. */
int model_init(model *m, uint64_t seed);

/* The flat buffers (engine memory) and their table. The weights are read
 * only through model_params; writing them goes through the calls below,
 * so that what the model derives from them (the fused path's 16-bit copy)
 * follows. */
const float *model_params(const model *m);
/* n weights from the host (fp32) at element `offset` of the flat buffer
 * (a view's offset and numel: one tensor; 0 and model_nparams: all),
 * queued like eng_upload. */
int model_set_params(model *m, size_t offset, const float *host, size_t n);
/* The weights for writing in engine memory, for a caller that keeps the
 * pointer and writes through it by its own means (data parallelism: the
 * initial broadcast, a sharded AdamW, parameter all-gathers). The model
 * cannot see those writes, so from this call on (until model_place_params
 * moves the weights into a buffer of the model's own) the fused path in 16
 * bits rebuilds its copy before every forward and backward: one cast pass
 * over the weights each, which the model's own AdamW otherwise saves.
 * Paths without a copy pay nothing. */
float *model_params_writable(model *m);   /* bound weights: the gains,
                                            which nothing derives from */
float *model_grads(model *m);   /* NULL while placed (below) */
/* Gradients placed in a buffer the caller owns: view v's gradient lives at
 * base + off[v] (off has one entry per view) from now on, and the model's
 * own gradient buffer is freed. Data parallelism that all-gathers in place
 * (parallel/ddp.h) puts each rank's gradients where the collective reads
 * them. Zeroing and backward follow; the model's own AdamW and fp16
 * unscaling refuse (the placing caller steps the optimizer). base NULL:
 * back to an own, zeroed buffer. */
int model_place_grads(model *m, float *base, const size_t *off);
/* The weights moved to a buffer the caller owns (nparams floats of engine
 * memory, e.g. one that joins a symmetric window, so the parameter
 * all-gathers of ZeRO-1 run on the copy engines: parallel/ddp.h): the
 * values are copied there and the model's own buffer freed; the model
 * reads and updates them there from now on, and the caller may write them
 * as after model_params_writable. base NULL: back to a buffer of its own,
 * the values copied, which no pointer handed out reaches. The caller frees
 * base after that. */
int model_place_params(model *m, float *base);
size_t model_nparams(const model *m);
const tensor_view *model_views(const model *m, int *nviews);
const tensor_view *model_view(const model *m, const char *name);

/* The activation table: named views (offset, numel, shape in elements)
 * tiling the one "activations" allocation, sized for (batch, seq) of
 * model_create: what forward saves for backward ("layers.3.attn.scores")
 * and the scratch buffers shared by all layers ("scratch.*"). */
const tensor_view *model_activations(const model *m, int *n);

/* Forward on ids [batch, seq] (host arrays, copied to the engine), with
 * targets the next tokens: mean cross-entropy into *loss (host). targets may
 * be NULL for a forward without loss (logits only). `b`, `t` at most the
 * sizes given to model_create. */
int model_forward(model *m, const int32_t *ids, const int32_t *targets,
                  int b, int t, float *loss);
/* Logits [b, t, V] of the last forward (engine memory); valid until
 * model_backward, which overwrites them with their gradient. */
const float *model_logits(const model *m);
/* Zero all gradients. */
int model_zero_grad(model *m);
/* Backward of the last forward's mean loss: ACCUMULATES into the gradients.
 * Needs a forward with targets since the last backward. */
int model_backward(model *m);
/* model_backward with backward's calls on e, the model's engine or a view
 * of it (eng_view: e.g. products shaped for fewer SMs while collectives
 * run beside backward). CUDA graphs record on the model's engine only:
 * with a view, backward runs op by op (as it does with a grad hook). */
int model_backward_on(model *m, engine *e);
/* One AdamW step over all parameters (step counter kept by the model). The
 * moments ("adam_m", "adam_v") are allocated at the first call. */
int model_adamw_step(model *m, const adamw_config *o);
/* The optimizer in backward: model_backward, with each parameter tensor's
 * AdamW update (model_adamw_step's, on that tensor alone; on the fused
 * path it writes the 16-bit copy too) applied the moment its gradient is
 * final and backward reads the tensor no more, so the update's memory
 * traffic can overlap the rest of backward. The same weights as
 * model_backward then model_adamw_step (AdamW is elementwise). Refused
 * where the update needs every gradient first: fp16's loss scaling (the
 * step is skipped when any gradient is not finite), a grad hook (data
 * parallelism averages gradients across ranks first), placed gradients or
 * weights. With model_options.graphs (fused, without the products'
 * updates or an SM split: model_internal.h, adamw_graphable) backward and
 * its updates are one recording, the step size written to engine memory
 * before each replay (an upload: the host waits for the work queued
 * before it, forward's, once a step); a call with other hyperparameters
 * records again. */
int model_backward_adamw(model *m, const adamw_config *o);
/* fp16 mixed precision scales the loss (so the gradients) by a dynamic
 * factor S, as torch.cuda.amp.GradScaler does: S starts at 2^16; a step
 * whose unscaled gradients are not all finite is skipped and S halves;
 * after 2000 good steps in a row S doubles. model_adamw_step does all of
 * it. After model_backward the gradient buffer holds S * gradient: an
 * optimizer outside the model calls model_unscale_grads first and skips
 * its step when *finite is 0. For other precisions S is 1 and nothing
 * changes. */
float model_loss_scale(const model *m);
long long model_skipped_steps(const model *m);
int model_unscale_grads(model *m, int *finite);
/* The loss scale's rule for one step whose unscaled gradients were all
 * finite (finite = 1) or not: model_unscale_grads' bookkeeping, for an
 * optimizer that unscales gradients the model does not hold (FSDP's
 * gradient shards), which skips its step when finite is 0. Every rank
 * passes the same finite, so their scales stay equal. */
void model_loss_scale_step(model *m, int finite);

/* Steps taken; setting it lets an optimizer that lives outside the model
 * (a sharded one) keep the count every rank agrees on. */
/* With model_options.graphs, model_forward and model_backward run their
 * engine work through a CUDA graph: the first call for a key runs it
 * directly (so every buffer it grows has its size), the second records it,
 * that and later calls with the same key replay the recording. Forward's
 * key is (b, t, targets given); backward's is (b, t, whether
 * model_zero_grad deferred the zeroing, the loss scale). The host side
 * (id checks, uploads, the loss read back) runs every call. Calls run
 * directly, never recorded, while a gradient hook is set (the hook must
 * run at each tensor) or eng_profile collects. Returns how many calls
 * launched a recording so far (the one that records it included). */
long long model_graph_replays(const model *m);

long long model_step_count(const model *m);
void model_set_step_count(model *m, long long step);
engine *model_engine(model *m);

/* Called by model_backward once per parameter tensor, the moment backward
 * is done with it: its gradient is final and no later kernel of backward
 * reads the parameter (all its kernels queued on
 * the engine's stream, not necessarily finished: on CUDA, record an event
 * on eng_stream to wait for it). `view` indexes model_views. Tensors come
 * in reverse order of use: lm_head, final norm, then layers from last to
 * first (within a layer: ffn.w2, ffn.w1, ffn.w3, ln2, attn.output_proj,
 * q, k, v, ln1; a LayerNorm's bias right after its weight),
 * token_embeddings last. A non-zero return aborts backward
 * with that code. This is where data parallelism starts gradient
 * communication while backward goes on, and may update the parameter
 * there too (parallel/). */
typedef int (*model_grad_hook)(int view, void *arg);
void model_set_grad_hook(model *m, model_grad_hook fn, void *arg);

/* ---- bound weights (model_options.bound_weights) ------------------------
 * The weights come in groups, the units backward finishes together: -1
 * the embedding, i the layer i (q, k, v, o, w1, w2, w3), layers the head
 * (lm_head); the 1-D views (the norms' gains) are no group's, they stay
 * in the model (model_params then holds them alone, packed in table
 * order). A group's matrices are one packed run, its views end to end in
 * table order: what the caller gathers and what the gradient slots hold.
 * The products read a group in the model's compute dtype (fp32 or the
 * 16-bit copy); the embedding, read by a lookup, always in fp32. */
enum { MODEL_NORMS = -2 };   /* model_view_place's group of the 1-D views */
/* Where view v lives: its group (MODEL_NORMS for a 1-D view) and its
 * offset in that group's packed run (or in model_params). Any model. */
void model_view_place(const model *m, int v, int *group, size_t *offset);
/* Elements of group g's packed run (MODEL_NORMS: the 1-D views'). */
size_t model_group_numel(const model *m, int g);
/* With bound weights over W ranks: a chunk of group g, ceil(numel / W)
 * rounded up to even (16-bit chunks start on 4-byte boundaries), so W
 * chunks may run past the group; its gradient slot holds W chunks, the
 * padding's values unspecified (the last rank's tail: no weight's). */
size_t model_group_chunk(const model *m, int g);
/* The options the model was created with. */
const model_options *model_get_options(const model *m);
/* Called with need 1 right before the model reads group g's weights
 * (queues its first kernel that does), with need 0 once its last such
 * kernel is queued on the model's stream (eng_stream: record an event to
 * know when the memory is free again). During need 1 the hook calls
 * model_bind_group. Forward needs -1, 0 .. layers-1, layers in order;
 * backward needs the head, then layers from the last; with checkpoints
 * a group's layers are needed (in order, for its rerun) before the
 * first backward of the group and released after each one's backward.
 * model_weight_uses lists that order. A non-zero return aborts the pass. */
typedef int (*model_weight_hook)(int group, int need, void *arg);
void model_set_weight_hook(model *m, model_weight_hook fn, void *arg);
/* Group g's packed matrices at w (engine memory; the compute dtype, the
 * embedding fp32), read until the hook's need 0 for g. */
int model_bind_group(model *m, int g, const void *w);
/* The groups in the order one training step (forward with targets, then
 * backward) needs them, into seq (room for 4 * (layers + 2)); returns
 * how many. */
int model_weight_uses(const model *m, int *seq);
/* Gradient slots: the slot of group g's gradients is read by the caller
 * (a collective) until ev, recorded on a handle of the model's engine;
 * the model waits for it before the slot's next group writes there and
 * owns ev from now on. Call it from the grad hook once g's last matrix
 * (2-D view) is final: with bound weights the slot holds nothing else. */
int model_hold_slot(model *m, int g, eng_event *ev);
/* Group g's gradient, packed as its weights (the slot's, valid from the
 * hook of its last view until the slot's next group) and the 1-D views'
 * gradients (packed as model_params, valid after backward). */
const float *model_group_grad(const model *m, int g);
/* The slot (0 or 1) of group g's gradients: consecutive groups of
 * backward mostly alternate; 0 holds the head and the embedding, 1 layers
 * only (model_internal.h, grad_slot). */
int model_group_slot(const model *m, int g);
float *model_norm_grads(model *m);
/* The initial value of elements [lo, lo + n) of view v (model_init's
 * rule for that view and seed) written to x (the model's engine), so a
 * rank can make its own shard of the weights model_init would make. */
int model_init_range(model *m, int v, uint64_t seed, size_t lo, size_t n,
                     float *x);

#endif
