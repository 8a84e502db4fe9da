// The mask geometry against brute force written straight from the definitions: the per-element
// predicate, each row's key range, the tile classifier and the rows' key hull, on every mask kind
// and awkward sizes; the spec's text form; the drawn document lengths; the validation of masks.
#include "harness/core/mask.h"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <limits>
#include <numeric>

#include "harness/core/shape.h"
#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

// The index of the document holding position `token`.
int64_t document_of(const std::vector<int64_t>& lengths, int64_t token) {
  int64_t end = 0;
  for (std::size_t d = 0; d < lengths.size(); ++d) {
    end += lengths[d];
    if (token < end) return static_cast<int64_t>(d);
  }
  return -1;
}

// The definitions of mask.h, one element at a time.
bool brute_visible(const MaskSpec& mask, int64_t seq_q, int64_t seq_kv, int64_t i, int64_t j) {
  const int64_t p = i + seq_kv - seq_q;
  switch (mask.kind) {
    case MaskKind::none: return true;
    case MaskKind::causal: return j <= p;
    case MaskKind::window: return p - mask.length <= j && j <= p;
    case MaskKind::prefix: return j < mask.length || j <= p;
    case MaskKind::documents:
      return j <= i && document_of(mask.doc_lens, i) == document_of(mask.doc_lens, j);
  }
  return false;
}

struct MaskCase {
  MaskSpec mask;
  int64_t seq_q, seq_kv;
};

std::vector<MaskCase> mask_cases() {
  return {
      {MaskSpec::none(), 7, 13},           {MaskSpec::none(), 13, 7},
      {MaskSpec::causal(), 17, 17},        {MaskSpec::causal(), 9, 31},
      {MaskSpec::causal(), 31, 9},  // rows 0..21 see nothing (refused by validate)
      {MaskSpec::window(0), 19, 19},       {MaskSpec::window(4), 23, 23},
      {MaskSpec::window(5), 6, 40},        {MaskSpec::window(100), 20, 20},
      {MaskSpec::prefix(0), 15, 15},       {MaskSpec::prefix(6), 21, 21},
      {MaskSpec::prefix(30), 8, 30},       {MaskSpec::prefix(21), 21, 21},
      {MaskSpec::documents({1}), 1, 1},    {MaskSpec::documents({5, 1, 9, 2}), 17, 17},
      {MaskSpec::documents({33}), 33, 33}, {MaskSpec::documents({1, 1, 1, 1}), 4, 4},
  };
}

std::string name_of(const MaskCase& c) {
  return fmt::format("{} q{} kv{}", to_string(c.mask), c.seq_q, c.seq_kv);
}

TEST_CASE("visible() and keys() match the definitions element by element", "[mask]") {
  for (const MaskCase& c : mask_cases()) {
    INFO(name_of(c));
    const MaskGeometry geometry(c.mask, c.seq_q, c.seq_kv);
    for (int64_t i = 0; i < c.seq_q; ++i) {
      const KeyRange range = geometry.keys(i);
      REQUIRE(0 <= range.first);
      REQUIRE(range.last <= c.seq_kv);
      for (int64_t j = 0; j < c.seq_kv; ++j) {
        INFO("row " << i << " key " << j);
        const bool expected = brute_visible(c.mask, c.seq_q, c.seq_kv, i, j);
        CHECK(geometry.visible(i, j) == expected);
        CHECK((range.first <= j && j < range.last) == expected);
      }
    }
  }
}

TEST_CASE("both ends of a row's key range never decrease with the row", "[mask]") {
  for (const MaskCase& c : mask_cases()) {
    INFO(name_of(c));
    const MaskGeometry geometry(c.mask, c.seq_q, c.seq_kv);
    for (int64_t i = 1; i < c.seq_q; ++i) {
      const KeyRange before = geometry.keys(i - 1), range = geometry.keys(i);
      if (before.empty()) continue;  // an empty range has no meaningful start
      CHECK(before.first <= range.first);
      CHECK(before.last <= range.last);
    }
  }
}

TEST_CASE("the tile classifier and the rows' key hull agree with brute force on every tile",
          "[mask]") {
  for (const MaskCase& c : mask_cases()) {
    const MaskGeometry geometry(c.mask, c.seq_q, c.seq_kv);
    // Every tile [r0, r1) x [k0, k1), of every size: small enough to do exhaustively.
    for (int64_t r0 = 0; r0 < c.seq_q; ++r0)
      for (int64_t r1 = r0 + 1; r1 <= c.seq_q; ++r1) {
        const KeyRange hull = geometry.keys_of_rows(r0, r1);
        for (int64_t k0 = 0; k0 < c.seq_kv; ++k0)
          for (int64_t k1 = k0 + 1; k1 <= c.seq_kv; ++k1) {
            int64_t seen = 0;
            for (int64_t i = r0; i < r1; ++i)
              for (int64_t j = k0; j < k1; ++j)
                seen += brute_visible(c.mask, c.seq_q, c.seq_kv, i, j) ? 1 : 0;
            const TileVisibility expected = seen == 0 ? TileVisibility::fully_masked
                                            : seen == (r1 - r0) * (k1 - k0)
                                                ? TileVisibility::fully_visible
                                                : TileVisibility::partial;
            const TileVisibility got = geometry.classify(r0, r1, k0, k1);
            if (got != expected) {
              FAIL(fmt::format("{}: rows [{}, {}) keys [{}, {}): {} (expected {})", name_of(c), r0,
                               r1, k0, k1, to_string(got), to_string(expected)));
            }
          }
        // The hull holds every visible key of the rows, and is no wider than their keys.
        for (int64_t i = r0; i < r1; ++i) {
          const KeyRange range = geometry.keys(i);
          if (range.empty()) continue;
          if (range.first < hull.first || range.last > hull.last)
            FAIL(fmt::format("{}: rows [{}, {}) hull misses row {}", name_of(c), r0, r1, i));
        }
        if (!hull.empty()) {
          CHECK(geometry.classify(r0, r1, hull.first, hull.first + 1) !=
                TileVisibility::fully_masked);
          CHECK(geometry.classify(r0, r1, hull.last - 1, hull.last) !=
                TileVisibility::fully_masked);
        }
      }
  }
}

TEST_CASE("visible_pairs() counts the visible elements", "[mask]") {
  for (const MaskCase& c : mask_cases()) {
    INFO(name_of(c));
    int64_t expected = 0;
    for (int64_t i = 0; i < c.seq_q; ++i)
      for (int64_t j = 0; j < c.seq_kv; ++j)
        expected += brute_visible(c.mask, c.seq_q, c.seq_kv, i, j);
    CHECK(MaskGeometry(c.mask, c.seq_q, c.seq_kv).visible_pairs() == expected);
  }
}

TEST_CASE("Shape::visible_keys is one past each row's last visible key", "[mask]") {
  for (const MaskCase& c : mask_cases()) {
    if (c.mask.kind == MaskKind::causal && c.seq_q > c.seq_kv) continue;  // refused shapes
    INFO(name_of(c));
    Shape shape = testing::make_shape(1, 1, 1, c.seq_q, c.seq_kv, 8, 8, false);
    shape.set_mask(c.mask);
    const MaskGeometry geometry = shape.mask_geometry();
    for (int64_t i = 0; i < c.seq_q; ++i) {
      const int64_t end = std::min(shape.visible_keys(i), c.seq_kv);
      CHECK(end == geometry.keys(i).last);
      if (c.mask.kind == MaskKind::none || c.mask.kind == MaskKind::causal)
        CHECK(geometry.keys(i).first == 0);
    }
  }
}

TEST_CASE("mask specs read and write the same text", "[mask]") {
  for (const std::string text :
       {"none", "causal", "window:0", "window:819", "prefix:64", "documents:16"}) {
    const auto mask = parse_mask(text);
    REQUIRE(mask);
    CHECK(to_string(*mask) == text);
  }
  CHECK(parse_mask("window:819")->length == 819);
  CHECK(parse_mask("documents:16")->doc_lens.empty());  // drawn later, by the sweep
  for (const std::string bad :
       {"", "full", "window", "window:", "window:-1", "window:1x", "prefix:-3", "documents:0",
        "documents:x", "causal:3", "sliding:8", "window: 8"}) {
    INFO("'" << bad << "'");
    std::string error;
    CHECK_FALSE(parse_mask(bad, &error));
    CHECK_FALSE(error.empty());
  }
  // A length past int64, either way, is called out of range, not "not an integer".
  std::string error;
  CHECK_FALSE(parse_mask("window:99999999999999999999", &error));
  CHECK_THAT(error, Catch::Contains("out of range") && !Catch::Contains("not an integer"));
}

TEST_CASE("document lengths are drawn deterministically, each at least 1, summing to seq",
          "[mask]") {
  for (const auto& [tokens, count] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {10, 1}, {10, 10}, {10, 3}, {1000, 16}, {4096, 64}, {17, 16}}) {
    INFO("tokens " << tokens << " documents " << count);
    const auto lengths = draw_document_lengths(tokens, count, 42);
    CHECK(static_cast<int64_t>(lengths.size()) == count);
    CHECK(std::accumulate(lengths.begin(), lengths.end(), int64_t{0}) == tokens);
    for (int64_t length : lengths) CHECK(length >= 1);
    CHECK(draw_document_lengths(tokens, count, 42) == lengths);
  }
  CHECK(draw_document_lengths(1000, 16, 1) != draw_document_lengths(1000, 16, 2));
  // Pinned: the same seed gives the same documents on every machine and standard library.
  CHECK(draw_document_lengths(20, 4, 42) == std::vector<int64_t>{8, 4, 3, 5});
}

TEST_CASE("ALiBi slopes are 2^(-8(h+1)/H)", "[mask]") {
  CHECK(alibi_slope(0, 8) == 0.5);
  CHECK(alibi_slope(7, 8) == 1.0 / 256);
  CHECK(alibi_slope(0, 1) == 1.0 / 256);
  CHECK(alibi_slope(1, 4) == Approx(1.0 / 16));
}

Shape masked(int64_t seq_q, int64_t seq_kv, MaskSpec mask) {
  Shape s = testing::make_shape(1, 1, 1, seq_q, seq_kv, 8, 8, false);
  s.set_mask(std::move(mask));
  return s;
}

TEST_CASE("validation refuses masks a shape cannot hold, and keyless rows, naming them",
          "[mask][shape]") {
  CHECK(validate(masked(16, 16, MaskSpec::window(0))).empty());
  CHECK(validate(masked(16, 16, MaskSpec::prefix(16))).empty());
  CHECK(validate(masked(16, 16, MaskSpec::documents({4, 12}))).empty());
  CHECK(validate(masked(8, 16, MaskSpec::prefix(0))).empty());
  CHECK_THAT(validate(masked(16, 16, MaskSpec::window(-1))), Catch::Contains("0 or more"));
  CHECK_THAT(validate(masked(16, 16, MaskSpec::prefix(17))),
             Catch::Contains("prefix length must be in [0, seq_kv = 16]"));
  CHECK_THAT(validate(masked(8, 16, MaskSpec::documents({8}))),
             Catch::Contains("need seq_q == seq_kv"));
  CHECK_THAT(validate(masked(16, 16, MaskSpec::documents({4, 11}))),
             Catch::Contains("sum to 15, not seq 16"));
  CHECK_THAT(validate(masked(16, 16, MaskSpec::documents({16, 0}))),
             Catch::Contains("a document length is 0, outside 1..seq (16)"));
  // Lengths that wrap around int64 to seq are refused, not summed (16 + 2 * (2^63 - 1) + 2
  // wraps to 16).
  constexpr int64_t huge = std::numeric_limits<int64_t>::max();
  CHECK_THAT(validate(masked(16, 16, MaskSpec::documents({huge, huge, 18}))),
             Catch::Contains("a document length is 9223372036854775807, outside 1..seq (16)"));
  CHECK_THAT(validate(masked(16, 16, MaskSpec::documents({9, 9, 9}))),
             Catch::Contains("sum to more than seq 16"));
  MaskSpec too_many = *parse_mask("documents:17");
  CHECK_THAT(validate(masked(16, 16, too_many)), Catch::Contains("needs 1 to seq (16) documents"));
  MaskSpec undrawn = *parse_mask("documents:2");
  CHECK_THAT(validate(masked(16, 16, undrawn)), Catch::Contains("0 document lengths given"));
  // A query with no visible key: the first rows when seq_q > seq_kv.
  CHECK_THAT(validate(masked(20, 16, MaskSpec::causal())),
             Catch::Contains("query rows 0 to 3 see no key under the causal mask"));
  CHECK_THAT(validate(masked(17, 16, MaskSpec::window(3))),
             Catch::Contains("query row 0 sees no key under the window:3 mask"));
  CHECK(validate(masked(17, 16, MaskSpec::prefix(1))).empty());  // the prefix rescues row 0
  CHECK_THAT(validate(masked(17, 16, MaskSpec::prefix(0))), Catch::Contains("query row 0 sees"));
  // The causal boolean must mirror the mask.
  Shape drifted = masked(16, 16, MaskSpec::window(2));
  drifted.causal = true;
  CHECK_THAT(validate(drifted), Catch::Contains("set it with set_mask()"));
  Shape capped = masked(16, 16, MaskSpec::none());
  capped.softcap = -1;
  CHECK_THAT(validate(capped), Catch::Contains("softcap must be 0 (off) or between"));
  // Caps float32 cannot hold as a normal value: they turn into infinity or zero in the kernels.
  for (const double cap : {1e300, 5e-324, 1e-40, 3e38, std::numeric_limits<double>::infinity()}) {
    capped.softcap = cap;
    CHECK_THAT(validate(capped), Catch::Contains("a normal float32 value"));
  }
  for (const double cap : {min_softcap, 1e-30, 30.0, 1e38}) {
    capped.softcap = cap;
    CHECK(validate(capped).empty());
  }
  // A window far wider than the keys, on rows ahead of them (p(i) < 0), must not wrap p(i) - L.
  const MaskGeometry wide(MaskSpec::window(huge), 8, 4);
  CHECK(wide.keys(7).first == 0);
  CHECK(wide.keys(7).last == 4);
  CHECK(wide.keys(0).empty());
}

TEST_CASE("describe() names the mask and modifiers only when set", "[mask][shape]") {
  Shape s = masked(16, 16, MaskSpec::window(4));
  s.alibi = true;
  s.softcap = 30;
  CHECK(describe(s) == "b1 h1/1 q16 kv16 dk8 dv8 window:4 alibi softcap:30");
  CHECK(describe(masked(16, 16, MaskSpec::causal())) == "b1 h1/1 q16 kv16 dk8 dv8 causal");
  CHECK(describe(masked(16, 16, MaskSpec::none())) == "b1 h1/1 q16 kv16 dk8 dv8");
}

}  // namespace
}  // namespace attnbench
