/* CSV files as RFC 4180 writes them: one header row, fields quoted only
 * when they hold a comma, a double quote, CR or LF (quotes doubled).
 * Rows are appended with a single write() so a runner killed mid-sweep
 * leaves whole rows; a torn last line (no final newline) is dropped on
 * reading and reported in `torn`. */
#ifndef TL_CSV_H
#define TL_CSV_H

#include <stddef.h>

typedef struct csv_table {
  int ncols;
  char **header;          /* ncols names */
  size_t nrows;
  char ***rows;           /* nrows x ncols; a short row is padded with "" */
  int torn;               /* the file ended in an incomplete line */
} csv_table;

/* Read a whole file. A missing file is an error (ERR_FAIL, message names
 * it); so is a row with more fields than the header. */
int csv_read(const char *path, csv_table *t);
void csv_free(csv_table *t);
int csv_col(const csv_table *t, const char *name);   /* -1 if absent */

/* One line (with '\n') for n fields, malloc'd; caller frees. */
char *csv_format_row(const char *const *fields, int n);
/* Append one row with a single write() and fsync; 0 or ERR_FAIL. */
int csv_append_row(int fd, const char *const *fields, int n);
/* Rewrite a whole table to path atomically (temp file + rename). */
int csv_write_file(const char *path, const csv_table *t);

#endif
