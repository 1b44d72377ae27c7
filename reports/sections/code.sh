#!/bin/sh
# Writeup sections of the problems whose deliverable is code: where it is,
# what it does, in a few sentences. Which tests establish it is listed by
# mkreport.sh after this (reports/problems.def's TESTS column, each test
# described by its own header comment). Environment as for every section;
# reads no CSV.
set -eu
. "$REPORT_LIB"

case $PROBLEM in
  flash_forward)
    cat <<'TEXT'
### (a) The forward pass on the reference engine

`kernels/cpu/attention_flash.c`: FlashAttention-2's forward (Algorithm 1) in
plain C on the CPU engine, tile by tile: each query tile keeps its running
maximum, denominator and output; keys and values stream past in tiles; it
saves the output O and the log-sum-exp L for backward. It is the readable
reference the GPU kernels are checked against.

### (b) The fused GPU kernel

`kernels/cuda/flash_fwd.cu` (mma.sync tensor cores for bf16 / fp16 at head
dims 16, 32, 64, 80 and 128; fp32 on CUDA cores, or on TF32 parts with precision tf32 / 3xtf32, appendix A) and, on Hopper, `flash_fwd_wgmma.cu`
(warpgroup MMA; a producer warpgroup issues the TMA loads while the math
warpgroups take turns on the tensor cores) at head dims 64, 80 and 128.
One thread block per query tile (with few tiles a head, per chunk of its
keys, the chunks merged after: `flash_cut.cuh`), the online softmax in
registers, O and L written once.
Reached through `k_attention_fwd(e, ATTN_FLASH, ...)` (`kernels/ops.def`).

### (c) Causal masking

A `causal` argument: tiles wholly above the diagonal are skipped (never
loaded), the diagonal tile is masked by index comparison, so a causal pass
does about half the work.
TEXT
    ;;
  flash_backward)
    cat <<'TEXT'
The backward recomputes P from the saved L (no scores kept), with D =
rowsum(dO * O) computed first: `k_attention_bwd(e, ATTN_FLASH, ...)`, CPU in
`kernels/cpu/attention_flash.c`, GPU in `kernels/cuda/flash_bwd.cu` (for
bf16 / fp16 two passes: dK and dV per key tile, then dQ per query tile, no
atomics; for fp32 on TF32 parts one pass, dQ added with atomics) and, on
Hopper at head dims 64, 80 and 128, `flash_bwd_wgmma.cu` (one pass, dQ
accumulated with atomics). Where dQ takes atomics its last bits may differ
between runs. With few tiles a head, every kernel cuts its walks into chunks
and merges their sums after (`flash_cut.cuh`).
TEXT
    ;;
  naive_ddp)
    cat <<'TEXT'
`parallel/ddp.c` with `strategy = "naive"`: weights broadcast from rank 0 at
creation, then after backward one all-reduce (average) per parameter tensor.
The ranks' collectives go through `collective/` (MPI between CPU processes,
NCCL between GPUs), so the same code trains on CPU ranks in CI and on GPUs.
TEXT
    ;;
  ddp_overlap_individual_parameters)
    cat <<'TEXT'
`strategy = "overlap"`: the model calls a hook the moment a parameter's
gradient is final (`model_set_grad_hook`), and the hook starts that tensor's
all-reduce at once (asynchronous: NCCL on its own stream, MPI as a
non-blocking request); `ddp_finish_gradient_synchronization` waits for all
of them before the optimizer step.
TEXT
    ;;
  ddp_overlap_bucketed)
    cat <<'TEXT'
`strategy = "bucketed"`, `bucket_mb`: tensors are grouped in reverse order
into buckets of at most that many MiB (`parallel/buckets.c`), each bucket
one contiguous run of the gradient buffer, so its all-reduce needs no copy;
a bucket's all-reduce starts when its last gradient is final. The step's
schedule (which collective, when, on which stream) is built once per step
shape and can be printed (`ddp_schedule_print`).
TEXT
    ;;
  optimizer_state_sharding)
    cat <<'TEXT'
`optimizer = "sharded"` (`parallel/optim_sharded.c`): parameters are
assigned to ranks as contiguous runs balanced by size; each rank keeps AdamW
state for its own run only, updates it, and each owner broadcasts its
updated run. `optimizer = "zero1"` (`parallel/optim_zero1.c`) is ZeRO stage
1: each bucket reduce-scattered, AdamW on this rank's chunk, chunks
all-gathered.
TEXT
    ;;
  *)
    echo "code.sh: no code section for problem \"$PROBLEM\"" >&2
    exit 1 ;;
esac
echo
