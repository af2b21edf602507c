// Learning-rate schedules paired with an optimizer. Time-based schedules step once per executed
// optimizer step (never on a step the GradScaler skipped); metric-driven ones (reduce-on-plateau)
// step only after a validation pass, with its metric. LibTorch 1.13 has only StepLR, so the
// schedules are ours, with one interface the update orchestrator can drive.
#pragma once

#include <torch/torch.h>

namespace otf {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  // True for schedules driven by a validation metric (ReduceLROnPlateau): the orchestrator never
  // steps them per batch; the strategy calls step_with_metric after validation.
  virtual bool is_metric_driven() const { return false; }
  // One executed optimizer step (time-based schedules). Metric-driven ones throw std::logic_error.
  virtual void step() = 0;
  // A validation metric (metric-driven schedules). Time-based ones throw std::logic_error.
  virtual void step_with_metric(double metric) = 0;
  // The learning rate of the first parameter group, as the schedule last set it.
  virtual double current_lr() const = 0;
  // Everything needed to resume bitwise (counters, best metric, base learning rates).
  virtual void save(torch::serialize::OutputArchive& archive) const = 0;
  virtual void load(torch::serialize::InputArchive& archive) = 0;
};

}  // namespace otf
