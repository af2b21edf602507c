// Calibrated uncertainty (docs/design.md §13): the committee's spread mapped to the error the model
// is expected to make, learned online from the labels the run already has. Every label is first
// predicted (committee mean and spread, before the label is learned) and then compared with the
// reference's answer; the ratio of actual to predicted errors over the recent labels is the
// calibration. The on-the-fly policy compares the calibrated error with the accuracy the user
// asked for. Whole-frame values (every rank holds the same), no LibTorch or MPI.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace otf {

// One label's prediction against its answer, before the label was learned.
struct LabelErrorSample {
  // Per atom of the whole frame, in one order: the committee's force deviation
  // (committee_vector_deviation) and the length of the committee mean's force error vector.
  std::vector<double> force_spread;
  std::vector<double> force_error;
  // Per atom: the members' standard deviation of the frame energy, and the committee mean's
  // error of it, each divided by the atoms of the frame.
  double energy_spread = 0.0;
  double energy_error = 0.0;
  // How many labels the model that made the prediction had learned.
  int64_t model_labels = 0;
};

class ErrorCalibration {
 public:
  // The calibration uses the last window_labels samples (the relation between spread and error
  // changes as the model learns), and of those only the ones predicted by a model that had
  // learned at least half the labels the newest sample's model had.
  // spread_is_error_estimate: the spread is already an error estimate in force units (a Bayesian
  // model's posterior predictive spread, bayesian_linear_potential.h); the calibration then only
  // corrects over-confidence: the scales are never below 1 (a sample from a model that knew
  // nothing yet, whose prior spread dwarfs its error, must not make later spreads look large).
  explicit ErrorCalibration(int64_t window_labels = 40, bool spread_is_error_estimate = false);

  void add(LabelErrorSample sample);
  int64_t samples() const { return static_cast<int64_t>(samples_.size()); }
  int64_t window_labels() const { return window_labels_; }

  // The factor that turns the committee's spread into the expected force error (1 without
  // samples): the root of the median over the window's labels of each label's sum error^2 / sum
  // spread^2 over its atoms. Each label counts once: a committee's spread is proportional to its
  // error within a label, not across labels, and as one sum over all the window's atoms a label
  // taken where the committee disagreed wildly (a spread 50x the others') outweighed a dozen
  // later ones and left the predictions 3x too small (docs/design.md §13.1). A posterior's spread
  // (spread_is_error_estimate) is one error estimate throughout: its scale is pooled over all the
  // window's atoms, sqrt(sum error^2 / sum spread^2), the maximum-likelihood factor of a common
  // variance.
  double force_scale() const;
  // The same for the per-atom energy: the median of |error| / spread, or the pooled root mean
  // square ratio for a posterior.
  double energy_scale() const;
  // Expected force RMSE per component of a frame whose atoms' squared spreads average
  // mean_square_spread: force_scale() * sqrt(mean_square_spread / 3).
  double predicted_force_rmse(double mean_square_spread) const;
  // Expected per-atom energy error of a frame with the given per-atom energy spread.
  double predicted_energy_error(double energy_spread) const;
  // The factor q with error <= q * spread for the given fraction of the window's atoms (the
  // empirical quantile of error / spread; 0 without samples): a per-atom force error bound of
  // that coverage is q times the atom's spread.
  double force_bound_factor(double coverage) const;
  // The 90% bound factor the policy reports: the window's quantile at a level that adapts to the
  // coverage the bound actually had (adaptive conformal inference, Gibbs and Candes 2021): after
  // each label, level += 0.5 * (fraction of its atoms above the bound - 0.08). A run whose errors
  // drift (each label is a configuration the model has not learned yet) keeps at least 90%
  // coverage that way (the 8% aimed at leaves a margin), where a fixed 90% quantile of the past
  // falls short (13% misses on the Si example).
  double force_bound90_factor() const { return force_bound_factor(bound_level_); }
  void record_bound_outcome(double fraction_above_bound);
  double bound_level() const { return bound_level_; }

  // Spearman's rank correlation of the window's per-atom spreads and errors (each predicted
  // before its label was learned, so an honest test of the ranking).
  double force_rank_correlation() const;

  // Every sample of the window, for a restart file; decode() checks what it reads.
  std::string encode() const;
  // Throws std::runtime_error for damaged bytes.
  void decode(const std::string& bytes);
  // The samples' model_labels, kept apart in a restart file (added after the samples were).
  // decode_model_labels after decode; empty bytes (an older file): 0 for every sample, so the
  // next sample's model counts as newer. Throws std::runtime_error for a count that does not
  // match the samples'.
  std::string encode_model_labels() const;
  void decode_model_labels(const std::string& bytes);

 private:
  double floored(double scale) const { return spread_is_error_estimate_ ? std::max(scale, 1.0) : scale; }
  // Per label, its squared error and squared spread (summed over its atoms for forces).
  struct LabelSquares {
    double error = 0.0, spread = 0.0;
  };
  // The scale of labels' errors to their spreads (force_scale, energy_scale): pooled for a
  // posterior, else the median of the labels' own ratios, of squares (`of_squares`: the root of
  // that median) or of roots; labels without error and spread are left out; 1 without any.
  double scale_of(const std::vector<LabelSquares>& labels, bool of_squares) const;

  int64_t window_labels_;
  bool spread_is_error_estimate_ = false;
  std::deque<LabelErrorSample> samples_;
  double bound_level_ = 0.9;
};

// Spearman's rank correlation of two equally long series (average ranks for ties); 0 for fewer
// than two values or a constant series.
double spearman_rank_correlation(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace otf
