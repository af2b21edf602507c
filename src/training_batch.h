// What flows through the training engine: a batch of labelled configurations (named tensors), the
// model's predictions for it, and the composed loss. Named tensors keep the engine independent of
// any one model or of LAMMPS: the fix fills the names that its model and losses use.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>

namespace otf {

// Conventional names (a model or loss may use others):
//   "positions" [atoms,3]  "species" [atoms] (int64)  "cell" [frames,3,3]
//   "frame_of_atom" [atoms] (int64)  "atoms_per_frame" [frames]
//   "energy" [frames]  "forces" [atoms,3]  "stress" [frames,3,3]  "force_mask" [atoms] (bool)
class TrainingBatch {
 public:
  TrainingBatch() = default;
  explicit TrainingBatch(std::map<std::string, torch::Tensor> tensors);

  bool contains(const std::string& name) const;
  // Throws std::out_of_range naming the missing tensor and listing the ones present.
  const torch::Tensor& at(const std::string& name) const;
  void set(const std::string& name, torch::Tensor tensor);
  const std::map<std::string, torch::Tensor>& tensors() const { return tensors_; }

  // A copy with every tensor on `device` (floating tensors keep their dtype).
  TrainingBatch to(const c10::Device& device) const;

 private:
  std::map<std::string, torch::Tensor> tensors_;
};

// Model outputs by name, e.g. "energy" [frames], "forces" [atoms,3], "stress" [frames,3,3].
using Predictions = std::map<std::string, torch::Tensor>;

// The result of a loss function: the total that backward sees, and its parts for reporting.
struct LossOutput {
  torch::Tensor total_loss;                                      // scalar, float32 or wider
  std::map<std::string, torch::Tensor> per_component_unweighted;  // e.g. "energy", "forces"
  std::map<std::string, double> per_component_weight;            // effective weights

  // Every tensor detached (the context's losses after backward).
  LossOutput detached() const;
};

}  // namespace otf
