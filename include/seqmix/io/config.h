#pragma once
// A run configuration: dotted keys ("train.lr") with types, defaults and meanings declared by a schema.
// Values come, in increasing precedence, from defaults, a YAML file (nested maps), command-line flags
// and "--set key=value" overrides. Unknown keys, wrong types and out-of-range values are errors that
// name the key and its source.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "seqmix/io/spec.h"

namespace seqmix {

class Config {
 public:
  explicit Config(std::vector<OptionInfo> schema);

  // Merges a YAML document (file path or text); `source` names it in errors.
  void merge_yaml_file(const std::string& path);
  void merge_yaml_text(const std::string& text, const std::string& source);
  // "key=value" (lists as a;b;c).
  void apply_override(const std::string& assignment);
  void set(const std::string& key, const std::string& value, const std::string& source);
  // Sets key only if no file, flag or override set it (e.g. a task's own training defaults).
  void set_default(const std::string& key, const std::string& value, const std::string& source);
  bool was_set(const std::string& key) const { return explicit_.count(key) > 0; }

  int64_t integer(const std::string& key) const;
  double real(const std::string& key) const;
  bool flag(const std::string& key) const;
  const std::string& text(const std::string& key) const;
  std::vector<std::string> list(const std::string& key) const;
  // The values of `keys` (declared in the schema) as Options, so that they are read into a struct through its
  // Field<O>s (declaration.h) as every component's options are (the trainer's: train_config_from).
  Options options(const std::vector<OptionInfo>& keys) const;

  // The resolved configuration as nested YAML (every key, defaults included).
  std::string to_yaml() const;
  const std::vector<OptionInfo>& schema() const { return schema_; }

 private:
  const OptionInfo& info(const std::string& key, const std::string& source) const;
  std::vector<OptionInfo> schema_;
  std::map<std::string, std::string> values_;
  std::set<std::string> explicit_;
};

}  // namespace seqmix
