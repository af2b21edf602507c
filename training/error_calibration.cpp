#include "error_calibration.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>

namespace otf {
namespace {

// A spread below this is treated as this when it divides an error (a committee that agrees to
// the last bit says nothing about the error; the ratio must stay finite).
constexpr double kSmallestSpread = 1e-12;
// The miss rate the 90% bound's level aims at (8%: a margin, so that the realised rate of a run
// of a hundred labels stays at or below 10%), the level's step per label, and its range.
constexpr double kMissRate = 0.08;
constexpr double kLevelStep = 0.5;
constexpr double kLowestLevel = 0.5, kHighestLevel = 0.999;

void put(std::string& bytes, const void* data, std::size_t size) {
  bytes.append(static_cast<const char*>(data), size);
}

template <typename T> T take(const std::string& bytes, std::size_t& at) {
  T value{};
  if (at + sizeof(T) > bytes.size())
    throw std::runtime_error("the error calibration's saved samples are truncated");
  std::memcpy(&value, bytes.data() + at, sizeof(T));
  at += sizeof(T);
  return value;
}

std::vector<double> average_ranks(const std::vector<double>& values) {
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t i, std::size_t j) { return values[i] < values[j]; });
  std::vector<double> ranks(values.size());
  for (std::size_t start = 0; start < order.size();) {
    std::size_t end = start + 1;
    while (end < order.size() && values[order[end]] == values[order[start]]) ++end;
    const double rank = 0.5 * static_cast<double>(start + end - 1);
    for (std::size_t k = start; k < end; ++k) ranks[order[k]] = rank;
    start = end;
  }
  return ranks;
}

// The median (the mean of the middle two for an even count) of a non-empty sample.
double median(std::vector<double> values) {
  const std::size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle),
                   values.end());
  const double upper = values[middle];
  if (values.size() % 2 == 1) return upper;
  return 0.5 * (upper + *std::max_element(values.begin(),
                                          values.begin() + static_cast<std::ptrdiff_t>(middle)));
}

}  // namespace

ErrorCalibration::ErrorCalibration(int64_t window_labels, bool spread_is_error_estimate) :
    window_labels_(window_labels), spread_is_error_estimate_(spread_is_error_estimate) {
  if (window_labels_ < 1) throw std::invalid_argument("the calibration window must be >= 1 label");
}

void ErrorCalibration::add(LabelErrorSample sample) {
  if (sample.force_spread.size() != sample.force_error.size())
    throw std::invalid_argument("a calibration sample needs one force error per spread");
  // A model that had learned fewer than half the labels this one has is another model: its
  // errors say little about this one's (a prediction from two labels can be 25x over-confident,
  // one from thirty 1.4x, examples/si-walkers).
  while (!samples_.empty() && 2 * samples_.front().model_labels < sample.model_labels)
    samples_.pop_front();
  samples_.push_back(std::move(sample));
  while (static_cast<int64_t>(samples_.size()) > window_labels_) samples_.pop_front();
}

double ErrorCalibration::scale_of(const std::vector<LabelSquares>& labels,
                                  bool of_squares) const {
  constexpr double kSmallestSquare = kSmallestSpread * kSmallestSpread;
  double error = 0.0, spread = 0.0;
  std::vector<double> ratios;
  for (const LabelSquares& label : labels) {
    if (label.error == 0.0 && label.spread == 0.0) continue;  // nothing to err on
    error += label.error;
    spread += label.spread;
    ratios.push_back(of_squares ? label.error / std::max(label.spread, kSmallestSquare)
                                : std::sqrt(label.error) /
                                      std::max(std::sqrt(label.spread), kSmallestSpread));
  }
  if (ratios.empty()) return 1.0;
  if (spread_is_error_estimate_) return floored(std::sqrt(error / std::max(spread, kSmallestSquare)));
  const double middle = median(std::move(ratios));
  return floored(of_squares ? std::sqrt(middle) : middle);
}

double ErrorCalibration::force_scale() const {
  std::vector<LabelSquares> labels;
  for (const LabelErrorSample& s : samples_) {
    LabelSquares& label = labels.emplace_back();
    for (std::size_t i = 0; i < s.force_spread.size(); ++i) {
      label.error += s.force_error[i] * s.force_error[i];
      label.spread += s.force_spread[i] * s.force_spread[i];
    }
  }
  return scale_of(labels, true);
}

double ErrorCalibration::energy_scale() const {
  std::vector<LabelSquares> labels;
  for (const LabelErrorSample& s : samples_)
    labels.push_back({s.energy_error * s.energy_error, s.energy_spread * s.energy_spread});
  return scale_of(labels, false);
}

double ErrorCalibration::predicted_force_rmse(double mean_square_spread) const {
  return force_scale() * std::sqrt(std::max(mean_square_spread, 0.0) / 3.0);
}

double ErrorCalibration::predicted_energy_error(double energy_spread) const {
  return energy_scale() * energy_spread;
}

double ErrorCalibration::force_bound_factor(double coverage) const {
  std::vector<double> ratios;
  for (const LabelErrorSample& s : samples_)
    for (std::size_t i = 0; i < s.force_spread.size(); ++i)
      ratios.push_back(s.force_error[i] / std::max(s.force_spread[i], kSmallestSpread));
  if (ratios.empty()) return 0.0;
  std::sort(ratios.begin(), ratios.end());
  // The smallest ratio that covers the fraction (nearest rank, rounded up).
  // (less a rounding allowance, so that 0.9 of 100 is the 90th and not the 91st)
  const double position = std::ceil(coverage * static_cast<double>(ratios.size()) - 1e-9);
  const auto index = static_cast<std::size_t>(std::clamp(position, 1.0,
                                                         static_cast<double>(ratios.size())));
  return ratios[index - 1];
}

double ErrorCalibration::force_rank_correlation() const {
  std::vector<double> spreads, errors;
  for (const LabelErrorSample& s : samples_) {
    spreads.insert(spreads.end(), s.force_spread.begin(), s.force_spread.end());
    errors.insert(errors.end(), s.force_error.begin(), s.force_error.end());
  }
  return spearman_rank_correlation(spreads, errors);
}

void ErrorCalibration::record_bound_outcome(double fraction_above_bound) {
  bound_level_ = std::clamp(bound_level_ + kLevelStep * (fraction_above_bound - kMissRate),
                            kLowestLevel, kHighestLevel);
}

std::string ErrorCalibration::encode() const {
  std::string bytes;
  put(bytes, &bound_level_, sizeof(bound_level_));
  const auto count = static_cast<uint64_t>(samples_.size());
  put(bytes, &count, sizeof(count));
  for (const LabelErrorSample& s : samples_) {
    const auto atoms = static_cast<uint64_t>(s.force_spread.size());
    put(bytes, &atoms, sizeof(atoms));
    put(bytes, s.force_spread.data(), atoms * sizeof(double));
    put(bytes, s.force_error.data(), atoms * sizeof(double));
    put(bytes, &s.energy_spread, sizeof(double));
    put(bytes, &s.energy_error, sizeof(double));
  }
  return bytes;
}

void ErrorCalibration::decode(const std::string& bytes) {
  std::size_t at = 0;
  const auto level = take<double>(bytes, at);
  if (!(level >= kLowestLevel && level <= kHighestLevel))
    throw std::runtime_error("the error calibration's saved bound level is damaged");
  const auto count = take<uint64_t>(bytes, at);
  std::deque<LabelErrorSample> samples;
  for (uint64_t k = 0; k < count; ++k) {
    const auto atoms = take<uint64_t>(bytes, at);
    if (atoms > (bytes.size() - at) / (2 * sizeof(double)))
      throw std::runtime_error("the error calibration's saved samples are damaged");
    LabelErrorSample s;
    s.force_spread.resize(atoms);
    s.force_error.resize(atoms);
    for (auto& v : s.force_spread) v = take<double>(bytes, at);
    for (auto& v : s.force_error) v = take<double>(bytes, at);
    s.energy_spread = take<double>(bytes, at);
    s.energy_error = take<double>(bytes, at);
    samples.push_back(std::move(s));
  }
  if (at != bytes.size())
    throw std::runtime_error("the error calibration's saved samples have trailing bytes");
  samples_ = std::move(samples);
  bound_level_ = level;
  while (static_cast<int64_t>(samples_.size()) > window_labels_) samples_.pop_front();
}

std::string ErrorCalibration::encode_model_labels() const {
  std::string bytes;
  for (const LabelErrorSample& s : samples_) put(bytes, &s.model_labels, sizeof(s.model_labels));
  return bytes;
}

void ErrorCalibration::decode_model_labels(const std::string& bytes) {
  if (bytes.empty()) {
    for (LabelErrorSample& s : samples_) s.model_labels = 0;
    return;
  }
  if (bytes.size() != samples_.size() * sizeof(int64_t))
    throw std::runtime_error("the error calibration's saved label counts do not match its samples");
  std::size_t at = 0;
  std::vector<int64_t> labels;
  for (std::size_t k = 0; k < samples_.size(); ++k) {
    labels.push_back(take<int64_t>(bytes, at));
    if (labels.back() < 0)
      throw std::runtime_error("the error calibration's saved label counts are damaged");
  }
  for (std::size_t k = 0; k < samples_.size(); ++k) samples_[k].model_labels = labels[k];
}

double spearman_rank_correlation(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) throw std::invalid_argument("spearman: series of different lengths");
  if (a.size() < 2) return 0.0;
  const std::vector<double> ra = average_ranks(a), rb = average_ranks(b);
  const double n = static_cast<double>(a.size());
  const double mean = 0.5 * (n - 1.0);
  double cov = 0.0, va = 0.0, vb = 0.0;
  for (std::size_t i = 0; i < ra.size(); ++i) {
    cov += (ra[i] - mean) * (rb[i] - mean);
    va += (ra[i] - mean) * (ra[i] - mean);
    vb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (va == 0.0 || vb == 0.0) return 0.0;
  return cov / std::sqrt(va * vb);
}

}  // namespace otf
