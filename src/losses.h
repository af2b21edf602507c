// Training losses for energies, forces and stresses, and their weighted composition into the one
// scalar that backward sees. Every reduction runs in float32 or wider whatever the prediction's
// dtype, and every loss works on bfloat16 predictions against float32/float64 targets.
#pragma once

#include <torch/torch.h>

#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "training_batch.h"

namespace otf {

// How a residual r = prediction - target is penalised, component by component:
//   MSE:   r^2
//   Huber: 0.5 r^2 if |r| < delta, else delta (|r| - 0.5 delta)   (PyTorch's huber_loss)
enum class LossKind { MSE, Huber };

// Accepts "mse" and "huber" in any letter case with surrounding whitespace; throws
// std::invalid_argument naming the bad value and listing the accepted ones.
LossKind parse_loss_kind(std::string_view text);
std::string to_string(LossKind kind);
std::ostream& operator<<(std::ostream& out, LossKind kind);

// nvalchemi's Huber losses default to delta = 0.01 (docs/design.md §10); PyTorch's huber_loss
// defaults to 1.0. We follow the reference, in the units of the quantity (eV, eV/A, eV/A^3...).
constexpr double kDefaultHuberDelta = 0.01;

// Why the losses never call mse_loss/huber_loss on mixed dtypes: in LibTorch 1.13 a bfloat16
// prediction against a float32 target runs forward but backward throws "Found dtype Float but
// expected BFloat16" (docs/design.md §7.8, pitfall 3). Prediction and target are first cast to
// loss_dtype() (autocast_region.h): the widest of float32 and both dtypes. The casts are
// differentiable, so the prediction's gradient comes back in the prediction's own dtype, and
// every sum below runs in float32 or float64 (§7.8 pitfall 1: bf16 sums lose whole eV).
//
// The elementwise penalty of prediction - target, shape of the inputs, dtype loss_dtype.
// Throws std::invalid_argument unless both are floating with equal shapes (no broadcasting: a
// [frames,1] prediction against a [frames] target would silently give [frames,frames]) and, for
// Huber, delta is finite and > 0.
torch::Tensor pointwise_loss(const torch::Tensor& prediction, const torch::Tensor& target,
                             LossKind kind, double huber_delta = kDefaultHuberDelta);

// A loss before its final division: loss = sum / max(count, 1) (an empty selection gives 0, as
// nvalchemi's default reduce), or sum / normalizer when the caller knows a better denominator.
//
// Data parallelism (the LAMMPS fix: every MPI rank evaluates the forces of the atoms it owns,
// force_mask selects them, ghosts excluded). With the single-process loss
//   L = sum_over_all_atoms penalty / C,   C = number of counted force components,
// rank r computes L_r = sum_over_atoms_owned_by_r penalty / C with normalizer C = the MPI_SUM of
// every rank's `count`. Each atom is owned by exactly one rank, so sum_r L_r = L, and, the loss
// being linear in the per-rank sums, dL/dtheta = sum_r dL_r/dtheta: all-reduce the gradients with
// MPI_SUM (not an average) and the update is the single-process one. The same holds for energy
// and stress losses when the frames (not the atoms of one frame) are split over ranks; a frame
// whose energy is a sum over ranks must be reduced before its loss is taken.
struct LossSum {
  torch::Tensor sum;    // 0-d, differentiable, loss dtype
  torch::Tensor count;  // 0-d, no gradient, same dtype and device as sum

  torch::Tensor mean() const;
  // Throws std::invalid_argument unless normalizer is finite and > 0.
  torch::Tensor divided_by(double normalizer) const;
  // A 0-d tensor (e.g. an all-reduced count), used as is; no host synchronisation.
  torch::Tensor divided_by(const torch::Tensor& normalizer) const;
};

struct EnergyLossOptions {
  LossKind kind = LossKind::MSE;
  double huber_delta = kDefaultHuberDelta;  // eV (per atom when per_atom)
  // False: penalty of Ep - Et per frame, mean over frames.
  // True: prediction and target divided by the frame's atom count N_i (clamped to >= 1), then
  // weighted by N_i: sum_i N_i h(Ep_i/N_i - Et_i/N_i) / sum_i N_i. For MSE this is nvalchemi's
  // EnergyMSELoss(per_atom=True) (docs/design.md §10). We use the same atom weighting for
  // Huber, where nvalchemi's EnergyHuberLoss takes a plain mean over frames: one rule for both
  // kinds, each atom counts once, and it equals the plain mean whenever frames have equal sizes
  // (every frame of a LAMMPS run).
  bool per_atom = false;
  std::optional<double> normalizer;  // replaces `count` (see LossSum)
};

struct ForceLossOptions {
  LossKind kind = LossKind::MSE;
  double huber_delta = kDefaultHuberDelta;  // eV/A
  std::optional<double> normalizer;         // replaces `count` (see LossSum)
};

struct StressLossOptions {
  LossKind kind = LossKind::MSE;
  double huber_delta = kDefaultHuberDelta;  // stress units of the data (e.g. eV/A^3)
  std::optional<double> normalizer;         // replaces `count` (see LossSum)
};

// Energies [frames] (or [frames,1]). `atoms_per_frame` [frames] (integer or floating) is needed
// only when options.per_atom; pass an undefined tensor otherwise. count = frames, or sum N_i.
LossSum energy_loss_sum(const torch::Tensor& prediction, const torch::Tensor& target,
                        const torch::Tensor& atoms_per_frame, const EnergyLossOptions& options);
torch::Tensor energy_loss(const torch::Tensor& prediction, const torch::Tensor& target,
                          const torch::Tensor& atoms_per_frame, const EnergyLossOptions& options);

// Forces [atoms,3]; `force_mask` [atoms] bool selects the atoms that count (undefined: all).
// Masked-out atoms are removed before the penalty, so NaN or garbage in them (ghost atoms) can
// reach neither the loss nor the gradient. sum over the selected components; count = 3 x selected
// atoms; the mean is over valid components, as nvalchemi's ForceMSELoss with
// normalize_by_atom_count=False.
LossSum force_loss_sum(const torch::Tensor& prediction, const torch::Tensor& target,
                       const torch::Tensor& force_mask, const ForceLossOptions& options);
torch::Tensor force_loss(const torch::Tensor& prediction, const torch::Tensor& target,
                         const torch::Tensor& force_mask, const ForceLossOptions& options);

// Stresses [frames,3,3] or Voigt [frames,6] (prediction and target in the same layout); mean over
// all components, as nvalchemi's StressMSELoss when every entry is labelled. In the full layout
// each shear component counts twice (xy and yx), in Voigt once.
LossSum stress_loss_sum(const torch::Tensor& prediction, const torch::Tensor& target,
                        const StressLossOptions& options);
torch::Tensor stress_loss(const torch::Tensor& prediction, const torch::Tensor& target,
                          const StressLossOptions& options);

template <typename Options>
struct WeightedLoss {
  double weight = 1.0;
  Options options;
};

// Which losses a ComposedLoss sums. A term that is present is always evaluated and reported,
// even with weight 0 (to monitor a quantity without training on it); zero-weight terms are left
// out of total_loss, so a NaN in a monitored term cannot reach the gradient.
struct ComposedLossSettings {
  std::optional<WeightedLoss<EnergyLossOptions>> energy;
  std::optional<WeightedLoss<ForceLossOptions>> forces;
  std::optional<WeightedLoss<StressLossOptions>> stress;
  // False (default): total = sum_i w_i L_i with the weights as given, so a weight keeps its
  // meaning when a term is added. True: the weights are divided by their sum, as nvalchemi's
  // ComposedLossFunction(normalize_weights=True) (docs/design.md §10).
  bool normalize_weights = false;
};

// The loss of the training loop: total_loss = sum_i w_i * component_i over "energy", "forces"
// and "stress", reading the conventional names of training_batch.h from the predictions and the
// batch ("energy", "forces", "stress" in both; "atoms_per_frame" for a per-atom energy loss;
// "force_mask" if present). For data parallelism (see LossSum) the batch may carry 0-d tensors
// "energy_loss_normalizer", "forces_loss_normalizer", "stress_loss_normalizer": each replaces its
// term's count (and the normalizer of its options) for that call.
class ComposedLoss {
 public:
  // Throws std::invalid_argument if no term is present, a weight is negative or non-finite, all
  // weights are 0, or an option is invalid (Huber delta, normalizer).
  explicit ComposedLoss(ComposedLossSettings settings);

  // Throws std::out_of_range naming a missing prediction or batch tensor and the term needing it;
  // std::invalid_argument for bad shapes or dtypes.
  LossOutput operator()(const Predictions& predictions, const TrainingBatch& batch) const;

  const ComposedLossSettings& settings() const { return settings_; }
  // The weights total_loss uses (after normalisation), by component name.
  const std::map<std::string, double>& effective_weights() const { return effective_weights_; }

 private:
  ComposedLossSettings settings_;
  std::map<std::string, double> effective_weights_;
};

}  // namespace otf
