/* Points in time on a stream, for ordering and for timelines.
 *
 * On a CUDA stream a dp_event is a cudaEvent_t (timing enabled): recording
 * it marks the point after everything queued so far; another stream can be
 * made to wait for it (cudaStreamWaitEvent) without the host waiting, and
 * two recorded, completed events give the GPU time between them. On the CPU
 * (stream NULL: work is done when the call returns) recording reads the
 * wall clock and waiting is a no-op. */
#ifndef TL_DP_EVENTS_H
#define TL_DP_EVENTS_H

typedef struct dp_event {
  void *ev;        /* cudaEvent_t, NULL on the CPU */
  double t;        /* CPU: wall clock at record, seconds */
  int recorded;    /* recorded since the last dp_event_clear */
} dp_event;

/* gpu != 0: create a CUDA event (on the current device). */
int dp_event_init(dp_event *x, int gpu);
void dp_event_destroy(dp_event *x);
int dp_event_record(dp_event *x, void *stream);
void dp_event_clear(dp_event *x);
/* *done = 1 when everything before x's record has completed (CUDA:
 * cudaEventQuery; the CPU: always), without waiting. */
int dp_event_done(const dp_event *x, int *done);
/* `stream` waits (on the device) for x; no-op when either is absent. */
int dp_stream_wait(void *stream, const dp_event *x);
/* A CUDA stream of the lowest priority (on the current device), for work
 * that should take only what the other streams leave; destroy after
 * synchronising it. */
int dp_stream_create(void **stream);
void dp_stream_destroy(void *stream);
/* Milliseconds from `from` to `to`, both recorded and completed; NaN if
 * either was not recorded. */
int dp_event_ms(const dp_event *from, const dp_event *to, double *ms);

#endif
