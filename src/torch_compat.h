// The one place where OTF-Torch's code differs between LibTorch 1.13 (Debian 12) and LibTorch 2.x
// (PyPI's torch wheel). Everything else calls these functions; docs/libtorch-versions.md lists the
// changes and how each is handled. Checked against 1.13 and 2.15 (and 2.14's headers); where the
// release between them that made a change is not checked, the threshold says which is assumed.
#pragma once

#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <c10/util/C++17.h>  // c10::guts::to_string (1.13)
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <functional>
#include <string>
#include <string_view>

#define OTF_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||      \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace otf::torch_compat {

// Autocast state by device type. PyTorch 2.4 added these and deprecated the per-device names
// (is_cpu_enabled, get_autocast_gpu_dtype, ...: errors under -Werror); 1.13 has only the old
// names, CUDA's without a device in them.
#if OTF_TORCH_AT_LEAST(2, 4)
inline bool is_autocast_enabled(c10::DeviceType device) {
  return at::autocast::is_autocast_enabled(device);
}
inline void set_autocast_enabled(c10::DeviceType device, bool enabled) {
  at::autocast::set_autocast_enabled(device, enabled);
}
inline c10::ScalarType autocast_dtype(c10::DeviceType device) {
  return at::autocast::get_autocast_dtype(device);
}
inline void set_autocast_dtype(c10::DeviceType device, c10::ScalarType dtype) {
  at::autocast::set_autocast_dtype(device, dtype);
}
#else
inline bool is_autocast_enabled(c10::DeviceType device) {
  return device == c10::DeviceType::CPU ? at::autocast::is_cpu_enabled()
                                        : at::autocast::is_enabled();
}
inline void set_autocast_enabled(c10::DeviceType device, bool enabled) {
  if (device == c10::DeviceType::CPU) {
    at::autocast::set_cpu_enabled(enabled);
  } else {
    at::autocast::set_enabled(enabled);
  }
}
inline c10::ScalarType autocast_dtype(c10::DeviceType device) {
  return device == c10::DeviceType::CPU ? at::autocast::get_autocast_cpu_dtype()
                                        : at::autocast::get_autocast_gpu_dtype();
}
inline void set_autocast_dtype(c10::DeviceType device, c10::ScalarType dtype) {
  if (device == c10::DeviceType::CPU) {
    at::autocast::set_autocast_cpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_gpu_dtype(dtype);
  }
}
#endif

// Whether LibTorch runs float16 matrix products and elementwise ops on CPU and accepts kHalf as
// the CPU autocast dtype. 1.13 does neither (set_autocast_cpu_dtype(kHalf) throws, Half mm is not
// implemented), so OTF-Torch emulates CPU float16 there (cpu_autocast_policy.h); 2.15 has both.
// Assumed from 2.4, with the device-type autocast API.
constexpr bool has_native_cpu_float16_autocast() { return OTF_TORCH_AT_LEAST(2, 4); }

// LibTorch 1.13 keeps conv_transpose1d/2d/3d in float32 under CPU autocast; 2.x lists them under
// lower_precision_fp. OTF-Torch's policy lists them as float32 on every version
// (cpu_autocast_policy.cpp), so nothing here depends on it.

// Named-dimension overloads of reductions and scatter ops (sum.dim_DimnameList, mean.names_dim,
// softmax.Dimname, scatter_add.dimname, ...) and frobenius_norm without a dim: present in 1.13,
// gone in 2.15. The exact 2.x release that dropped each is not checked here; 2.0 is assumed.
constexpr bool has_named_dimension_overloads() { return !OTF_TORCH_AT_LEAST(2, 0); }
constexpr bool has_frobenius_norm_without_dim() { return !OTF_TORCH_AT_LEAST(2, 0); }

// The key of a parameter in torch::optim::Optimizer::state(): its TensorImpl address, as a string
// in 1.13 (c10::guts::to_string), as a void* since 2.x.
#if OTF_TORCH_AT_LEAST(2, 0)
inline void* optimizer_state_key(const at::Tensor& parameter) {
  return parameter.unsafeGetTensorImpl();
}
#else
inline std::string optimizer_state_key(const at::Tensor& parameter) {
  return c10::guts::to_string(parameter.unsafeGetTensorImpl());
}
#endif

// A warning handler that calls `on_warning` with each warning's message. The handler's interface
// changed in 2.x: process() takes a c10::Warning instead of (location, message, verbatim), and the
// guard moved from c10::Warning to c10::WarningUtils.
class CallbackWarningHandler : public c10::WarningHandler {
 public:
  explicit CallbackWarningHandler(std::function<void(const std::string&)> on_warning)
      : on_warning_(std::move(on_warning)) {}
#if OTF_TORCH_AT_LEAST(2, 0)
  void process(const c10::Warning& warning) override { on_warning_(warning.msg()); }
#else
  void process(const c10::SourceLocation& /*source_location*/, const std::string& message,
               const bool /*verbatim*/) override {
    on_warning_(message);
  }
#endif

 private:
  std::function<void(const std::string&)> on_warning_;
};

#if OTF_TORCH_AT_LEAST(2, 0)
using WarningHandlerGuard = c10::WarningUtils::WarningHandlerGuard;
#else
using WarningHandlerGuard = c10::Warning::WarningHandlerGuard;
#endif

}  // namespace otf::torch_compat
