// Fuzzes spec strings ("softmax:heads=4,rope=1") against the real registries of mixers, channel mixers,
// residual schemes, models and tasks: any text parses and validates, or gives a one-line Error. A parsed
// spec prints and parses back to itself, and a validated one resolves to a spec that validates to the
// same resolution (what config.yaml stores is read back unchanged).
#include <functional>
#include <vector>

#include "fuzz_support.h"
#include "seqmix/io/spec.h"
#include "seqmix/models/model_factory.h"
#include "seqmix/models/registry.h"
#include "seqmix/tasks/task.h"

using namespace seqmix;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = fuzz::as_string(data, size);
  Spec spec;
  try {
    spec = Spec::parse(text);
  } catch (const Error& e) {
    fuzz::require_one_line(e);
    return 0;
  }
  const Spec again = Spec::parse(spec.str());
  fuzz::require(again.name == spec.name && again.options == spec.options, "'" + spec.str() + "' does not parse back to itself");

  const std::vector<std::pair<std::string, std::function<const std::vector<ComponentInfo>&()>>> registries = {
      {"mixer", mixer_infos}, {"channel mixer", channel_mixer_infos}, {"residual", residual_infos},
      {"model", model_infos}, {"task", task_infos}};
  for (const auto& [kind, infos] : registries) {
    std::string resolved;
    try {
      resolved = component_options(infos(), kind, text).resolved();
    } catch (const Error& e) {
      fuzz::require_one_line(e);
      continue;
    }
    fuzz::require(component_options(infos(), kind, resolved).resolved() == resolved,
                  kind + " spec '" + resolved + "' does not resolve to itself");
  }
  return 0;
}
