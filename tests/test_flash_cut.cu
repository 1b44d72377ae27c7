/* The cut walks' arithmetic (kernels/cuda/flash_cut.cuh) against brute
 * force, on the host (no GPU needed; built where nvcc is), for the tiles of
 * every kernel that cuts (the wgmma forward and backward, flash_fwd.cu's
 * forward and flash_bwd.cu's dK/dV pass):
 *   - each walk family's count(c, C) is the number of walks longer than
 *     c C tiles, and walk lengths never grow along x;
 *   - for every cut (C from 1 to past the longest walk), cut_unit maps the
 *     units one to one onto the (walk, chunk) pairs, chunk 0 of every walk
 *     (an empty one included) and one chunk per C tiles of the rest; the
 *     chunks of cut walks get distinct slots below us, the ones cut_slot
 *     (the merge kernels) finds again; uncut walks are the last `whole`;
 *   - cut_floor never exceeds cut_replay (plan_cut skips the replay of a
 *     cut whose floor misses the saving: exact only while this holds),
 *     uncut and cut, over both launch orders and several SM counts;
 *   - plan_cut: chunks of exactly the forced size when forced, uncut when
 *     there are many walks a head, otherwise a cut of at least
 *     CUT_MIN_TILES a chunk within the grid's limits; chunks that never
 *     shrink as the partials grow dearer, then no cut;
 *   - plan_cut_memo returns plan_cut's plan, hit or replaced.
 * The kernels' own results with cuts are checked on the GPU
 * (tests/test_attention_cuda). Exit 0 / 1. */
#include "kernels/cuda/flash_cut.cuh"

extern "C" {
#include "tests/testlib.h"
}

#include <stdio.h>
#include <vector>

constexpr int BK = 128;

/* walks longer than m tiles, by brute force */
template <class W> static int brute_count(const W &w, int n, long long m) {
  int k = 0;
  for (int x = 0; x < n; x++) k += w.walk(x) > m;
  return k;
}

/* Every check of one family at one shape; `what` names it. Returns the
 * failures (each also printed), so that a shape prints one line. */
template <class W>
static int family(const W &w, int n, bool counts_empty, const char *what) {
  int bad = 0;
  auto fail = [&](const char *fmt, int a, int b, int c) {
    if (bad++ < 3) {
      printf("  %s: ", what);
      printf(fmt, a, b, c);
      printf("\n");
    }
  };
  for (int x = 1; x < n; x++)
    if (w.walk(x) > w.walk(x - 1)) fail("walk %d longer than walk %d (%d)", x, x - 1, w.walk(x));
  int longest = n > 0 ? w.walk(0) : 0;
  for (int C = 1; C <= longest + 1; C++) {
    /* count(0): every walk that launches a block (the backward's blocks
     * that no query sees still write zeros) */
    int c0 = w.count(0, C), want0 = counts_empty ? n : brute_count(w, n, 0);
    if (c0 != want0) fail("count(0, %d) = %d, want %d", C, c0, want0);
    for (int c = 1; (long long)(c - 1) * C <= longest; c++) {
      int got = w.count(c, C), want = brute_count(w, n, (long long)c * C);
      if (got != want) fail("count(%d, C) = %d, want %d", c, got, want);
    }
    walk_cut p = make_cut(w, n, C);
    int nc = (longest + C - 1) / C;
    if (p.nc != nc) fail("C %d: nc %d, want %d", C, p.nc, nc);
    /* (walk, chunk) pairs: every walk's chunk 0, and chunks 1.. of its
     * tiles past the first C */
    std::vector<std::vector<int>> seen(n);
    for (int x = 0; x < n; x++) {
      int chunks = (w.walk(x) + C - 1) / C;
      seen[x].assign(chunks > 0 ? chunks : 1, 0);
    }
    std::vector<int> slot_of(p.us > 0 ? p.us : 1, 0);
    for (int u = 0; u < p.units; u++) {
      int x, c, slot;
      cut_unit(p, w, u, &x, &c, &slot);
      if (x < 0 || x >= n || c < 0 || c >= (int)seen[x].size()) {
        fail("unit %d: walk %d chunk %d out of range", u, x, c);
        continue;
      }
      seen[x][c]++;
      if (w.walk(x) > p.C) {   /* a cut walk: its partial's slot */
        if (slot < 0 || slot >= p.us) fail("unit %d: slot %d of %d", u, slot, p.us);
        else slot_of[slot]++;
        if (cut_slot(p, w, x, c) != slot)
          fail("unit %d: cut_slot %d, cut_unit %d", u, cut_slot(p, w, x, c), slot);
      } else if (c != 0) {
        fail("unit %d: uncut walk %d in chunk %d", u, x, c);
      }
    }
    for (int x = 0; x < n; x++)
      for (size_t c = 0; c < seen[x].size(); c++)
        if (seen[x][c] != 1) fail("walk %d chunk %d: %d units", x, (int)c, seen[x][c]);
    for (int s = 0; s < p.us; s++)
      if (slot_of[s] != 1) fail("slot %d: %d units, C %d", s, slot_of[s], C);
    int cut_walks = brute_count(w, n, p.C);
    if (p.whole != n - cut_walks) fail("whole %d, want %d (C %d)", p.whole, n - cut_walks, C);
    for (int x = 0; x < n; x++)
      if ((w.walk(x) > p.C) != (x < cut_walks))
        fail("walk %d cut out of order (C %d, %d cut walks)", x, C, cut_walks);
  }
  return bad;
}

int main(void) {
  /* query and key lengths: one tile, tile boundaries, odd sizes, Tq != Tk */
  const int tq_list[] = {1, 64, 100, 127, 128, 129, 192, 300, 1000, 2049, 4100};
  const int tk_list[] = {1, 77, 128, 129, 259, 1000, 2049, 9000};
  for (int tq : tq_list)
    for (int tk : tk_list)
      for (int causal = 0; causal < 2; causal++) {
        int bad = 0;
        char what[96];
        for (int BQ : {64, 128, 192}) {   /* the forward's tiles at Dh 64 / 80, 128 */
          fwd_walks_t<BK> fw = {(tq + BQ - 1) / BQ, BQ, tk, causal};
          snprintf(what, sizeof what, "forward BQ %d", BQ);
          bad += family(fw, fw.nq, false, what);
        }
        for (int BQ : {64, 128}) {   /* flash_fwd.cu's: key tiles of 32 or 64 */
          fwd_walks_t<32> f32 = {(tq + BQ - 1) / BQ, BQ, tk, causal};
          fwd_walks_t<64> f64 = {(tq + BQ - 1) / BQ, BQ, tk, causal};
          snprintf(what, sizeof what, "mma forward BQ %d BK 32", BQ);
          bad += family(f32, f32.nq, false, what);
          snprintf(what, sizeof what, "mma forward BQ %d BK 64", BQ);
          bad += family(f64, f64.nq, false, what);
        }
        for (int BQ : {64, 128}) {   /* the backward's */
          int tqp = (tq + BQ - 1) / BQ * BQ;
          bwd_walks_t<BK> bw = {tqp / BQ, (tk + BK - 1) / BK, BQ, causal};
          snprintf(what, sizeof what, "backward BQ %d", BQ);
          bad += family(bw, bw.nk, true, what);
        }
        for (int BQ : {16, 32, 64, 128}) {   /* flash_bwd.cu's: key tiles of 64 */
          bwd_walks_t<64> bw = {(tq + BQ - 1) / BQ, (tk + 63) / 64, BQ, causal};
          snprintf(what, sizeof what, "mma backward BQ %d", BQ);
          bad += family(bw, bw.nk, true, what);
        }
        check(bad == 0, "walks and cuts, tq %d tk %d causal %d: %d mismatches",
              tq, tk, causal, bad);
      }

  /* cut_floor under cut_replay, at chunk sizes from 1 to the longest
   * walk (uncut), 1-3 heads, both launch orders, both families */
  auto floor_under = [&](const auto &w, int n, const char *what) {
    int bad = 0, tried = 0;
    long long work1 = 0;
    for (int x = 0; x < n; x++) work1 += w.walk(x);
    for (int C = 1; C <= w.walk(0); C += C < 8 ? 1 : 7)
      for (int bh = 1; bh <= 3; bh++)
        for (int sms : {7, 78, 132})
          for (int hf = 0; hf < 2; hf++) {
            walk_cut p = make_cut(w, n, C);
            long long f = cut_floor(p, work1 * bh, bh, sms),
                      r = cut_replay(p, w, bh, sms, hf);
            tried++;
            if (f > r && bad++ < 3)
              printf("  %s C %d bh %d sms %d: floor %lld > replay %lld\n", what,
                     C, bh, sms, f, r);
          }
    check(bad == 0 && tried > 0, "cut_floor <= cut_replay, %s (%d cuts, %d above)",
          what, tried, bad);
  };
  for (int t : {700, 4096, 16384})
    for (int causal = 0; causal < 2; causal++) {
      char what[64];
      fwd_walks_t<BK> fw = {(t + 127) / 128, 128, t, causal};
      snprintf(what, sizeof what, "forward seq %d causal %d", t, causal);
      floor_under(fw, fw.nq, what);
      bwd_walks_t<BK> bw = {(t + 63) / 64, (t + BK - 1) / BK, 64, causal};
      snprintf(what, sizeof what, "backward seq %d causal %d", t, causal);
      floor_under(bw, bw.nk, what);
    }

  /* plan_cut at the benchmark's shapes (one head, causal) and with many
   * heads, on 132 SMs and on fewer */
  for (int sms : {7, 132})
    for (int bh : {1, 16})
      for (int t : {4096, 16384, 65536}) {
        fwd_walks_t<BK> fw = {(t + 127) / 128, 128, t, 1};
        walk_cut p = plan_cut(fw, fw.nq, bh, sms, 0, false, 128 * 129 * 4);
        bool many = (long long)bh * fw.nq >= 8LL * sms;
        bool ok = p.nc >= 1 && p.nc <= 1024 && p.units <= 65535 &&
                  (p.nc == 1 ? p.us == 0 : p.C >= CUT_MIN_TILES && !many);
        check(ok, "plan_cut forward, %d SMs, %d heads, seq %d: C %d, %d chunks, "
              "%d units%s", sms, bh, t, p.C, p.nc, p.units, many ? " (many walks: uncut)" : "");
        bwd_walks_t<BK> bw = {(t + 63) / 64, (t + BK - 1) / BK, 64, 1};
        walk_cut q = plan_cut(bw, bw.nk, bh, sms, 0, false, 2 * 128 * 128 * 4);
        many = (long long)bh * bw.nk >= 8LL * sms;
        ok = q.nc >= 1 && q.nc <= 1024 && q.units <= 65535 &&
             (q.nc == 1 ? q.us == 0 : q.C >= CUT_MIN_TILES && !many);
        check(ok, "plan_cut backward, %d SMs, %d heads, seq %d: C %d, %d chunks, "
              "%d units", sms, bh, t, q.C, q.nc, q.units);
      }
  /* one head at 16384 on 132 SMs: 128 walks of 1..128 tiles, a third of
   * the SMs busy uncut (flash_cut.cuh): the planner must cut */
  {
    fwd_walks_t<BK> fw = {128, 128, 16384, 1};
    walk_cut p = plan_cut(fw, fw.nq, 1, 132, 0, false, 128 * 129 * 4);
    check(p.nc > 1, "plan_cut cuts one head at 16384 on 132 SMs (%d chunks of %d)",
          p.nc, p.C);
  }
  /* the mma.sync kernels' shorter tiles: one head of the backward's dK/dV
   * pass at 16384 (tiles of 16 queries, 264 blocks at once) cuts, into
   * chunks of at least CUT_MIN_TILES tiles like the wgmma kernels' */
  {
    bwd_walks_t<64> bw = {1024, 256, 16, 1};
    walk_cut p = plan_cut(bw, bw.nk, 1, 264, 0, false, 2 * 64 * 128 * 4);
    check(p.nc > 1 && p.C >= CUT_MIN_TILES,
          "plan_cut cuts one head of 16-query tiles at 16384: %d chunks of %d",
          p.nc, p.C);
  }
  /* forced: exactly the chunk asked for, wherever a walk is longer */
  for (int force : {1, 2, 5}) {
    fwd_walks_t<BK> fw = {3, 192, 900, 1};   /* walks of 5, 3, 2 key tiles */
    walk_cut p = plan_cut(fw, fw.nq, 64, 132, force, true, 192 * 65 * 4);
    int longest = fw.walk(0);
    check(force < longest ? p.C == force && p.nc == (longest + force - 1) / force
                          : p.nc == 1 && p.us == 0,
          "forced chunks of %d over walks of at most %d tiles: C %d, %d chunks",
          force, longest, p.C, p.nc);
  }
  /* dearer partials never give smaller chunks, and partials dear enough
   * give none (one head, causal, the backward at 4096 and 16384 on 132
   * SMs) */
  for (int t : {4096, 16384}) {
    bwd_walks_t<BK> bw = {(t + 63) / 64, (t + BK - 1) / BK, 64, 1};
    int lastC = 0, ok = 1, uncut_at = 0;
    for (long long pb = 0; pb <= (1LL << 30); pb = pb ? pb * 4 : 1024) {
      walk_cut q = plan_cut(bw, bw.nk, 1, 132, 0, false, pb);
      ok &= q.C >= lastC;
      lastC = q.C;
      if (q.nc == 1 && !uncut_at) uncut_at = (int)(pb >> 10);
    }
    check(ok && uncut_at > 0, "backward seq %d: chunks grow with the partials' "
          "bytes, uncut from %d KiB", t, uncut_at);
  }
  /* the memo returns what plan_cut plans: each shape twice in a row (the
   * second a hit: no entry replaced), over more shapes than
   * CUT_MEMO_ENTRIES, three rounds (a replaced entry planned anew) */
  {
    cut_memo m = {};
    int bad = 0, misses = 0, shapes = 0;
    for (int round = 0; round < 3; round++)
      for (int t = 1024; t <= 32768 + 1024 * (CUT_MEMO_ENTRIES + 2); t += 1024 * (t < 32768 ? 3 : 1)) {
        fwd_walks_t<BK> fw = {(t + 127) / 128, 128, t, 1};
        const int key[] = {0, 1, t, t, 129};
        walk_cut b = plan_cut(fw, fw.nq, 1, 132, 0, false, 128 * 129 * 4);
        for (int again = 0; again < 2; again++) {
          int next = m.next;
          walk_cut a = plan_cut_memo(&m, key, fw, fw.nq, 1, 132, 0, false, 128 * 129 * 4);
          bad += a.C != b.C || a.nc != b.nc || a.units != b.units || a.us != b.us;
          misses += again && m.next != next;
        }
        shapes += round == 0;
      }
    check(bad == 0 && misses == 0 && shapes > CUT_MEMO_ENTRIES,
          "plan_cut_memo agrees with plan_cut over %d shapes, three rounds "
          "(%d plans differ; %d repeats missed)", shapes, bad, misses);
  }
  return tl_finish();
}
