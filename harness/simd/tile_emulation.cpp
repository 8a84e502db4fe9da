#include "harness/simd/tile_emulation.h"

#include <stdexcept>
#include <string>

namespace attnbench::simd {

void throw_tile_misuse(int tile, const char* problem) {
  std::string message = "tile emulation: ";
  if (tile >= 0) message += "tile " + std::to_string(tile) + ": ";
  throw std::logic_error(message + problem);
}

}  // namespace attnbench::simd
