// FNV-1a, 64 bit (Fowler, Noll, Vo): a fast hash of bytes that detects damage or difference, not
// tampering. Used for model-file checksums and for comparing replicas, settings and bases.
#pragma once

#include <cstddef>
#include <cstdint>

namespace otf {

constexpr uint64_t kFnv1aOffset = 14695981039346656037ULL;

// The hash of `size` bytes at `data`, continuing from `hash`.
inline uint64_t fnv1a64(const void* data, std::size_t size, uint64_t hash = kFnv1aOffset) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * 1099511628211ULL;
  return hash;
}

}  // namespace otf
