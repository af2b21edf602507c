#include "training_batch.h"

#include <stdexcept>

namespace otf {

TrainingBatch::TrainingBatch(std::map<std::string, torch::Tensor> tensors)
    : tensors_(std::move(tensors)) {}

bool TrainingBatch::contains(const std::string& name) const { return tensors_.count(name) > 0; }

const torch::Tensor& TrainingBatch::at(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    std::string present;
    for (const auto& entry : tensors_) present += (present.empty() ? "" : ", ") + entry.first;
    throw std::out_of_range("training batch has no tensor '" + name + "' (it has: " +
                            (present.empty() ? std::string("nothing") : present) + ")");
  }
  return it->second;
}

void TrainingBatch::set(const std::string& name, torch::Tensor tensor) {
  tensors_[name] = std::move(tensor);
}

TrainingBatch TrainingBatch::to(const c10::Device& device) const {
  std::map<std::string, torch::Tensor> moved;
  for (const auto& [name, tensor] : tensors_) moved.emplace(name, tensor.to(device));
  return TrainingBatch(std::move(moved));
}

LossOutput LossOutput::detached() const {
  LossOutput copy;
  copy.total_loss = total_loss.defined() ? total_loss.detach() : total_loss;
  for (const auto& [name, value] : per_component_unweighted)
    copy.per_component_unweighted.emplace(name, value.defined() ? value.detach() : value);
  copy.per_component_weight = per_component_weight;
  return copy;
}

}  // namespace otf
