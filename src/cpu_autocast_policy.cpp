#include "cpu_autocast_policy.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <initializer_list>
#include <optional>
#include <string>

#include "torch_compat.h"

namespace otf {
namespace {

constexpr c10::DeviceType kCpu = c10::DeviceType::CPU;

thread_local bool fp16_emulation_enabled = false;

enum class CastPolicy { LowerPrecision, Float32, Promote };

// LibTorch's own eligibility test (autocast_mode.h): a defined floating CPU/mkldnn tensor that is
// not double. Double and integer tensors pass through every policy untouched (docs/design.md
// §7.2, A7).
bool is_eligible(const at::Tensor& tensor) { return at::autocast::is_eligible(tensor, kCpu); }

// The fp16 emulation: values become exactly what a Half tensor would hold, storage stays float32.
// Both casts are differentiable (ToCopyBackward0), so the gradient flowing back through the round
// trip is rounded through Half as well and overflows to inf where real fp16 would.
at::Tensor round_through_half(const at::Tensor& tensor) {
  return tensor.to(at::kHalf).to(at::kFloat);
}

at::Tensor cast_to_lower_precision(const at::Tensor& tensor) {
  if (!is_eligible(tensor)) return tensor;
  if (fp16_emulation_enabled) {
    // Only dense tensors: mkldnn/sparse layouts have no Half round trip worth emulating here.
    return tensor.layout() == c10::kStrided ? round_through_half(tensor) : tensor;
  }
  const c10::ScalarType lower = torch_compat::autocast_dtype(kCpu);
  if (c10::GradMode::is_enabled()) return at::autocast::cached_cast(lower, tensor, kCpu);
  // A cast made with grad mode off has no grad_fn; LibTorch would cache it anyway and hand it to
  // the next training forward in the same region, silently dropping gradients (pytorch#65766,
  // #112583; docs/design.md §7.8, pitfall 7). Casting without the cache while grad mode is off
  // avoids that.
  return tensor.scalar_type() == lower ? tensor : tensor.to(lower);
}

// CUDA's fp32 policy (docs/design.md §7.2): low-precision inputs are widened, so sums of atomic
// energies, exponentials and norms are computed and returned in float32 (docs/design.md §7.8,
// pitfalls 1 and 4).
at::Tensor cast_to_float32(const at::Tensor& tensor) {
  return is_eligible(tensor) && tensor.scalar_type() != at::kFloat ? tensor.to(at::kFloat) : tensor;
}

// The top `count` entries of a boxed stack are an op's arguments before the call and its results
// after it.
template <typename Visit>
void for_each_tensor_on_top(torch::jit::Stack& stack, size_t count, const Visit& visit) {
  for (auto it = stack.end() - static_cast<std::ptrdiff_t>(count); it != stack.end(); ++it) {
    if (it->isTensor()) {
      visit(it->toTensor());
    } else if (it->isTensorList()) {
      for (const at::Tensor& tensor : it->toTensorList().vec()) visit(tensor);
    }
  }
}

template <typename Cast>
void cast_tensors_on_top(torch::jit::Stack& stack, size_t count, const Cast& cast) {
  for (auto it = stack.end() - static_cast<std::ptrdiff_t>(count); it != stack.end(); ++it) {
    if (it->isTensor()) {
      *it = cast(it->toTensor());
    } else if (it->isTensorList()) {
      // A fresh list: the caller's list may be shared (c10::List has reference semantics).
      c10::List<at::Tensor> casted;
      for (const at::Tensor& tensor : it->toTensorList().vec()) casted.push_back(cast(tensor));
      *it = std::move(casted);
    }
  }
}

// CUDA's promote policy (at::autocast::prioritize): the widest eligible floating type wins, so a
// float32 buffer accumulating bfloat16 contributions stays float32.
std::optional<c10::ScalarType> widest_eligible_type(torch::jit::Stack& stack,
                                                    size_t num_arguments) {
  std::optional<c10::ScalarType> widest;
  for_each_tensor_on_top(stack, num_arguments, [&widest](const at::Tensor& tensor) {
    if (!is_eligible(tensor)) return;
    widest = widest ? c10::promoteTypes(*widest, tensor.scalar_type()) : tensor.scalar_type();
  });
  return widest;
}

// One boxed kernel serves every overload of every op of a policy: it casts the arguments on the
// stack, calls the op below autocast, and (fp16 emulation) rounds the results through Half. The
// same shape as LibTorch's WrapFunction_ in aten/src/ATen/autocast_mode.cpp, but boxed.
template <CastPolicy policy>
void autocast_cpu_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
  const size_t num_arguments = op.schema().arguments().size();
  if constexpr (policy == CastPolicy::LowerPrecision) {
    cast_tensors_on_top(*stack, num_arguments, cast_to_lower_precision);
  } else if constexpr (policy == CastPolicy::Float32) {
    cast_tensors_on_top(*stack, num_arguments, cast_to_float32);
  } else {
    if (const auto widest = widest_eligible_type(*stack, num_arguments)) {
      cast_tensors_on_top(*stack, num_arguments, [target = *widest](const at::Tensor& tensor) {
        return is_eligible(tensor) && tensor.scalar_type() != target ? tensor.to(target) : tensor;
      });
    }
  }
  op.callBoxed(stack);
  if constexpr (policy == CastPolicy::LowerPrecision) {
    if (fp16_emulation_enabled) {
      // A float16 op returns float16: round the float32 accumulation once, as fp16 storage would.
      cast_tensors_on_top(*stack, op.schema().returns().size(), [](const at::Tensor& result) {
        return result.defined() && result.scalar_type() == at::kFloat &&
                       result.layout() == c10::kStrided
                   ? round_through_half(result)
                   : result;
      });
    }
  }
}

template <CastPolicy policy>
void register_policy(torch::Library& library, const std::vector<std::string_view>& ops) {
  for (const std::string_view op : ops) {
    library.impl(std::string(op).c_str(),
                 torch::CppFunction::makeFromBoxedFunction<&autocast_cpu_kernel<policy>>());
  }
}

torch::Library register_cpu_autocast_kernels() {
  // Replacing LibTorch's AutocastCPU kernels makes OperatorEntry::registerKernel TORCH_WARN
  // "Overriding a previously registered kernel" once per op; the override is intended, so the
  // warning is swallowed for this registration only (the handler is restored afterwards).
  torch_compat::CallbackWarningHandler silent([](const std::string& /*message*/) {});
  const torch_compat::WarningHandlerGuard silence(&silent);
  torch::Library library(torch::Library::IMPL, "aten", c10::DispatchKey::AutocastCPU, __FILE__,
                         __LINE__);
  register_policy<CastPolicy::LowerPrecision>(library, cpu_lower_precision_ops());
  register_policy<CastPolicy::Float32>(library, cpu_float32_ops());
  register_policy<CastPolicy::Promote>(library, cpu_promote_ops());
  return library;
}

}  // namespace

void install_cpu_autocast_policy() {
  // The Library keeps the kernels registered while it lives: for the whole process.
  static const torch::Library registration = register_cpu_autocast_kernels();
}

bool is_cpu_fp16_emulation_enabled() { return fp16_emulation_enabled; }

void set_cpu_fp16_emulation_enabled(bool enabled) { fp16_emulation_enabled = enabled; }

namespace {

// `ops` followed, on a LibTorch that still has them, by the named-dimension overloads
// (torch_compat.h: removed in 2.x).
std::vector<std::string_view> with_named_overloads(std::vector<std::string_view> ops,
                                                   std::initializer_list<std::string_view> named) {
  if (torch_compat::has_named_dimension_overloads()) ops.insert(ops.end(), named);
  return ops;
}

}  // namespace

// The lists are grouped by kind (docs/design.md §7.2).
// clang-format off
const std::vector<std::string_view>& cpu_lower_precision_ops() {
  static const std::vector<std::string_view> ops{
      "_convolution.deprecated", "conv1d", "conv1d.padding", "conv2d", "conv2d.padding",
      "conv3d", "conv3d.padding", "conv_tbc",
      "mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear"};
  return ops;
}

const std::vector<std::string_view>& cpu_float32_ops() {
  static const std::vector<std::string_view> ops = [] {
    auto listed = with_named_overloads(
        {// reductions (CUDA: fp32_set_opt_dtype), mean added: energies are means and sums
         "sum", "sum.dim_IntList", "mean", "mean.dim", "cumsum", "cumprod", "softmax.int",
         "log_softmax.int", "logsumexp",
         // norms (CUDA: fp32 and fp32_append_dtype)
         "norm.Scalar", "norm.ScalarOpt_dim", "frobenius_norm.dim", "nuclear_norm",
         "nuclear_norm.dim", "layer_norm", "native_layer_norm", "group_norm", "cosine_similarity",
         "dist", "pdist", "renorm",
         // range-sensitive math (CUDA: fp32)
         "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
         "reciprocal", "rsqrt", "sinh", "tan", "pow.Tensor_Scalar", "pow.Tensor_Tensor",
         "pow.Scalar", "softplus",
         // LibTorch 1.13 keeps conv_transpose in float32 on CPU, 2.x lowers it: listed so that it
         // stays float32 with every LibTorch (torch_compat.h)
         "conv_transpose1d", "conv_transpose2d.input", "conv_transpose3d.input"},
        {"sum.dim_DimnameList", "mean.names_dim", "cumsum.dimname", "cumprod.dimname",
         "softmax.Dimname", "log_softmax.Dimname", "logsumexp.names", "norm.names_ScalarOpt_dim"});
    if (torch_compat::has_frobenius_norm_without_dim()) listed.push_back("frobenius_norm");
    return listed;
  }();
  return ops;
}

const std::vector<std::string_view>& cpu_promote_ops() {
  static const std::vector<std::string_view> ops = with_named_overloads(
      {"cross", "dot", "index_put", "scatter_add", "index_add"},
      {"scatter_add.dimname", "index_add.dimname"});
  return ops;
}
// clang-format on

}  // namespace otf
