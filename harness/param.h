/* Job parameters: the typed settings an experiment gives each job.
 *
 * A job kind declares its parameters in a table (param_def). Each parameter
 * lives in a group of the experiment file ("run", or the kind's own group)
 * and has a leaf name that is unique within the kind: the leaf name is the
 * key in `sweep`, the CSV column, and the worker's command-line argument.
 * pvalue_format() gives the one canonical text of a value; resume matches
 * rows by these texts, so it must be stable. */
#ifndef TL_PARAM_H
#define TL_PARAM_H

#include <stddef.h>

typedef enum { P_INT, P_FLOAT, P_STRING, P_BOOL } ptype;

typedef struct param_def {
  const char *group;           /* experiment-file group: "run", "allreduce" */
  const char *name;            /* leaf name, unique within the kind */
  ptype type;
  double min, max;             /* inclusive range for P_INT and P_FLOAT */
  const char *const *choices;  /* P_STRING: NULL-terminated allowed values;
                                  NULL means any non-empty string */
  const char *help;            /* one line, with units */
} param_def;

#define PVALUE_STR_MAX 128
typedef struct pvalue {
  ptype type;
  long long i;                 /* P_INT, and P_BOOL as 0/1 */
  double f;                    /* P_FLOAT */
  char s[PVALUE_STR_MAX];      /* P_STRING */
} pvalue;

/* Parse command-line text ("4", "0x10", "1e-3", "nccl", "true") as
 * parameter d. Numbers follow the experiment file's rules: decimal without
 * leading zeros, or a hex integer (which a float parameter also takes).
 * On error writes "what is wrong (what is allowed)" to err and returns -1. */
int pvalue_parse(const param_def *d, const char *text, pvalue *v, char *err,
                 size_t errlen);
/* Range / choice check of a typed value; same error convention. */
int pvalue_check(const param_def *d, const pvalue *v, char *err,
                 size_t errlen);
/* Canonical text: ints as %lld, floats as the shortest %.Ng that reads back
 * exactly, strings verbatim, bools as true/false. */
void pvalue_format(const pvalue *v, char *buf, size_t n);
int pvalue_equal(const pvalue *a, const pvalue *b);
const char *ptype_name(ptype t);   /* "an integer", "a float", ... */
/* "allowed: 1 .. 4096" / "allowed: mpi, nccl": for error messages. */
void param_allowed(const param_def *d, char *buf, size_t n);

#endif
