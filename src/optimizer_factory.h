// Builds the optimizer a training run asks for by name (the LAMMPS fix's `optimizer adam|adamw|sgd`
// keyword) from one settings struct. The result is LibTorch's own optimizer, so stepping,
// serialisation and the GradScaler's unscale_/step work on it unchanged.
#pragma once

#include <torch/torch.h>

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "optimizer_kind.h"

namespace otf {


// Defaults are LibTorch 1.13's (torch/optim/adam.h, adamw.h, sgd.h), which are PyTorch's.
// A setting the chosen kind does not use must stay at its default: make_optimizer rejects e.g.
// momentum for Adam, so that a misplaced keyword in an input script is reported, not ignored.
struct OptimizerSettings {
  // LibTorch's Adam/AdamW default. SGD has none in LibTorch (PyTorch 1.13 makes it required), so
  // SGD gets the same 1e-3 when the caller sets nothing.
  double learning_rate = 1e-3;
  // Unset means the kind's LibTorch default: 0 for Adam and SGD, 1e-2 for AdamW. Adam and SGD add
  // it to the gradient (L2 penalty); AdamW decays the weights directly (Loshchilov & Hutter).
  std::optional<double> weight_decay;
  // Adam, AdamW.
  std::tuple<double, double> betas{0.9, 0.999};
  double eps = 1e-8;
  bool amsgrad = false;
  // SGD.
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
};

// The weight decay `kind` will use: settings.weight_decay or the kind's LibTorch default.
double effective_weight_decay(OptimizerKind kind, const OptimizerSettings& settings);

// One parameter group holding `params`. Throws std::invalid_argument for an empty list, an
// undefined, non-floating or non-leaf tensor (PyTorch: "can't optimize a non-leaf Tensor"), a
// negative or non-finite learning rate, eps or weight decay, betas outside [0, 1), negative
// momentum or dampening, nesterov without momentum or with dampening (PyTorch's SGD check), or a
// setting the kind does not use.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(OptimizerKind kind,
                                                        std::vector<torch::Tensor> params,
                                                        const OptimizerSettings& settings = {});

}  // namespace otf
