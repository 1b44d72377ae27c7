/* The one JSON string writer (sidecar files): quotes and escapes s. */
#ifndef TL_JSON_H
#define TL_JSON_H
#include <stdio.h>
void json_string(FILE *f, const char *s);
#endif
