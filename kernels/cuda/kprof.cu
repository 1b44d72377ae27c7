/* Kernel-level profile over CUPTI's activity API: every kernel the device
 * runs between kprof_begin and kprof_end arrives as an activity record
 * (name, start and end on the GPU's clock) in buffers CUPTI asks for and
 * hands back; kprof_end flushes them and sums the records by (range,
 * name), and measures the span they cover on the GPU's clock and how much
 * of it some kernel was running (common/intervals.h). Ranges attribute
 * kernels: each push also pushes a CUPTI external correlation id (the
 * range's index), so CUPTI pairs every launch inside it with that id
 * (EXTERNAL_CORRELATION records, by correlation id); the innermost range
 * wins. CUPTI writes those records only beside the API records of the
 * launching call, so the runtime's and the driver's API activity is
 * enabled too (their records are read and dropped): our kernels launch
 * through the runtime, cuBLAS's through the driver. Names are demangled
 * and shortened to the function (no return type, no parameter list).
 *
 * CUPTI's activity state is the process's, not an engine's: one profile at
 * a time, in one thread. Built only with CUPTI (HAVE_CUPTI); without it
 * kprof_begin fails saying so, and ranges are NVTX only. */
#include "config.h"
#include "kernels/cuda/kprof.h"

#include "common/check.h"
#include "common/intervals.h"

#include <cxxabi.h>
#include <nvtx3/nvToolsExt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#ifdef HAVE_CUPTI
#include <cupti.h>
#endif

namespace {

enum { MAX_RANGES = 64, MAX_DEPTH = 16 };

struct kernel_rec {
  uint32_t correlation;
  std::string name;
  uint64_t start, end;   /* ns, the GPU's clock */
};

struct state {
  bool active = false;
  std::vector<kernel_rec> kernels;
  /* host time in CUDA calls: (domain, callback id) -> calls, ns */
  std::map<std::pair<int, uint32_t>, std::pair<long, uint64_t>> api;
  std::map<uint32_t, uint64_t> range_of;   /* correlation id -> range id */
  std::vector<std::string> ranges;         /* id - 1 -> name */
  int depth = 0;
  bool pushed[MAX_DEPTH] = {};             /* range d told CUPTI: pop it */
};
state S;

int range_id(const char *name) {
  for (size_t i = 0; i < S.ranges.size(); i++)
    if (S.ranges[i] == name) return (int)i + 1;
  if (S.ranges.size() >= MAX_RANGES) return 0;
  S.ranges.push_back(name);
  return (int)S.ranges.size();
}

/* "void (anonymous namespace)::k<128>(float*, int)" -> "(anonymous
 * namespace)::k<128>"; cuBLAS's unmangled names stay as they are. The
 * return type goes first: the name ends at the first '(' outside template
 * arguments after it, past the namespace's own parenthesis. */
std::string short_name(const char *mangled) {
  int st = 0;
  char *d = abi::__cxa_demangle(mangled, nullptr, nullptr, &st);
  std::string s = st == 0 && d ? d : mangled;
  free(d);
  if (s.compare(0, 5, "void ") == 0) s = s.substr(5);
  static const char anon[] = "(anonymous namespace)";
  size_t start = s.compare(0, sizeof anon - 1, anon) == 0 ? sizeof anon - 1 : 0;
  int angle = 0;
  for (size_t i = start; i < s.size(); i++) {
    if (s[i] == '<') angle++;
    else if (s[i] == '>') angle--;
    else if (s[i] == '(' && angle == 0) return s.substr(0, i);
  }
  return s;
}

#ifdef HAVE_CUPTI
const char *cupti_msg(CUptiResult r) {
  const char *m = "unknown CUPTI error";
  cuptiGetResultString(r, &m);
  return m;
}
/* CUPTI takes one subscriber per process; Nsight Systems, Nsight Compute
 * and compute-sanitizer are one when they run the program, and CUPTI then
 * answers MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (or MAX_LIMIT_REACHED). */
const char *cupti_hint(CUptiResult r) {
  return r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ||
                 r == CUPTI_ERROR_MAX_LIMIT_REACHED
             ? " (another tool holds CUPTI: Nsight Systems, Nsight Compute "
               "or compute-sanitizer; take the kernel profile without it, "
               "or that tool's profile without kernel_profile)"
             : "";
}
#define CUPTI(call)                                                          \
  do {                                                                       \
    CUptiResult r_ = (call);                                                 \
    if (r_ != CUPTI_SUCCESS)                                                 \
      FAIL(ERR_FAIL, "%s: %s%s", #call, cupti_msg(r_), cupti_hint(r_));      \
  } while (0)

enum { BUF_BYTES = 8 << 20, ALIGN = 8 };

void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max) {
  *buf = (uint8_t *)aligned_alloc(ALIGN, BUF_BYTES);
  *size = *buf ? BUF_BYTES : 0;
  *max = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t *buf, size_t,
                               size_t valid) {
  CUpti_Activity *rec = nullptr;
  while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
        rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
      S.kernels.push_back({k->correlationId, short_name(k->name), k->start,
                           k->end > k->start ? k->end : k->start});
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME ||
               rec->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
      const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *)rec;
      int dom = rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME
                    ? CUPTI_CB_DOMAIN_RUNTIME_API
                    : CUPTI_CB_DOMAIN_DRIVER_API;
      auto &v = S.api[{dom, a->cbid}];
      v.first++;
      v.second += a->end > a->start ? a->end - a->start : 0;
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
      const CUpti_ActivityExternalCorrelation *x =
          (const CUpti_ActivityExternalCorrelation *)rec;
      if (x->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
        S.range_of[x->correlationId] = x->externalId;
    }
  }
  free(buf);
}

/* What a profile records: kernels, the ranges' correlation, and the
 * runtime and driver calls (the host's time in CUDA calls). */
const CUpti_ActivityKind kActivityKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER};
#endif

}  // namespace

extern "C" {

int kprof_active(void) { return S.active; }

int kprof_begin(void) {
#ifdef HAVE_CUPTI
  if (S.active) FAIL(ERR_FAIL, "eng_kprof_begin: a profile is being taken");
  S.kernels.clear();
  S.range_of.clear();
  S.api.clear();
  CUPTI(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  for (CUpti_ActivityKind kind : kActivityKinds)
    CUPTI(cuptiActivityEnable(kind));
  S.active = true;
  return 0;
#else
  FAIL(ERR_FAIL, "eng_kprof_begin: built without CUPTI (configure found no "
       "libcupti in the CUDA toolkit)");
#endif
}

int kprof_end(eng_kernel_stat **out, int *n, eng_kprof_time *time) {
  *out = NULL;
  *n = 0;
#ifdef HAVE_CUPTI
  if (!S.active) FAIL(ERR_FAIL, "eng_kprof_end: no profile is being taken");
  S.active = false;
  CUptiResult r = cuptiActivityFlushAll(1);
  /* Every kind is disabled whatever fails; the first failure is reported. */
  CUptiResult off = CUPTI_SUCCESS;
  for (CUpti_ActivityKind kind : kActivityKinds) {
    CUptiResult d = cuptiActivityDisable(kind);
    if (off == CUPTI_SUCCESS) off = d;
  }
  if (r != CUPTI_SUCCESS)
    FAIL(ERR_FAIL, "cuptiActivityFlushAll: %s", cupti_msg(r));
  if (off != CUPTI_SUCCESS)
    FAIL(ERR_FAIL, "cuptiActivityDisable: %s", cupti_msg(off));
  std::map<std::pair<std::string, std::string>, std::pair<long, double>> sum;
  std::vector<uint64_t> starts, ends;
  for (const kernel_rec &k : S.kernels) {
    starts.push_back(k.start);
    ends.push_back(k.end);
    auto it = S.range_of.find(k.correlation);
    std::string range = it != S.range_of.end() && it->second >= 1 &&
                                it->second <= S.ranges.size()
                            ? S.ranges[it->second - 1]
                            : "";
    auto &v = sum[{range, k.name}];
    v.first++;
    v.second += (double)(k.end - k.start) * 1e-6;
  }
  if (!starts.empty()) {
    uint64_t first = *std::min_element(starts.begin(), starts.end()),
             last = *std::max_element(ends.begin(), ends.end());
    time->span_ms = (double)(last - first) * 1e-6;
    time->busy_ms =
        (double)intervals_covered(starts.data(), ends.data(), starts.size()) *
        1e-6;
  }
  {   /* the calls with the most host time, most first */
    std::vector<std::pair<uint64_t, std::pair<int, uint32_t>>> by;
    for (const auto &kv : S.api) by.push_back({kv.second.second, kv.first});
    std::sort(by.rbegin(), by.rend());
    size_t len = 0;
    for (size_t i = 0; i < by.size() && i < 4; i++) {
      const char *name = nullptr;
      if (cuptiGetCallbackName((CUpti_CallbackDomain)by[i].second.first,
                               by[i].second.second, &name) != CUPTI_SUCCESS ||
          !name)
        name = "?";
      std::string nm = name;   /* "cudaMemcpy_v3020" -> "cudaMemcpy" */
      size_t v = nm.find("_v");
      if (v != std::string::npos) nm.resize(v);
      int w = snprintf(time->host_api + len, sizeof time->host_api - len,
                       "%s%s %.1f ms x%ld", i ? ", " : "", nm.c_str(),
                       (double)by[i].first * 1e-6, S.api[by[i].second].first);
      if (w < 0 || (size_t)w >= sizeof time->host_api - len) break;
      len += (size_t)w;
    }
  }
  eng_kernel_stat *t =
      (eng_kernel_stat *)calloc(sum.size() ? sum.size() : 1, sizeof *t);
  CHECK_ALLOC(t, sum.size() * sizeof *t);
  int i = 0;
  for (const auto &kv : sum) {
    snprintf(t[i].range, sizeof t[i].range, "%s", kv.first.first.c_str());
    snprintf(t[i].name, sizeof t[i].name, "%s", kv.first.second.c_str());
    t[i].calls = kv.second.first;
    t[i].total_ms = kv.second.second;
    i++;
  }
  S.kernels.clear();
  S.range_of.clear();
  S.api.clear();
  *out = t;
  *n = i;
  return 0;
#else
  FAIL(ERR_FAIL, "eng_kprof_end: built without CUPTI");
#endif
}

int kprof_range_push(const char *name) {
  nvtxRangePushA(name);
#ifdef HAVE_CUPTI
  if (S.depth >= MAX_DEPTH) FAIL(ERR_FAIL, "eng_range_push: ranges nested "
                                 "deeper than %d", (int)MAX_DEPTH);
  S.pushed[S.depth] = S.active;
  S.depth++;
  if (S.active)
    CUPTI(cuptiActivityPushExternalCorrelationId(
        CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, (uint64_t)range_id(name)));
#endif
  return 0;
}

int kprof_range_pop(void) {
  nvtxRangePop();
#ifdef HAVE_CUPTI
  if (S.depth <= 0) FAIL(ERR_FAIL, "eng_range_pop: no range is open");
  S.depth--;
  uint64_t id;
  if (S.pushed[S.depth])
    CUPTI(cuptiActivityPopExternalCorrelationId(
        CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id));
#endif
  return 0;
}

}  // extern "C"
