#include "hook.h"

#include <c10/util/Type.h>

#include <string_view>
#include <utility>

namespace otf {

Hook::Hook(TrainingStage stage, int frequency) : stages_{stage}, frequency_(frequency) {}

Hook::Hook(std::set<TrainingStage> stages, int frequency)
    : stages_(std::move(stages)), frequency_(frequency) {}

Hook::Hook(int frequency) : frequency_(frequency) {}

bool Hook::runs_on_stage(TrainingStage stage) const { return stages_.count(stage) > 0; }

std::string Hook::name() const { return readable_type_name(typeid(*this)); }

CallbackHook::CallbackHook(TrainingStage stage, Callback callback, int frequency)
    : Hook(stage, frequency), callback_(std::move(callback)) {}

CallbackHook::CallbackHook(std::set<TrainingStage> stages, Callback callback, int frequency)
    : Hook(std::move(stages), frequency), callback_(std::move(callback)) {}

void CallbackHook::operator()(TrainContext& ctx, TrainingStage stage) { callback_(ctx, stage); }

std::string readable_type_name(const std::type_info& type) {
  std::string name = c10::demangle(type.name());
  constexpr std::string_view kPrefix = "otf::";
  if (name.compare(0, kPrefix.size(), kPrefix) == 0) name.erase(0, kPrefix.size());
  return name;
}

}  // namespace otf
