/* safetensors files (https://github.com/huggingface/safetensors): reading
 * any file the format allows, writing the model's parameters.
 *
 * The format: 8 bytes, a little-endian unsigned header length N; N bytes of
 * JSON, an object mapping each tensor's name to {"dtype": "F32", "shape":
 * [2, 3], "data_offsets": [begin, end]}, plus an optional "__metadata__"
 * object of strings; then the data, each tensor's bytes little-endian and
 * row-major at [begin, end) from the data's start. The tensors must tile the
 * data exactly: no gap, no overlap, nothing after the last one.
 *
 * Every failure is recorded with err_set (common/check.h) as
 * "PATH: what is wrong", naming the tensor where one is at fault. */
#ifndef TL_SAFETENSORS_H
#define TL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model/model.h"

typedef enum {
  ST_F64, ST_F32, ST_F16, ST_BF16, ST_I64, ST_I32,
  /* Known to the format, accepted in a file, never converted: */
  ST_I16, ST_I8, ST_U8, ST_BOOL, ST_U16, ST_U32, ST_U64, ST_F8_E4M3,
  ST_F8_E5M2,
  ST_NDTYPES
} st_dtype;
const char *st_dtype_name(st_dtype t);   /* "F32" */
size_t st_dtype_size(st_dtype t);        /* bytes per element */

enum { ST_MAX_DIMS = 8 };

typedef struct st_tensor {
  char *name;
  st_dtype dtype;
  int ndim;                      /* 0 for a scalar */
  int64_t shape[ST_MAX_DIMS];
  size_t numel;
  uint64_t begin, end;           /* bytes, from the start of the data */
} st_tensor;

typedef struct st_file {
  char *path;
  FILE *f;
  uint64_t data_start;           /* 8 + header length */
  uint64_t data_len;
  int ntensors;
  st_tensor *tensors;            /* in header order */
  int nmeta;
  char **meta_keys, **meta_values;
} st_file;

/* Read and check the header: JSON syntax, dtypes, shapes, and that the data
 * offsets agree with the shapes and tile the data to the file's end. Data
 * are read later, one tensor at a time. */
int st_open(st_file **out, const char *path);
void st_close(st_file *f);
const st_tensor *st_find(const st_file *f, const char *name);
const char *st_meta(const st_file *f, const char *key);   /* NULL if absent */

/* One tensor, converted: floating dtypes (F64, F32, F16, BF16) to double or
 * float, integer dtypes (I64, I32) to int32 (failing for a value out of
 * range). *out is malloc'd (the caller frees it), *numel its length. */
int st_read_f64(st_file *f, const char *name, double **out, size_t *numel);
int st_read_f32(st_file *f, const char *name, float **out, size_t *numel);
int st_read_i32(st_file *f, const char *name, int32_t **out, size_t *numel);

/* A tensor to write: data little-endian (this machine's order is converted
 * where it differs), numel * st_dtype_size(dtype) bytes. */
typedef struct st_entry {
  const char *name;
  st_dtype dtype;
  int ndim;
  int64_t shape[ST_MAX_DIMS];
  const void *data;
} st_entry;

/* Write n tensors in the given order, with metadata {"format": "pt"} (what
 * safetensors.torch writes and transformers expects). The file appears
 * atomically (written as PATH.tmp, then renamed). */
int st_write(const char *path, const st_entry *t, int n);

/* The model's parameters as F32 under the reference's names and shapes, in
 * state_dict order: loadable by safetensors.torch.load_file into the
 * reference model. */
int st_save_model(model *m, const char *path);

/* Parameters from a file that holds every parameter of the model, F32 and
 * with the model's shape, and nothing else; otherwise nothing is loaded and
 * the error names the first tensor at fault and what differs. Gradients,
 * AdamW state and the step counter are left as they are. */
int st_load_model(model *m, const char *path);

#endif
