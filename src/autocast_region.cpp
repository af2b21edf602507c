#include "autocast_region.h"

#include <ATen/autocast_mode.h>
#include <c10/util/Exception.h>

#include <stdexcept>
#include <string>

#include "cpu_autocast_policy.h"
#include "cpu_float16_mode.h"
#include "torch_compat.h"

namespace otf {
namespace {

// The innermost entered region of this thread; regions form a stack per thread, as nested
// Python `with` blocks do, and each remembers the one it was entered inside.
thread_local const AutocastRegion* innermost_region = nullptr;

c10::Device checked_device(c10::Device device) {
  if (device.type() != c10::DeviceType::CPU && device.type() != c10::DeviceType::CUDA) {
    throw std::invalid_argument("autocast region on device '" + device.str() +
                                "': OTF-Torch supports autocast on cpu and cuda devices only");
  }
  return device;
}

}  // namespace

AutocastRegion::AutocastRegion(c10::Device device, Precision precision, AutocastOptions options)
    : AutocastRegion(device, precision, std::defer_lock, options) {
  enter();
}

AutocastRegion::AutocastRegion(c10::Device device, Precision precision, std::defer_lock_t,
                               AutocastOptions options)
    : device_(checked_device(device)), precision_(precision), options_(options) {
  if (device_.is_cpu() && changes_autocast_state()) install_cpu_autocast_policy();
}

AutocastRegion AutocastRegion::disabled(c10::Device device) {
  AutocastOptions options;
  options.enabled = false;
  return AutocastRegion(device, Precision::Float32, options);
}

AutocastRegion::~AutocastRegion() {
  if (!entered_) return;
  if (changes_autocast_state() && innermost_region != this) {
    // Throwing from a destructor would terminate; the state of the entering thread or of the
    // regions entered after this one cannot be restored from here.
    TORCH_WARN(
        "otf::AutocastRegion destroyed while not the innermost entered region of this "
        "thread (destroyed on another thread, or out of nesting order); autocast state "
        "left as is");
    return;
  }
  exit();
}

bool AutocastRegion::changes_autocast_state() const {
  // Float32 asks for no autocast at all (MixedPrecisionHook: "no autocast context is created");
  // a disabled region always acts, whatever its precision, to switch autocast off.
  return !options_.enabled || precision_ != Precision::Float32;
}

void AutocastRegion::enter() {
  if (entered_) return;
  if (changes_autocast_state()) {
    // Order of torch.autocast.__enter__ (torch/amp/autocast_mode.py).
    save_state();
    apply_state();
    at::autocast::increment_nesting();
    at::autocast::set_autocast_cache_enabled(options_.cache_enabled);
    enclosing_region_ = innermost_region;
    innermost_region = this;
  }
  entered_ = true;
}

void AutocastRegion::exit() {
  if (!entered_) return;
  if (changes_autocast_state()) {
    if (innermost_region != this) {
      throw std::logic_error(
          "otf::AutocastRegion::exit(): this region is not the innermost one entered on this "
          "thread; autocast state is thread-local, so exit regions on the thread that entered "
          "them and in the reverse order of entering");
    }
    // Order of torch.autocast.__exit__: the cache goes with the outermost region.
    innermost_region = enclosing_region_;
    enclosing_region_ = nullptr;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    restore_state();
  }
  entered_ = false;
}

void AutocastRegion::save_state() {
  const c10::DeviceType type = device_.type();
  saved_.cache_enabled = at::autocast::is_autocast_cache_enabled();
  saved_.enabled = torch_compat::is_autocast_enabled(type);
  saved_.lower_precision_dtype = torch_compat::autocast_dtype(type);
  if (device_.is_cpu()) saved_.cpu_fp16_emulation = is_cpu_fp16_emulation_enabled();
}

void AutocastRegion::apply_state() const {
  const c10::DeviceType type = device_.type();
  const bool enabled = options_.enabled;
  torch_compat::set_autocast_enabled(type, enabled);
  if (device_.is_cpu()) {
    const bool emulate_fp16 = enabled && precision_ == Precision::Float16 &&
                              cpu_float16_mode() == CpuFloat16Mode::Emulated;
    if (enabled) {
      // Emulated float16 keeps the CPU autocast dtype at bfloat16 (1.13 accepts nothing else);
      // the kernels of cpu_autocast_policy.h read the thread-local flag instead.
      torch_compat::set_autocast_dtype(type,
                                       emulate_fp16 ? at::kBFloat16 : to_scalar_type(precision_));
    }
    set_cpu_fp16_emulation_enabled(emulate_fp16);
  } else if (enabled) {
    torch_compat::set_autocast_dtype(type, to_scalar_type(precision_));
  }
}

void AutocastRegion::restore_state() const {
  const c10::DeviceType type = device_.type();
  torch_compat::set_autocast_enabled(type, saved_.enabled);
  torch_compat::set_autocast_dtype(type, saved_.lower_precision_dtype);
  if (device_.is_cpu()) set_cpu_fp16_emulation_enabled(saved_.cpu_fp16_emulation);
  at::autocast::set_autocast_cache_enabled(saved_.cache_enabled);
}

c10::ScalarType loss_dtype(c10::ScalarType prediction, c10::ScalarType target) {
  return c10::promoteTypes(c10::promoteTypes(prediction, target), c10::ScalarType::Float);
}

std::pair<at::Tensor, at::Tensor> widen_for_loss(const at::Tensor& prediction,
                                                 const at::Tensor& target) {
  const c10::ScalarType dtype = loss_dtype(prediction.scalar_type(), target.scalar_type());
  return {prediction.to(dtype), target.to(dtype)};
}

}  // namespace otf
