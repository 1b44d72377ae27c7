/* Checks libconfig cannot make for us, and helpers for error messages.
 *
 * libconfig keeps no source text, so two mistakes are found by scanning the
 * files ourselves before libconfig parses them:
 *   - numbers with leading zeros (010 is 10 in libconfig 1.5 but 8 in 1.6+);
 *   - integers beyond 32 bits without the L suffix, which libconfig 1.5
 *     silently truncates (3000000000 reads as -1294967296);
 *   - @include files that cannot be read: libconfig 1.5 only says "cannot
 *     open include file", and a directory kills the process from inside its
 *     flex scanner ("input in flex scanner failed"), so we must look first.
 * The scan mirrors libconfig 1.5's lexer: strings, comments (#, //, / * * /),
 * and `@include "file"` at the start of a line, resolved as experiment_load
 * has libconfig resolve it (an absolute path as given, a relative one as
 * include_dir + "/" + file), nested at most LINT_MAX_INCLUDE_DEPTH deep. */
#ifndef TL_LINT_H
#define TL_LINT_H

#include <stddef.h>

#include "harness/param.h"

/* libconfig 1.5's MAX_INCLUDE_DEPTH. */
#define LINT_MAX_INCLUDE_DEPTH 10

/* Scan `path` and every file it @includes (resolved against include_dir).
 * Returns 0, or -1 with one line in err:
 *   "PATH: cannot read experiment file: REASON"          (top-level file)
 *   "FILE:LINE: cannot read include file \"x\" (...)"
 *   "FILE:LINE: 010 has a leading zero (write 10; ...)"
 *   "FILE:LINE: 3000000000 does not fit in 32 bits (write 3000000000L; ...)"
 * FILE is `path` as given, or an included file's name as written in its
 * @include (which is how libconfig names it in its own messages). */
int lint_scan(const char *path, const char *include_dir, char *err,
              size_t errlen);

/* The leading-zero rule, one for experiment files and command-line values:
 * if the number text tok (n bytes, optional sign) starts with a 0 followed
 * by a digit, writes "010 has a leading zero (write 10; ...)" to msg and
 * returns 1; else returns 0. Hex (0x10) has no such zero and passes. */
int lint_leading_zero(const char *tok, size_t n, char *msg, size_t len);

/* Edit distance (insertions, deletions, substitutions, and transpositions
 * of neighbours, so "warmpu" is one step from "warmup"). */
size_t lint_edit_distance(const char *a, const char *b);

/* The candidate nearest to word, or -1 when none is close enough to be
 * worth suggesting. Ties go to the earlier candidate. */
int lint_nearest(const char *word, const char *const *cands, int ncands);

/* word in double quotes, with quotes, backslashes and control characters
 * escaped, so a message stays one line; truncated to fit n. */
void lint_quote(const char *word, char *buf, size_t n);

/* A value as messages show it: strings quoted (lint_quote), so "" and " x"
 * are visible; other types in their canonical text (pvalue_format). */
void lint_value_text(const pvalue *v, char *buf, size_t n);

#endif
