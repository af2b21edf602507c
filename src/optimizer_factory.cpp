#include "optimizer_factory.h"

#include "keywords.h"

#include <array>
#include <cctype>
#include <cmath>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace otf {
namespace {

constexpr KeywordTable<OptimizerKind, 3> kNames{{
    {"adam", OptimizerKind::Adam},
    {"adamw", OptimizerKind::AdamW},
    {"sgd", OptimizerKind::SGD},
}};

[[noreturn]] void reject(OptimizerKind kind, const std::string& what) {
  throw std::invalid_argument("optimizer " + to_string(kind) + ": " + what);
}

void require_non_negative_finite(OptimizerKind kind, const char* name, double value) {
  if (!std::isfinite(value) || value < 0.0) {
    reject(kind, std::string("invalid ") + name + " " + format_number(value) +
                     " (expected a finite value >= 0)");
  }
}

void check_parameters(OptimizerKind kind, const std::vector<torch::Tensor>& params) {
  if (params.empty()) reject(kind, "got an empty parameter list");
  for (size_t i = 0; i < params.size(); ++i) {
    const torch::Tensor& param = params[i];
    const std::string which = "parameter " + std::to_string(i);
    if (!param.defined()) reject(kind, which + " is an undefined tensor");
    if (!param.is_floating_point()) {
      reject(kind, which + " has dtype " + std::string(c10::toString(param.scalar_type())) +
                       " (only floating-point tensors can be optimized)");
    }
    // PyTorch's Optimizer.add_param_group: a non-leaf tensor never receives .grad.
    if (!param.is_leaf()) reject(kind, which + " is not a leaf tensor (can't optimize it)");
  }
}

void check_unused_settings(OptimizerKind kind, const OptimizerSettings& settings) {
  const OptimizerSettings defaults;
  const bool uses_adam_settings = kind == OptimizerKind::Adam || kind == OptimizerKind::AdamW;
  const bool uses_sgd_settings = kind == OptimizerKind::SGD;
  auto unused = [&](const char* name, const char* users) {
    reject(kind,
           std::string(name) + " is a setting of " + users + " only; remove it or choose " + users);
  };
  if (!uses_adam_settings) {
    if (settings.betas != defaults.betas) unused("betas", "adam/adamw");
    if (settings.eps != defaults.eps) unused("eps", "adam/adamw");
    if (settings.amsgrad != defaults.amsgrad) unused("amsgrad", "adam/adamw");
  }
  if (!uses_sgd_settings) {
    if (settings.momentum != defaults.momentum) unused("momentum", "sgd");
    if (settings.dampening != defaults.dampening) unused("dampening", "sgd");
    if (settings.nesterov != defaults.nesterov) unused("nesterov", "sgd");
  }
}

// The checks of PyTorch's Adam/AdamW/SGD constructors, as std::invalid_argument with our wording.
void check_values(OptimizerKind kind, const OptimizerSettings& settings) {
  require_non_negative_finite(kind, "learning rate", settings.learning_rate);
  require_non_negative_finite(kind, "weight decay", effective_weight_decay(kind, settings));
  if (kind == OptimizerKind::SGD) {
    require_non_negative_finite(kind, "momentum", settings.momentum);
    require_non_negative_finite(kind, "dampening", settings.dampening);
    if (settings.nesterov && (settings.momentum <= 0.0 || settings.dampening != 0.0)) {
      reject(kind, "nesterov momentum requires a momentum > 0 and zero dampening");
    }
    return;
  }
  require_non_negative_finite(kind, "eps", settings.eps);
  const auto [beta1, beta2] = settings.betas;
  for (const double beta : {beta1, beta2}) {
    if (!(beta >= 0.0 && beta < 1.0)) {
      reject(kind, "invalid betas (" + format_number(beta1) + ", " + format_number(beta2) +
                       ") (each must be in [0, 1))");
    }
  }
}

}  // namespace

OptimizerKind parse_optimizer_kind(std::string_view text) {
  return parse_keyword(kNames, text, "optimizer", "accepted: adam, adamw, sgd; any case");
}

std::string to_string(OptimizerKind kind) { return keyword_spelling(kNames, kind, "OptimizerKind"); }

std::ostream& operator<<(std::ostream& out, OptimizerKind kind) { return out << to_string(kind); }

double effective_weight_decay(OptimizerKind kind, const OptimizerSettings& settings) {
  if (settings.weight_decay) return *settings.weight_decay;
  switch (kind) {
    case OptimizerKind::Adam:
      return torch::optim::AdamOptions().weight_decay();
    case OptimizerKind::AdamW:
      return torch::optim::AdamWOptions().weight_decay();
    case OptimizerKind::SGD:
      return torch::optim::SGDOptions(settings.learning_rate).weight_decay();
  }
  throw std::invalid_argument("invalid OptimizerKind value " +
                              std::to_string(static_cast<int>(kind)));
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(OptimizerKind kind,
                                                        std::vector<torch::Tensor> params,
                                                        const OptimizerSettings& settings) {
  check_parameters(kind, params);
  check_unused_settings(kind, settings);
  check_values(kind, settings);
  const double weight_decay = effective_weight_decay(kind, settings);
  switch (kind) {
    case OptimizerKind::Adam:
      return std::make_unique<torch::optim::Adam>(std::move(params),
                                                  torch::optim::AdamOptions(settings.learning_rate)
                                                      .betas(settings.betas)
                                                      .eps(settings.eps)
                                                      .weight_decay(weight_decay)
                                                      .amsgrad(settings.amsgrad));
    case OptimizerKind::AdamW:
      return std::make_unique<torch::optim::AdamW>(
          std::move(params), torch::optim::AdamWOptions(settings.learning_rate)
                                 .betas(settings.betas)
                                 .eps(settings.eps)
                                 .weight_decay(weight_decay)
                                 .amsgrad(settings.amsgrad));
    case OptimizerKind::SGD:
      return std::make_unique<torch::optim::SGD>(std::move(params),
                                                 torch::optim::SGDOptions(settings.learning_rate)
                                                     .momentum(settings.momentum)
                                                     .dampening(settings.dampening)
                                                     .weight_decay(weight_decay)
                                                     .nesterov(settings.nesterov));
  }
  throw std::invalid_argument("invalid OptimizerKind value " +
                              std::to_string(static_cast<int>(kind)));
}

}  // namespace otf
