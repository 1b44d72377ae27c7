/* The GPU's SM clock, power draw and power-cap throttling, sampled through
 * NVML by a thread of ours while the engine's work runs (kernels.h
 * eng_monitor_begin). Why: a large model's training step can run at the
 * GPU's power limit, where the clock, and so every kernel's time, follows
 * the power the work draws; two forms of the same step then differ in
 * kernels they share. NVML is the driver's library (libnvidia-ml.so.1,
 * wherever the driver is) and is opened at run time: the build needs no
 * NVML header (the toolkit's Debian packages ship none), and a machine
 * without it fails eng_monitor_begin saying so. The few entry points are
 * declared here as NVML's documented, stable C ABI declares them.
 *
 * One monitor at a time in a process, like the kernel profile. */
#include "config.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/check.h"
#include "common/check_cuda.h"
#include "kernels/cuda/cuda_ops.h"

typedef int nvml_ret;   /* nvmlReturn_t: 0 is NVML_SUCCESS */
typedef struct nvml_dev *nvml_device;
enum { NVML_CLOCK_SM = 1 };
/* nvmlClocksThrottleReasonSwPowerCap and ...HwPowerBrakeSlowdown */
#define POWER_REASONS 0x84ull

static struct {
  void *lib;
  nvml_ret (*init)(void);
  nvml_ret (*by_pci)(const char *, nvml_device *);
  nvml_ret (*clock)(nvml_device, int, unsigned *);
  nvml_ret (*power)(nvml_device, unsigned *);
  nvml_ret (*reasons)(nvml_device, unsigned long long *);
  const char *(*error)(nvml_ret);
} N;

static struct {
  pthread_t thread;
  atomic_int stop;
  int running;
  nvml_device dev;
  long samples, capped;
  double mhz, watts;
} M;

static const char *nvml_error(nvml_ret r) {
  return N.error ? N.error(r) : "NVML error";
}

static int nvml_open(void) {
  if (N.lib) return 0;
  void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    FAIL(ERR_FAIL, "eng_monitor_begin: cannot open NVML (%s; it comes with "
         "the NVIDIA driver)", dlerror());
#define SYM(f, name)                                                        \
  if (!(*(void **)&N.f = dlsym(lib, name))) {                              \
    dlclose(lib);                                                          \
    FAIL(ERR_FAIL, "eng_monitor_begin: NVML has no %s", name);            \
  }
  SYM(init, "nvmlInit_v2");
  SYM(by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
  SYM(clock, "nvmlDeviceGetClockInfo");
  SYM(power, "nvmlDeviceGetPowerUsage");
  SYM(reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  SYM(error, "nvmlErrorString");
#undef SYM
  nvml_ret r = N.init();
  if (r != 0) {
    const char *msg = N.error(r);
    dlclose(lib);
    memset(&N, 0, sizeof N);
    FAIL(ERR_FAIL, "eng_monitor_begin: nvmlInit: %s", msg);
  }
  N.lib = lib;
  return 0;
}

/* A sample every 5 ms (a timed loop of the attention job lasts 20 ms or
 * more); a reading NVML refuses is left out. */
static void *sampler(void *arg) {
  (void)arg;
  const struct timespec period = {0, 5 * 1000 * 1000};
  while (!atomic_load(&M.stop)) {
    unsigned mhz = 0, mw = 0;
    unsigned long long why = 0;
    if (N.clock(M.dev, NVML_CLOCK_SM, &mhz) == 0 && N.power(M.dev, &mw) == 0 &&
        N.reasons(M.dev, &why) == 0) {
      M.samples++;
      M.mhz += mhz;
      M.watts += mw * 1e-3;
      M.capped += (why & POWER_REASONS) != 0;
    }
    nanosleep(&period, NULL);
  }
  return NULL;
}

int cuda_monitor_begin(int device) {
  if (M.running) FAIL(ERR_FAIL, "eng_monitor_begin: a monitor is running");
  TRY(nvml_open());
  char bus[32];
  CHECK_CUDA(cudaDeviceGetPCIBusId(bus, sizeof bus, device));
  nvml_ret r = N.by_pci(bus, &M.dev);
  if (r != 0)
    FAIL(ERR_FAIL, "eng_monitor_begin: NVML finds no GPU at %s: %s", bus,
         nvml_error(r));
  M.samples = M.capped = 0;
  M.mhz = M.watts = 0;
  atomic_store(&M.stop, 0);
  int rc = pthread_create(&M.thread, NULL, sampler, NULL);
  if (rc != 0)
    FAIL(ERR_FAIL, "eng_monitor_begin: pthread_create: %s", strerror(rc));
  M.running = 1;
  return 0;
}

int cuda_monitor_end(eng_monitor *out) {
  memset(out, 0, sizeof *out);
  if (!M.running) FAIL(ERR_FAIL, "eng_monitor_end: no eng_monitor_begin");
  atomic_store(&M.stop, 1);
  pthread_join(M.thread, NULL);
  M.running = 0;
  out->samples = M.samples;
  if (M.samples) {
    out->sm_mhz = M.mhz / M.samples;
    out->power_w = M.watts / M.samples;
    out->power_capped = (double)M.capped / M.samples;
  }
  return 0;
}
