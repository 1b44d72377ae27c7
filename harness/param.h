/* Job parameters: the typed settings an experiment gives each job.
 *
 * A job kind declares its parameters once, in one table (param_def), fio
 * style: one row = name, type and the settings-struct field it fills,
 * range or choices, unit, default, help. Each parameter lives in a group
 * of the experiment file ("run", or the kind's own group) and has a leaf
 * name that is unique within the kind: the leaf name is the key in
 * `sweep`, the CSV column, and the worker's command-line argument.
 * settings_fill() turns a job's values into the kind's typed struct, which
 * validate() and run() read (no lookups by name in job code).
 * pvalue_format() gives the one canonical text of a value; resume matches
 * rows by these texts, so it must be stable. */
#ifndef TL_PARAM_H
#define TL_PARAM_H

#include <stdbool.h>
#include <stddef.h>

typedef enum { P_INT, P_FLOAT, P_STRING, P_BOOL } ptype;

typedef struct param_def {
  const char *group;           /* experiment-file group: "run", "allreduce" */
  const char *name;            /* leaf name, unique within the kind */
  ptype type;
  size_t field;                /* offsetof the settings-struct member it
                                  fills: int, double, const char *, bool by
                                  type (the *_FIELD macros check it) */
  double min, max;             /* inclusive range for P_INT and P_FLOAT;
                                  a P_INT range fits an int */
  const char *const *choices;  /* P_STRING: NULL-terminated allowed values;
                                  NULL means any non-empty string */
  const char *unit;            /* "s", "MiB"; NULL for a count or a name */
  const char *def;             /* the default, in command-line syntax
                                  (pvalue_parse); NULL: the experiment must
                                  give it */
  const char *help;            /* one line */
} param_def;

/* A row's type and field together, e.g. INT_FIELD(lm_settings, steps): the
 * member must have the C type settings_fill() writes for the type, else
 * the table does not compile (a negative array size). */
#define SETTING_FIELD(st, member, ctype)                                  \
  (offsetof(st, member) +                                                 \
   0 * sizeof(char[_Generic(((st *)0)->member, ctype: 1, default: -1)]))
#define INT_FIELD(st, member) P_INT, SETTING_FIELD(st, member, int)
#define FLOAT_FIELD(st, member) P_FLOAT, SETTING_FIELD(st, member, double)
#define STRING_FIELD(st, member) \
  P_STRING, SETTING_FIELD(st, member, const char *)
#define BOOL_FIELD(st, member) P_BOOL, SETTING_FIELD(st, member, bool)

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
/* d's default as a value: 0, or -1 when d has none. A default that does
 * not parse or is out of range is a bug in the table and aborts. */
int param_default(const param_def *d, pvalue *v);
/* Write the n values v (one per row of d) into the settings struct at
 * out, each at its row's field. Strings point into v: the struct is valid
 * while v is. */
void settings_fill(const param_def *d, int n, const pvalue *v, void *out);

#endif
