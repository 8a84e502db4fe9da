// A loop that reads the bytes of issue 35's fp32 decode at 128K keys in the order flash_cpu reads
// them, with nothing of the kernels but FMAs: 8 KV heads of K and V (keys x 128 floats each), 4
// heads per thread one after the other; per 64-key tile the K rows, then the V rows, two rows at a
// time a line of each in turn, with prefetcht1 of the same lines two tiles on. Per pair of lines,
// `repeats` rounds of 8 FMAs into 8 register accumulators with distinct multipliers (4 per line,
// as decode's 4 query rows per K line and 4 output rows per V line; the assembly holds 16
// vfmadd231ps and no accumulator on the stack). Prints the median of 7 passes.
//   g++ -O2 -march=native -fopenmp stream_overlap.cpp -o stream_overlap
//   OMP_NUM_THREADS=2 ./stream_overlap KEYS PASSES PREFETCH REPEATS [ONE_STREAM]
// KEYS per KV head; PASSES over the same data (128 keys and 1024 passes: each thread's 512 KiB in
// its L2, the arithmetic alone); PREFETCH 0 or 1; ONE_STREAM 1 reads K of twice the keys and no V.
#include <immintrin.h>
#include <omp.h>
#include <sys/mman.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
static float* buffer(size_t bytes) {
  void* p = std::aligned_alloc(1 << 21, bytes);
  madvise(p, bytes, MADV_HUGEPAGE);
  std::memset(p, 0, bytes);
  return static_cast<float*>(p);
}
int main(int argc, char** argv) {
  const long keys = std::atol(argv[1]) * (argc > 5 && std::atoi(argv[5]) != 0 ? 2 : 1);
  const int passes = std::atoi(argv[2]);     // over the same data (in cache when small)
  const bool prefetch = std::atoi(argv[3]) != 0;
  const int repeats = std::atoi(argv[4]);    // rounds of the 8 FMAs per pair of lines (0: none)
  const bool k_only = argc > 5 && std::atoi(argv[5]) != 0;  // one stream: K of twice the keys
  const long heads = 8, d = 128, tile = 64;
  const size_t floats = heads * keys * d;
  float* k = buffer(floats * 4);
  float* v = k_only ? k : buffer(floats * 4);
  std::vector<double> seconds;
  double sink = 0;
  for (int rep = 0; rep < 7; ++rep) {
    const auto start = std::chrono::steady_clock::now();
#pragma omp parallel reduction(+ : sink)
    {
      const int t = omp_get_thread_num(), n = omp_get_num_threads();
      const __m512 q0 = _mm512_set1_ps(0.1f), q1 = _mm512_set1_ps(0.2f), q2 = _mm512_set1_ps(0.3f),
                   q3 = _mm512_set1_ps(0.4f);
      __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
      __m512 c0 = a0, c1 = a0, c2 = a0, c3 = a0, e0 = a0, e1 = a0, e2 = a0, e3 = a0;
      for (int pass = 0; pass < passes; ++pass)
        for (long h = t * heads / n; h < (t + 1) * heads / n; ++h)
          for (long first = 0; first < keys; first += tile) {
            const bool ask = prefetch && first + 2 * tile < keys;
            {
              const float* rows = k + (h * keys + first) * d;
              for (long j = 0; j < tile; j += 2)
                for (long c = 0; c < d; c += 16) {
                  const float* r0 = rows + j * d + c;
                  if (ask) {
                    _mm_prefetch(reinterpret_cast<const char*>(r0 + 2 * tile * d), _MM_HINT_T1);
                    _mm_prefetch(reinterpret_cast<const char*>(r0 + 2 * tile * d + d), _MM_HINT_T1);
                  }
                  const __m512 x0 = _mm512_load_ps(r0), x1 = _mm512_load_ps(r0 + d);
                  if (repeats == 0) { a0 = _mm512_add_ps(a0, x0); b0 = _mm512_add_ps(b0, x1); }
                  for (int u = 0; u < repeats; ++u) {
                  a0 = _mm512_fmadd_ps(q0, x0, a0); a1 = _mm512_fmadd_ps(q1, x0, a1);
                  a2 = _mm512_fmadd_ps(q2, x0, a2); a3 = _mm512_fmadd_ps(q3, x0, a3);
                  b0 = _mm512_fmadd_ps(q0, x1, b0); b1 = _mm512_fmadd_ps(q1, x1, b1);
                  b2 = _mm512_fmadd_ps(q2, x1, b2); b3 = _mm512_fmadd_ps(q3, x1, b3);
                  }
                }
            }
            if (!k_only) {
              const float* rows = v + (h * keys + first) * d;
              for (long j = 0; j < tile; j += 2)
                for (long c = 0; c < d; c += 16) {
                  const float* r0 = rows + j * d + c;
                  if (ask) {
                    _mm_prefetch(reinterpret_cast<const char*>(r0 + 2 * tile * d), _MM_HINT_T1);
                    _mm_prefetch(reinterpret_cast<const char*>(r0 + 2 * tile * d + d), _MM_HINT_T1);
                  }
                  const __m512 x0 = _mm512_load_ps(r0), x1 = _mm512_load_ps(r0 + d);
                  if (repeats == 0) { c0 = _mm512_add_ps(c0, x0); e0 = _mm512_add_ps(e0, x1); }
                  for (int u = 0; u < repeats; ++u) {
                  c0 = _mm512_fmadd_ps(q3, x0, c0); c1 = _mm512_fmadd_ps(q2, x0, c1);
                  c2 = _mm512_fmadd_ps(q1, x0, c2); c3 = _mm512_fmadd_ps(q0, x0, c3);
                  e0 = _mm512_fmadd_ps(q3, x1, e0); e1 = _mm512_fmadd_ps(q2, x1, e1);
                  e2 = _mm512_fmadd_ps(q1, x1, e2); e3 = _mm512_fmadd_ps(q0, x1, e3);
                  }
                }
            }
          }
      __m512 all = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                 _mm512_add_ps(_mm512_add_ps(b0, b1), _mm512_add_ps(b2, b3)));
      all = _mm512_add_ps(all, _mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)));
      all = _mm512_add_ps(all, _mm512_add_ps(_mm512_add_ps(e0, e1), _mm512_add_ps(e2, e3)));
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, all);
      for (float lane : lanes) sink += lane;
    }
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  const double key_heads = double(heads) * keys * passes;
  std::printf("%s keys %ld passes %d prefetch %d repeats %d: median %.3f ms, %.1f GB/s, %.2f ns per key-head per core [%g]\n",
              k_only ? "one stream" : "K and V", keys, passes, prefetch ? 1 : 0, repeats, seconds[3] * 1e3, (k_only ? 1.0 : 2.0) * floats * 4 * passes / seconds[3] / 1e9,
              seconds[3] * 1e9 / key_heads * omp_get_max_threads(), sink);
}
