/* dp_events.h: CUDA events when built with CUDA and a stream is given,
 * the wall clock otherwise. */
#include "config.h"
#include "parallel/dp_events.h"

#include <math.h>
#include <stddef.h>

#include "common/check.h"
#include "common/clock.h"

#ifdef HAVE_CUDA
#include "common/check_cuda.h"
#endif

/* A CUDA event (timing enabled) or, stream, a non-blocking stream of the
 * lowest priority, on the current device, in *out; `who` fails when built
 * without CUDA. */
static int cuda_create(int stream, void **out, const char *who) {
#ifdef HAVE_CUDA
  (void)who;
  if (stream) {
    int least = 0, greatest = 0;
    cudaStream_t s;
    CHECK_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CHECK_CUDA(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, least));
    *out = s;
  } else {
    cudaEvent_t e;
    CHECK_CUDA(cudaEventCreate(&e));
    *out = e;
  }
  return 0;
#else
  (void)stream;
  (void)out;
  FAIL(ERR_FAIL, "%s: built without CUDA", who);
#endif
}

int dp_event_init(dp_event *x, int gpu) {
  x->ev = NULL;
  x->t = 0;
  x->recorded = 0;
  if (!gpu) return 0;
  TRY(cuda_create(0, &x->ev, "dp_event_init"));
  return 0;
}

void dp_event_destroy(dp_event *x) {
#ifdef HAVE_CUDA
  if (x->ev) cudaEventDestroy((cudaEvent_t)x->ev);
#endif
  x->ev = NULL;
}

void dp_event_clear(dp_event *x) { x->recorded = 0; }

int dp_event_record(dp_event *x, void *stream) {
  x->recorded = 1;
#ifdef HAVE_CUDA
  if (x->ev && stream) {
    CHECK_CUDA(cudaEventRecord((cudaEvent_t)x->ev, (cudaStream_t)stream));
    return 0;
  }
#endif
  ASSERT(x->ev == NULL && stream == NULL);
  x->t = clock_now_s();
  return 0;
}

int dp_event_done(const dp_event *x, int *done) {
  *done = 1;
#ifdef HAVE_CUDA
  if (x->ev) {
    cudaError_t rc = cudaEventQuery((cudaEvent_t)x->ev);
    if (rc == cudaErrorNotReady) {
      *done = 0;
      return 0;
    }
    CHECK_CUDA(rc);
  }
#endif
  return 0;
}

int dp_stream_wait(void *stream, const dp_event *x) {
#ifdef HAVE_CUDA
  if (stream && x->ev) {
    CHECK_CUDA(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)x->ev, 0));
  }
#endif
  return 0;
}

int dp_stream_create(void **stream) {
  *stream = NULL;
  TRY(cuda_create(1, stream, "dp_stream_create"));
  return 0;
}

void dp_stream_destroy(void *stream) {
#ifdef HAVE_CUDA
  if (stream) {
    cudaStreamSynchronize((cudaStream_t)stream);
    cudaStreamDestroy((cudaStream_t)stream);
  }
#endif
}

int dp_event_ms(const dp_event *from, const dp_event *to, double *ms) {
  *ms = NAN;
  if (!from->recorded || !to->recorded) return 0;
#ifdef HAVE_CUDA
  if (from->ev && to->ev) {
    float f = 0;
    CHECK_CUDA(cudaEventElapsedTime(&f, (cudaEvent_t)from->ev,
                                    (cudaEvent_t)to->ev));
    *ms = f;
    return 0;
  }
#endif
  ASSERT(from->ev == NULL && to->ev == NULL);
  *ms = (to->t - from->t) * 1e3;
  return 0;
}
