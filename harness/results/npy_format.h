// The .npy format (numpy's NEP 1), float32 and float16, parsed by hand so that every field of a
// file's header is checked before anything is allocated: a header that claims more elements than
// int64 can count, or more bytes than the file holds, is an error, never an allocation or a crash.
// No I/O here: npy_io.cpp reads and writes files, and the fuzzer feeds bytes straight in.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace attnbench {

// A malformed or unsupported .npy; the message does not name the file (the caller does).
class NpyFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct NpyHeader {
  std::vector<int64_t> shape;
  bool fortran_order = false;
  bool float16 = false;         // '<f2' (else '<f4')
  int64_t elements = 1;         // the product of shape, checked
  int64_t data_bytes = 0;       // elements · (2 or 4), checked
  std::size_t data_offset = 0;  // where the data starts: magic, version, length, header
};

// Bytes a header can need before the data starts: numpy itself never writes more than this
// (its limit is 2^16 for version 1 and a few KiB in practice); longer is garbage.
inline constexpr std::size_t max_npy_header_bytes = 1 << 20;

// Parses the preamble and header dictionary at the start of `bytes`, which must hold at least
// the whole header (npy_header_size() says how much that is). Throws NpyFormatError.
NpyHeader parse_npy_header(std::string_view bytes);

// How many bytes the header at the start of `prefix` (at least 12 bytes, or the whole file if
// shorter) occupies, data offset included. Throws NpyFormatError when it is not an .npy at all.
std::size_t npy_header_size(std::string_view prefix);

// The header numpy would write for a C-ordered little-endian float32 (or, with `float16`,
// float16) array of `shape`.
std::string make_npy_header(const std::vector<int64_t>& shape, bool float16 = false);

// The data section into row-major floats (Fortran order is transposed, float16 widened exactly).
// The data must be exactly as long as the shape says. Throws NpyFormatError.
std::vector<float> decode_npy_data(const NpyHeader& header, std::string_view data);

}  // namespace attnbench
