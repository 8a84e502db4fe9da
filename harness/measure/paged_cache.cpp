#include "harness/measure/paged_cache.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace attnbench {

namespace {

// Calls copy(contiguous, pool) for every key of every sequence and KV head: the offsets of the
// key's `dim` values in the contiguous tensor [batch, kv_heads, seq_kv, dim] and in the pool
// [pool pages, kv_heads, page size, dim], at the page the table gives.
template <class Copy>
void for_each_paged_key(const Shape& s, int64_t dim, const std::vector<int32_t>& table, Copy copy) {
  const int64_t page_size = s.kv_cache.page_size;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.kv_heads; ++h)
      for (int64_t j = 0; j < s.keys_of(b); ++j) {
        const int64_t page =
            table[static_cast<std::size_t>(b * s.pages_per_sequence() + j / page_size)];
        copy(static_cast<std::size_t>(((b * s.kv_heads + h) * s.seq_kv + j) * dim),
             static_cast<std::size_t>(((page * s.kv_heads + h) * page_size + j % page_size) * dim));
      }
}

// One of K or V, contiguous, copied page by page into the pool (a last page's tail is 0).
std::vector<float> to_pool(const std::vector<float>& contiguous, const Shape& s, int64_t dim,
                           const std::vector<int32_t>& table) {
  std::vector<float> pool(
      static_cast<std::size_t>(s.pool_pages() * s.kv_heads * s.kv_cache.page_size * dim), 0.0f);
  for_each_paged_key(s, dim, table, [&](std::size_t at, std::size_t in_pool) {
    std::copy(&contiguous[at], &contiguous[at] + dim, &pool[in_pool]);
  });
  return pool;
}

// The inverse: the pool read through the table into a contiguous tensor (0 past each sequence's
// own keys).
std::vector<float> from_pool(const std::vector<float>& pool, const Shape& s, int64_t dim,
                             const std::vector<int32_t>& table) {
  std::vector<float> contiguous(static_cast<std::size_t>(s.batch * s.kv_heads * s.seq_kv * dim),
                                0.0f);
  for_each_paged_key(s, dim, table, [&](std::size_t at, std::size_t in_pool) {
    std::copy(&pool[in_pool], &pool[in_pool] + dim, &contiguous[at]);
  });
  return contiguous;
}

}  // namespace

void lay_out_paged(HostTensors& t, uint64_t seed) {
  const Shape& s = t.shape;
  // The pool's pages in a shuffled order: sequence b's p-th page goes to place[next++].
  std::vector<int32_t> place(static_cast<std::size_t>(s.pool_pages()));
  std::iota(place.begin(), place.end(), 0);
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15u);
  std::shuffle(place.begin(), place.end(), rng);
  t.block_table.assign(static_cast<std::size_t>(s.batch * s.pages_per_sequence()), -1);
  std::size_t next = 0;
  for (int64_t b = 0; b < s.batch; ++b) {
    const int64_t pages = (s.keys_of(b) + s.kv_cache.page_size - 1) / s.kv_cache.page_size;
    for (int64_t p = 0; p < pages; ++p)
      t.block_table[static_cast<std::size_t>(b * s.pages_per_sequence() + p)] = place[next++];
  }
  t.k = to_pool(t.k, s, s.d_k, t.block_table);
  t.v = to_pool(t.v, s, s.d_v, t.block_table);
}

void gather_paged(HostTensors& t) {
  const Shape& s = t.shape;
  if (!s.kv_cache.is_paged()) return;
  t.k = from_pool(t.k, s, s.d_k, t.block_table);
  t.v = from_pool(t.v, s, s.d_v, t.block_table);
  t.block_table.clear();
}

void clear_ragged_padding(HostTensors& t) {
  const Shape& s = t.shape;
  if (s.kv_lens.empty() || s.kv_cache.is_paged()) return;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.kv_heads; ++h) {
      const std::size_t row = static_cast<std::size_t>((b * s.kv_heads + h) * s.seq_kv);
      const auto first = static_cast<std::size_t>(s.keys_of(b));
      const auto last = static_cast<std::size_t>(s.seq_kv);
      std::fill(t.k.begin() + static_cast<std::ptrdiff_t>((row + first) * s.d_k),
                t.k.begin() + static_cast<std::ptrdiff_t>((row + last) * s.d_k), 0.0f);
      std::fill(t.v.begin() + static_cast<std::ptrdiff_t>((row + first) * s.d_v),
                t.v.begin() + static_cast<std::ptrdiff_t>((row + last) * s.d_v), 0.0f);
    }
}

}  // namespace attnbench
