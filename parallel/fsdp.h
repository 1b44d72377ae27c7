/* Fully sharded data parallelism (the 2026 handout's FSDP, section 7) of
 * model.md's LM over W ranks.
 *
 * What each rank keeps: 1/W of every weight matrix (the embedding, each
 * layer's q, k, v, o, w1, w2, w3, lm_head) in fp32 with its AdamW moments
 * (no 16-bit copy: each gather casts the chunk it sends); the norms'
 * gains whole (model_options.bound_weights: the model keeps those); a
 * window of gathered groups; the model's two gradient slots and
 * activations.
 *
 * The unit is the model's group (model.h: the embedding, a layer, the
 * head), one packed run of its matrices cut into W chunks of
 * ceil(n / W) elements (the last rank's padded). A step on every rank:
 *     fsdp_begin_step
 *     model_forward on this rank's slice of the global batch
 *     model_backward
 *     fsdp_finish_gradient_synchronization
 *     fsdp_optimizer_step
 * Forward and backward ask for each group as they reach it (the model's
 * weight hook); the group is all-gathered into a free slot of the window
 * (in the compute dtype: each rank casts its fp32 chunk into its own
 * block of the slot and the gather runs in place, so the cast happens
 * before communication, as the handout asks; the embedding, read by a
 * lookup, in fp32) and the next group in model_weight_uses' order is
 * gathered ahead into another, so a gather starts once the group two uses
 * back is released. As backward
 * makes a group's gradient final (its gradient slot), the slot is
 * reduce-scattered with COMM_AVG to each rank's chunk of the fp32 gradient
 * shard; the slot's next writer waits for that (model_hold_slot). After
 * backward the norms' gradients are all-reduced (COMM_AVG). AdamW then
 * runs on each rank's chunks (or, in_backward, on each group's chunk as
 * its reduce-scatter lands) and on the whole gains, the same elementwise
 * update as the model's own, so the weights follow single-process
 * training on the global batch. fp16 compute scales the loss as the
 * model does (model_loss_scale): the step unscales the gradient shards
 * and the gains' gradients, and every rank skips it when any rank saw one
 * that is not finite (AdamW after backward only).
 *
 * Streams (NCCL, CUDA engine): collectives run on the communicator's
 * stream; a gather waits for the release of its slot's previous group (an
 * event on the compute stream), compute waits for the gather's event
 * before the group's first read; a reduce-scatter waits for the compute
 * stream at the hook. The optimizer waits for every collective, and the
 * next step's gathers for the optimizer. MPI (CPU engine): every
 * collective completes where it is issued. */
#ifndef TL_FSDP_H
#define TL_FSDP_H

#include <stddef.h>
#include <stdint.h>

#include "collective/comm.h"
#include "model/model.h"

typedef struct fsdp fsdp;

typedef struct fsdp_options {
  /* each group's AdamW as soon as its reduce-scatter lands (below) */
  int in_backward;
  /* FSDP2's reshard_after_forward = False: forward's gathered groups stay
   * in the window until backward's last use of each, so every group is
   * gathered once a step, at the cost of the whole model's gathered
   * weights held through forward (the window: a slot per group) */
  int keep_gathered;
} fsdp_options;

/* m: a model created with bound_weights on c's engine side (the CPU
 * engine with MPI, the CUDA engine of c's device with NCCL). The shards
 * start as model_init(seed) would make the whole model; the gains are
 * initialised in m. The window holds model_options.ckpt_layers (at least
 * 1, at most the layers) + 2 groups (keep_gathered: layers + 2): one slot
 * the size of the largest group (the embedding or the head, with a large
 * vocabulary; keep_gathered: two, as both stay), the others of the
 * largest layer. in_backward: each group's AdamW runs the moment its
 * reduce-scatter lands (on GPUs on a side stream, so that the gathers
 * queued behind the reduce-scatter do not wait for it; the next
 * reduce-scatter into its buffer does), so no gradient shard lives
 * through backward: two buffers take its place, as the model's gradient
 * slots (model_group_slot): one of a layer's chunk, one of the head's or
 * the embedding's, if larger; fsdp_optimizer_step then updates the gains alone. The
 * same weights as after backward (AdamW is elementwise). */
int fsdp_create(fsdp **out, comm *c, model *m, uint64_t seed,
                const adamw_config *o, const fsdp_options *fo);
void fsdp_destroy(fsdp *f);
int fsdp_begin_step(fsdp *f);
int fsdp_finish_gradient_synchronization(fsdp *f);
int fsdp_optimizer_step(fsdp *f);
/* Every weight, whole, in the model's table layout (model_layout; fp32),
 * into host memory out[nparams]: collective (every rank calls it). */
int fsdp_gather_full_params(fsdp *f, float *out);

/* The last step's timeline, read after the caller synchronised the engine
 * following fsdp_optimizer_step: times in ms from fsdp_begin_step on the
 * compute stream (GPU: CUDA events on the streams; CPU: the wall clock,
 * where every gather completes as it is issued). Gather i filled a slot
 * with group group[i] between start_ms[i] and end_ms[i] on the
 * communicator's stream; use u of model_weight_uses wanted use_group[u]
 * at need_ms[u] on the compute stream. exposed_ms: the sum over uses of
 * how long the compute stream waited for a gather of this step (its end
 * past the need); gather_ms: the gathers' durations summed. The arrays
 * are the fsdp's, valid until its next step. */
typedef struct fsdp_timeline {
  int ngathers, nuses;
  const int *group, *use_group;
  const double *start_ms, *end_ms, *need_ms;
  double gather_ms, exposed_ms;
} fsdp_timeline;
int fsdp_timeline_get(fsdp *f, fsdp_timeline *t);

/* What the last step moved and how long it waited, per rank. */
typedef struct fsdp_info {
  size_t shard_elems;     /* fp32 elements of this rank's weight shard */
  size_t window_bytes;    /* the gathered groups' window */
  int window_groups;      /* groups it holds (ckpt_layers, at least 1, at
                             most the layers, + 2; keep_gathered: layers
                             + 2) */
  int gathers;            /* all-gathers in the last step (re-gathers
                             included: a group evicted between forward and
                             backward is gathered again) */
  double gather_bytes, scatter_bytes;   /* bytes received / sent */
} fsdp_info;
void fsdp_info_get(const fsdp *f, fsdp_info *i);

#endif
