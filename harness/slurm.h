/* The GPUs of the SLURM allocation the runner runs in (sbatch, salloc),
 * for jobs whose ranks the launcher spreads over its nodes: the runner's
 * own probe (`worker --env`) sees one node's GPUs only. */
#ifndef TL_SLURM_H
#define TL_SLURM_H

#include <stddef.h>

/* The allocation's GPU count, read from SLURM's environment, in this
 * order: SLURM_GPUS_ON_NODE (set in batch scripts and steps) or
 * SLURM_GPUS_PER_NODE (set where --gpus-per-node was asked) times
 * SLURM_JOB_NUM_NODES (the nodes are taken alike), else SLURM_GPUS (the
 * total, where --gpus was asked). Counts may carry a GPU type ("h100:8")
 * and be comma lists ("a100:2,v100:1": their sum). Returns the count,
 * with `how` saying where it came from; -1 outside an allocation (no
 * SLURM_JOB_ID) or where none of these is set (how empty); -2 when one
 * is set but is not a count (how says which, for a warning). */
int slurm_gpus(char *how, size_t n);

#endif
