// The GradScaler's settings (grad_scaler.h) apart from LibTorch, so that the settings the LAMMPS
// styles hold can carry them, and the one place their rules are checked.
#pragma once

#include <cstdint>

namespace otf {

// Defaults are PyTorch's: GradScaler(init_scale=2.**16, growth_factor=2.0, backoff_factor=0.5,
// growth_interval=2000, enabled=True).
struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;
};

// Every rule of the options of an enabled scaler, each stated once: PyTorch's two (the growth
// factor above 1, the backoff factor below 1, with PyTorch's messages; the GradScaler's
// constructor checks these) and OTF-Torch's (a finite positive init_scale, a positive backoff
// factor, a growth_interval of at least 1), which PyTorch leaves unchecked although any other
// value breaks scaling. A disabled scaler accepts anything, as in PyTorch. Throws
// std::invalid_argument.
void check_grad_scaler_options(const GradScalerOptions& options);

}  // namespace otf
