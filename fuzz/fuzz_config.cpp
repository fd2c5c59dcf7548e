// Fuzzes run configurations with the real schema of `seqmix train`: a YAML document (first byte even) or
// "--set key=value" overrides, one per line (first byte odd). Any input is merged or gives a one-line
// Error; a merged configuration writes a config.yaml that reads back to the same configuration (what
// --resume relies on).
#include <sstream>

#include "fuzz_support.h"
#include "seqmix/io/config.h"
#include "seqmix/train/run.h"

using namespace seqmix;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text = fuzz::as_string(data + 1, size - 1);
  Config config(run_config_schema());
  try {
    if (data[0] % 2 == 0) {
      config.merge_yaml_text(text, "fuzz.yaml");
    } else {
      std::istringstream lines(text);
      for (std::string line; std::getline(lines, line);) config.apply_override(line);
    }
  } catch (const Error& e) {
    fuzz::require_one_line(e);
    return 0;
  }
  const std::string yaml = config.to_yaml();
  Config again(run_config_schema());
  try {
    again.merge_yaml_text(yaml, "config.yaml");
  } catch (const Error& e) {
    fuzz::fail("the written config.yaml does not read back: " + std::string(e.what()) + "\n" + yaml);
  }
  fuzz::require(again.to_yaml() == yaml, "config.yaml reads back to another configuration:\n" + yaml);
  return 0;
}
