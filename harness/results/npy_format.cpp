#include "harness/results/npy_format.h"

#include <fmt/format.h>

#include <charconv>
#include <cstring>

#include "harness/core/checked_math.h"
#include "harness/core/element_types.h"

namespace attnbench {

namespace {

constexpr std::string_view magic = "\x93NUMPY";
constexpr std::size_t version_1_preamble = 10;  // magic, major, minor, uint16 header length
constexpr std::size_t version_2_preamble = 12;  // ... uint32 header length

uint32_t little_endian(std::string_view bytes) {
  uint32_t value = 0;
  for (std::size_t i = bytes.size(); i-- > 0;)
    value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

// The header is a Python dict literal, e.g. {'descr': '<f4', 'fortran_order': False,
// 'shape': (3, 4), }. This reads exactly that grammar: quoted strings, True/False, tuples of
// non-negative integers.
class HeaderDictReader {
 public:
  explicit HeaderDictReader(std::string_view text) : text_(text) {}

  NpyHeader read() {
    NpyHeader header;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (!peek_is('}')) {
      const std::string key = quoted_string();
      expect(':');
      if (key == "descr") {
        const std::string descr = quoted_string();
        if (descr != "<f4" && descr != "<f2") {
          throw NpyFormatError(
              fmt::format("dtype '{}' is not little-endian float32 ('<f4') or float16 ('<f2'); "
                          "save with np.save(path, array.astype('<f4'))",
                          descr));
        }
        header.float16 = descr == "<f2";
        have_descr = true;
      } else if (key == "fortran_order") {
        header.fortran_order = boolean();
        have_order = true;
      } else if (key == "shape") {
        header.shape = shape_tuple();
        have_shape = true;
      } else {
        throw NpyFormatError(fmt::format("unexpected key '{}' in the header", key));
      }
      if (!peek_is('}')) expect(',');
    }
    expect('}');
    skip_spaces();
    if (position_ != text_.size()) throw NpyFormatError("junk after the header dictionary");
    if (!have_descr || !have_order || !have_shape)
      throw NpyFormatError("the header lacks one of 'descr', 'fortran_order', 'shape'");
    return header;
  }

 private:
  void skip_spaces() {
    while (position_ < text_.size() && (text_[position_] == ' ' || text_[position_] == '\n'))
      ++position_;
  }
  bool peek_is(char c) {
    skip_spaces();
    return position_ < text_.size() && text_[position_] == c;
  }
  void expect(char c) {
    if (!peek_is(c)) throw NpyFormatError(fmt::format("malformed header: expected '{}'", c));
    ++position_;
  }
  std::string quoted_string() {
    skip_spaces();
    if (position_ >= text_.size() || (text_[position_] != '\'' && text_[position_] != '"'))
      throw NpyFormatError("malformed header: expected a quoted string");
    const char quote = text_[position_++];
    const std::size_t end = text_.find(quote, position_);
    if (end == std::string_view::npos) throw NpyFormatError("malformed header: unclosed string");
    std::string value(text_.substr(position_, end - position_));
    position_ = end + 1;
    return value;
  }
  bool boolean() {
    skip_spaces();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      const std::size_t length = std::strlen(word);
      if (text_.substr(position_, length) == word) {
        position_ += length;
        return value;
      }
    }
    throw NpyFormatError("malformed header: fortran_order is not True or False");
  }
  std::vector<int64_t> shape_tuple() {
    std::vector<int64_t> shape;
    expect('(');
    while (!peek_is(')')) {
      int64_t extent = 0;
      const char* first = text_.data() + position_;
      const char* last = text_.data() + text_.size();
      const auto [end, error] = std::from_chars(first, last, extent);
      if (error == std::errc::result_out_of_range)
        throw NpyFormatError("a dimension in the shape does not fit in int64");
      if (error != std::errc() || extent < 0)
        throw NpyFormatError("malformed header: the shape is not a tuple of sizes");
      position_ += static_cast<std::size_t>(end - first);
      shape.push_back(extent);
      if (shape.size() > 64) throw NpyFormatError("the shape has more than 64 dimensions");
      if (!peek_is(')')) expect(',');
    }
    expect(')');
    return shape;
  }

  std::string_view text_;
  std::size_t position_ = 0;
};

std::string describe_shape(const std::vector<int64_t>& shape) {
  return fmt::format("({})", fmt::join(shape, ", "));
}

}  // namespace

std::size_t npy_header_size(std::string_view prefix) {
  if (prefix.size() < version_1_preamble || prefix.substr(0, magic.size()) != magic)
    throw NpyFormatError("not an .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(prefix[6]);
  std::size_t preamble = 0, length = 0;
  if (major == 1) {
    preamble = version_1_preamble;
    length = little_endian(prefix.substr(8, 2));
  } else if (major == 2 || major == 3) {
    if (prefix.size() < version_2_preamble) throw NpyFormatError("truncated header");
    preamble = version_2_preamble;
    length = little_endian(prefix.substr(8, 4));
  } else {
    throw NpyFormatError(fmt::format("unsupported .npy version {}", major));
  }
  if (length > max_npy_header_bytes)
    throw NpyFormatError(fmt::format("header length {} is implausibly large", length));
  return preamble + length;
}

NpyHeader parse_npy_header(std::string_view bytes) {
  const std::size_t size = npy_header_size(bytes);
  if (bytes.size() < size) throw NpyFormatError("truncated header");
  const std::size_t preamble =
      static_cast<unsigned char>(bytes[6]) == 1 ? version_1_preamble : version_2_preamble;
  NpyHeader header = HeaderDictReader(bytes.substr(preamble, size - preamble)).read();
  header.data_offset = size;
  const std::optional<int64_t> elements = checked_product(header.shape.begin(), header.shape.end());
  const std::optional<int64_t> data_bytes =
      elements ? checked_mul(*elements, int64_t{header.float16 ? 2 : 4}) : std::nullopt;
  if (!data_bytes) {
    throw NpyFormatError(fmt::format("shape {} has more elements than can be counted",
                                     describe_shape(header.shape)));
  }
  header.elements = *elements;
  header.data_bytes = *data_bytes;
  return header;
}

std::string make_npy_header(const std::vector<int64_t>& shape, bool float16) {
  std::string tuple;
  for (int64_t extent : shape) tuple += fmt::format("{}, ", extent);
  if (shape.size() > 1) tuple.resize(tuple.size() - 2);  // (3,) for rank 1, (3, 4) otherwise
  if (shape.size() == 1) tuple.pop_back();
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}",
                                 float16 ? "<f2" : "<f4", tuple);
  // Padded with spaces and a newline so the data starts on a 64-byte boundary, as numpy does.
  const std::size_t unpadded = version_1_preamble + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  if (dict.size() > 0xffff) throw NpyFormatError("shape too long for an .npy header");
  std::string header(magic);
  header += '\x01';
  header += '\x00';
  header += static_cast<char>(dict.size() & 0xff);
  header += static_cast<char>(dict.size() >> 8);
  return header + dict;
}

std::vector<float> decode_npy_data(const NpyHeader& header, std::string_view data) {
  if (static_cast<uint64_t>(data.size()) < static_cast<uint64_t>(header.data_bytes))
    throw NpyFormatError("truncated (fewer data bytes than its shape needs)");
  if (static_cast<uint64_t>(data.size()) > static_cast<uint64_t>(header.data_bytes))
    throw NpyFormatError("has bytes past the data its shape describes");
  const std::size_t count = static_cast<std::size_t>(header.elements);
  const std::size_t element_size = header.float16 ? 2 : 4;
  // Element `position` of the file, as fp32.
  const auto element = [&](std::size_t position) {
    if (header.float16) {
      uint16_t bits;
      std::memcpy(&bits, data.data() + position * element_size, sizeof bits);
      return from_fp16_bits(bits);
    }
    float value;
    std::memcpy(&value, data.data() + position * element_size, sizeof value);
    return value;
  };
  std::vector<float> values(count);
  if (count == 0) return values;
  if (!header.fortran_order || header.shape.size() < 2) {
    if (header.float16) {
      for (std::size_t position = 0; position < count; ++position)
        values[position] = element(position);
    } else {
      std::memcpy(values.data(), data.data(), count * sizeof(float));
    }
    return values;
  }
  // Fortran order: the first index varies fastest in the file. Walk the file in order, keeping
  // the multi-index and its row-major offset.
  const std::size_t rank = header.shape.size();
  std::vector<int64_t> row_major_stride(rank, 1), index(rank, 0);
  for (std::size_t axis = rank - 1; axis-- > 0;)
    row_major_stride[axis] = row_major_stride[axis + 1] * header.shape[axis + 1];
  int64_t offset = 0;
  for (std::size_t position = 0; position < count; ++position) {
    values[static_cast<std::size_t>(offset)] = element(position);
    for (std::size_t axis = 0; axis < rank; ++axis) {
      offset += row_major_stride[axis];
      if (++index[axis] < header.shape[axis]) break;
      offset -= row_major_stride[axis] * header.shape[axis];
      index[axis] = 0;
    }
  }
  return values;
}

}  // namespace attnbench
