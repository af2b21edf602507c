#include "losses.h"

#include "keywords.h"

#include <array>
#include <cctype>
#include <cmath>
#include <functional>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "autocast_region.h"

namespace otf {
namespace {

constexpr KeywordTable<LossKind, 2> kNames{{
    {"mse", LossKind::MSE},
    {"huber", LossKind::Huber},
}};

std::string shape_of(const torch::Tensor& tensor) {
  std::ostringstream out;
  out << tensor.sizes();
  return out.str();
}

void require(bool condition, const std::string& message) {
  if (!condition) throw std::invalid_argument(message);
}

void check_floating(const torch::Tensor& tensor, const std::string& what) {
  require(tensor.defined(), what + " is an undefined tensor");
  require(tensor.is_floating_point(), what + " must be a floating-point tensor (it is " +
                                          std::string(c10::toString(tensor.scalar_type())) + ")");
}

void check_huber_delta(LossKind kind, double delta, const std::string& term) {
  if (kind != LossKind::Huber) return;
  require(std::isfinite(delta) && delta > 0.0,
          term + " loss: Huber delta must be finite and > 0 (got " + format_number(delta) + ")");
}

void check_normalizer(double normalizer, const std::string& term) {
  require(
      std::isfinite(normalizer) && normalizer > 0.0,
      term + " loss: normalizer must be finite and > 0 (got " + format_number(normalizer) + ")");
}

void check_options(LossKind kind, double delta, const std::optional<double>& normalizer,
                   const std::string& term) {
  check_huber_delta(kind, delta, term);
  if (normalizer) check_normalizer(*normalizer, term);
}

// [frames] or [frames,1] -> [frames]; anything else is an error naming `what`.
torch::Tensor as_frame_vector(const torch::Tensor& tensor, const std::string& what) {
  require(tensor.defined(), what + " is an undefined tensor");
  if (tensor.dim() == 1) return tensor;
  require(tensor.dim() == 2 && tensor.size(1) == 1,
          what + " must have shape [frames] or [frames,1] (it has " + shape_of(tensor) + ")");
  return tensor.reshape({tensor.size(0)});
}

torch::Tensor count_tensor(double count, const torch::Tensor& like) {
  return torch::full({}, count, like.options().requires_grad(false));
}

torch::Tensor finish(const LossSum& partial, const std::optional<double>& normalizer) {
  return normalizer ? partial.divided_by(*normalizer) : partial.mean();
}

}  // namespace

LossKind parse_loss_kind(std::string_view text) {
  return parse_keyword(kNames, text, "loss", "accepted: mse, huber; any case");
}

std::string to_string(LossKind kind) { return keyword_spelling(kNames, kind, "LossKind"); }

std::ostream& operator<<(std::ostream& out, LossKind kind) { return out << to_string(kind); }

torch::Tensor pointwise_loss(const torch::Tensor& prediction, const torch::Tensor& target,
                             LossKind kind, double huber_delta) {
  check_floating(prediction, "loss prediction");
  check_floating(target, "loss target");
  require(
      prediction.sizes() == target.sizes(),
      "loss: prediction has shape " + shape_of(prediction) + " but target has " + shape_of(target));
  check_huber_delta(kind, huber_delta, "pointwise");
  const auto [wide_prediction, wide_target] = widen_for_loss(prediction, target);
  switch (kind) {
    case LossKind::MSE:
      return at::mse_loss(wide_prediction, wide_target, at::Reduction::None);
    case LossKind::Huber:
      return at::huber_loss(wide_prediction, wide_target, at::Reduction::None, huber_delta);
  }
  throw std::invalid_argument("invalid LossKind value " + std::to_string(static_cast<int>(kind)));
}

// ---- LossSum ------------------------------------------------------------------------------------

torch::Tensor LossSum::mean() const { return sum / count.clamp_min(1.0); }

torch::Tensor LossSum::divided_by(double normalizer) const {
  check_normalizer(normalizer, "the");
  return sum / normalizer;
}

torch::Tensor LossSum::divided_by(const torch::Tensor& normalizer) const {
  require(normalizer.defined() && normalizer.numel() == 1,
          "loss normalizer must be a tensor with one element");
  return sum / normalizer.detach().to(sum.options().requires_grad(false)).reshape({});
}

// ---- energy -------------------------------------------------------------------------------------

LossSum energy_loss_sum(const torch::Tensor& prediction, const torch::Tensor& target,
                        const torch::Tensor& atoms_per_frame, const EnergyLossOptions& options) {
  check_options(options.kind, options.huber_delta, options.normalizer, "energy");
  const torch::Tensor frame_prediction = as_frame_vector(prediction, "energy prediction");
  const torch::Tensor frame_target = as_frame_vector(target, "energy target");
  check_floating(frame_prediction, "energy prediction");
  check_floating(frame_target, "energy target");
  require(frame_prediction.sizes() == frame_target.sizes(),
          "energy loss: prediction has shape " + shape_of(prediction) + " but target has " +
              shape_of(target));
  if (!options.per_atom) {
    const torch::Tensor penalty =
        pointwise_loss(frame_prediction, frame_target, options.kind, options.huber_delta);
    return {penalty.sum(), count_tensor(static_cast<double>(penalty.numel()), penalty)};
  }
  require(atoms_per_frame.defined(),
          "energy loss: per_atom needs 'atoms_per_frame' (the number of atoms of each frame)");
  const auto [wide_prediction, wide_target] = widen_for_loss(frame_prediction, frame_target);
  // Clamped to >= 1 as nvalchemi's EnergyMSELoss, so an empty frame cannot divide by zero.
  const torch::Tensor atom_counts = as_frame_vector(atoms_per_frame, "atoms_per_frame")
                                        .detach()
                                        .to(wide_prediction.options().requires_grad(false))
                                        .clamp_min(1.0);
  require(atom_counts.size(0) == wide_prediction.size(0),
          "energy loss: atoms_per_frame has " + std::to_string(atom_counts.size(0)) +
              " frames but the energies have " + std::to_string(wide_prediction.size(0)));
  const torch::Tensor penalty = pointwise_loss(
      wide_prediction / atom_counts, wide_target / atom_counts, options.kind, options.huber_delta);
  return {(atom_counts * penalty).sum(), atom_counts.sum()};
}

torch::Tensor energy_loss(const torch::Tensor& prediction, const torch::Tensor& target,
                          const torch::Tensor& atoms_per_frame, const EnergyLossOptions& options) {
  return finish(energy_loss_sum(prediction, target, atoms_per_frame, options), options.normalizer);
}

// ---- forces -------------------------------------------------------------------------------------

LossSum force_loss_sum(const torch::Tensor& prediction, const torch::Tensor& target,
                       const torch::Tensor& force_mask, const ForceLossOptions& options) {
  check_options(options.kind, options.huber_delta, options.normalizer, "force");
  check_floating(prediction, "force prediction");
  check_floating(target, "force target");
  require(prediction.dim() == 2 && prediction.size(1) == 3,
          "force loss: prediction must have shape [atoms,3] (it has " + shape_of(prediction) + ")");
  require(prediction.sizes() == target.sizes(), "force loss: prediction has shape " +
                                                    shape_of(prediction) + " but target has " +
                                                    shape_of(target));
  torch::Tensor counted_prediction = prediction;
  torch::Tensor counted_target = target;
  if (force_mask.defined()) {
    require(force_mask.scalar_type() == torch::kBool,
            "force loss: force_mask must be a bool tensor (it is " +
                std::string(c10::toString(force_mask.scalar_type())) + ")");
    require(force_mask.dim() == 1 && force_mask.size(0) == prediction.size(0),
            "force loss: force_mask must have shape [" + std::to_string(prediction.size(0)) +
                "] (it has " + shape_of(force_mask) + ")");
    // Selecting before the penalty (not multiplying by the mask afterwards) keeps inf/NaN of
    // excluded atoms out of the gradient too: 0 * inf is NaN.
    const torch::Tensor selected = force_mask.to(prediction.device());
    counted_prediction = prediction.index({selected});
    counted_target = target.index({selected.to(target.device())});
  }
  const torch::Tensor penalty =
      pointwise_loss(counted_prediction, counted_target, options.kind, options.huber_delta);
  return {penalty.sum(), count_tensor(static_cast<double>(penalty.numel()), penalty)};
}

torch::Tensor force_loss(const torch::Tensor& prediction, const torch::Tensor& target,
                         const torch::Tensor& force_mask, const ForceLossOptions& options) {
  return finish(force_loss_sum(prediction, target, force_mask, options), options.normalizer);
}

// ---- stress -------------------------------------------------------------------------------------

LossSum stress_loss_sum(const torch::Tensor& prediction, const torch::Tensor& target,
                        const StressLossOptions& options) {
  check_options(options.kind, options.huber_delta, options.normalizer, "stress");
  check_floating(prediction, "stress prediction");
  check_floating(target, "stress target");
  const bool full = prediction.dim() == 3 && prediction.size(1) == 3 && prediction.size(2) == 3;
  const bool voigt = prediction.dim() == 2 && prediction.size(1) == 6;
  require(full || voigt,
          "stress loss: prediction must have shape [frames,3,3] or Voigt "
          "[frames,6] (it has " +
              shape_of(prediction) + ")");
  require(prediction.sizes() == target.sizes(),
          "stress loss: prediction has shape " + shape_of(prediction) + " but target has " +
              shape_of(target) + " (both must use the same layout)");
  const torch::Tensor penalty =
      pointwise_loss(prediction, target, options.kind, options.huber_delta);
  return {penalty.sum(), count_tensor(static_cast<double>(penalty.numel()), penalty)};
}

torch::Tensor stress_loss(const torch::Tensor& prediction, const torch::Tensor& target,
                          const StressLossOptions& options) {
  return finish(stress_loss_sum(prediction, target, options), options.normalizer);
}

// ---- ComposedLoss -------------------------------------------------------------------------------

namespace {

const torch::Tensor& prediction_named(const Predictions& predictions, const std::string& name,
                                      const std::string& term) {
  const auto it = predictions.find(name);
  if (it != predictions.end()) return it->second;
  std::string present;
  for (const auto& entry : predictions) present += (present.empty() ? "" : ", ") + entry.first;
  throw std::out_of_range("predictions have no tensor '" + name +
                          "' (they have: " + (present.empty() ? std::string("nothing") : present) +
                          "); the " + term + " loss needs it");
}

const torch::Tensor& batch_tensor_named(const TrainingBatch& batch, const std::string& name,
                                        const std::string& term) {
  try {
    return batch.at(name);
  } catch (const std::out_of_range& missing) {
    throw std::out_of_range(std::string(missing.what()) + "; the " + term + " loss needs it");
  }
}

torch::Tensor finish_term(const LossSum& partial, const std::optional<double>& normalizer,
                          const TrainingBatch& batch, const std::string& term) {
  const std::string normalizer_name = term + "_loss_normalizer";
  if (batch.contains(normalizer_name)) return partial.divided_by(batch.at(normalizer_name));
  return finish(partial, normalizer);
}

void check_weight(double weight, const std::string& term) {
  require(
      std::isfinite(weight) && weight >= 0.0,
      "loss weight of '" + term + "' must be finite and >= 0 (got " + format_number(weight) + ")");
}

}  // namespace

ComposedLoss::ComposedLoss(ComposedLossSettings settings) : settings_(std::move(settings)) {
  std::map<std::string, double> weights;
  if (settings_.energy) {
    const auto& options = settings_.energy->options;
    check_options(options.kind, options.huber_delta, options.normalizer, "energy");
    weights["energy"] = settings_.energy->weight;
  }
  if (settings_.forces) {
    const auto& options = settings_.forces->options;
    check_options(options.kind, options.huber_delta, options.normalizer, "force");
    weights["forces"] = settings_.forces->weight;
  }
  if (settings_.stress) {
    const auto& options = settings_.stress->options;
    check_options(options.kind, options.huber_delta, options.normalizer, "stress");
    weights["stress"] = settings_.stress->weight;
  }
  require(!weights.empty(), "composed loss: no terms (set at least one of energy, forces, stress)");
  double weight_sum = 0.0;
  for (const auto& [term, weight] : weights) {
    check_weight(weight, term);
    weight_sum += weight;
  }
  require(weight_sum > 0.0, "composed loss: every weight is 0 (at least one must be > 0)");
  if (settings_.normalize_weights) {
    for (auto& entry : weights) entry.second /= weight_sum;
  }
  effective_weights_ = std::move(weights);
}

LossOutput ComposedLoss::operator()(const Predictions& predictions,
                                    const TrainingBatch& batch) const {
  LossOutput output;
  if (settings_.energy) {
    const EnergyLossOptions& options = settings_.energy->options;
    const torch::Tensor atoms_per_frame =
        options.per_atom ? batch_tensor_named(batch, "atoms_per_frame", "energy") : torch::Tensor();
    const LossSum partial =
        energy_loss_sum(prediction_named(predictions, "energy", "energy"),
                        batch_tensor_named(batch, "energy", "energy"), atoms_per_frame, options);
    output.per_component_unweighted["energy"] =
        finish_term(partial, options.normalizer, batch, "energy");
  }
  if (settings_.forces) {
    const ForceLossOptions& options = settings_.forces->options;
    const torch::Tensor force_mask =
        batch.contains("force_mask") ? batch.at("force_mask") : torch::Tensor();
    const LossSum partial =
        force_loss_sum(prediction_named(predictions, "forces", "forces"),
                       batch_tensor_named(batch, "forces", "forces"), force_mask, options);
    output.per_component_unweighted["forces"] =
        finish_term(partial, options.normalizer, batch, "forces");
  }
  if (settings_.stress) {
    const StressLossOptions& options = settings_.stress->options;
    const LossSum partial = stress_loss_sum(prediction_named(predictions, "stress", "stress"),
                                            batch_tensor_named(batch, "stress", "stress"), options);
    output.per_component_unweighted["stress"] =
        finish_term(partial, options.normalizer, batch, "stress");
  }

  // Terms in name order (energy, forces, stress), so the sum is reproducible bit for bit.
  for (const auto& [term, value] : output.per_component_unweighted) {
    const double weight = effective_weights_.at(term);
    output.per_component_weight[term] = weight;
    if (weight == 0.0) continue;
    const torch::Tensor weighted = value * weight;
    output.total_loss = output.total_loss.defined() ? output.total_loss + weighted : weighted;
  }
  return output;
}

}  // namespace otf
