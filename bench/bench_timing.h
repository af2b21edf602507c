// Small helpers shared by the C++ benchmarks.
#pragma once

#include <algorithm>
#include <vector>

namespace otf::bench {

// The median of timings (robust to the outliers of a shared machine).
inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace otf::bench
