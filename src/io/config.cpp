#include "seqmix/io/config.h"

#include <yaml-cpp/yaml.h>

#include <functional>

#include "seqmix/io/atomic_file.h"
#include "seqmix/io/error.h"
#include "seqmix/io/printable.h"

namespace seqmix {

Config::Config(std::vector<OptionInfo> schema) : schema_(std::move(schema)) {
  for (const auto& o : schema_) values_[o.key] = o.default_value;
}

const OptionInfo& Config::info(const std::string& key, const std::string& source) const {
  for (const auto& o : schema_)
    if (o.key == key) return o;
  std::string keys;
  for (const auto& o : schema_) keys += (keys.empty() ? "" : ", ") + o.key;
  throw Error(source + ": unknown key '" + printable(key) + "'; valid keys: " + keys);
}

namespace {
// An item of a list key that starts with key=value is an option without its spec's name (a spec name
// holds no '='): in YAML, the remains of a spec split at its commas.
bool is_split_off_option(const std::string& item) {
  const size_t eq = item.find('=');
  return eq != std::string::npos && item.find(':') > eq;
}
}  // namespace

void Config::set(const std::string& key, const std::string& value, const std::string& source) {
  const OptionInfo& o = info(key, source);
  if (!valid_utf8(value)) throw Error(source + ": key '" + key + "' has a value that is not valid UTF-8");
  if (has_control_character(value))
    throw Error(source + ": key '" + key + "' has a value with a control character: '" + printable(value) + "'");
  if (o.type == OptionType::List)
    for (const auto& item : split_list(value))
      if (is_split_off_option(item))
        throw Error(source + ": item '" + item + "' of '" + key + "' is an option with no spec name before it (name:" + item + ")");
  check_option_value(o, value, source + ": key '" + key + "'");
  values_[key] = value;
  explicit_.insert(key);
}

void Config::set_default(const std::string& key, const std::string& value, const std::string& source) {
  if (was_set(key)) return;
  const OptionInfo& o = info(key, source);
  check_option_value(o, value, source + ": key '" + key + "'");
  values_[key] = value;
}

void Config::apply_override(const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Error("--set '" + assignment + "' is not of the form key=value");
  set(assignment.substr(0, eq), assignment.substr(eq + 1), "--set");
}

void Config::merge_yaml_file(const std::string& path) { merge_yaml_text(read_file(path), "config file " + path); }

void Config::merge_yaml_text(const std::string& text, const std::string& source) {
  // Binary bytes are refused before YAML sees them: yaml-cpp reads a line that starts with '%' as a directive
  // and can leave an empty document, which would pass as a config with no keys (a default run).
  if (const size_t nul = text.find('\0'); nul != std::string::npos)
    throw Error(source + " is not a text file (byte " + std::to_string(nul) + " is NUL)");
  if (!valid_utf8(text)) throw Error(source + " is not UTF-8 text");
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(source + " is not valid YAML (line " + std::to_string(e.mark.line + 1) + ": " + printable(e.msg) + ")");
  }
  if (root.IsNull()) return;
  if (!root.IsMap()) throw Error(source + " must be a mapping of keys to values");
  std::function<void(const YAML::Node&, const std::string&)> walk = [&](const YAML::Node& node, const std::string& prefix) {
    for (const auto& kv : node) {
      std::string name;
      try {
        name = kv.first.as<std::string>();
      } catch (const YAML::Exception&) {
        throw Error(source + ": a key under '" + prefix + "' is not a string");
      }
      if (has_control_character(name)) {
        throw Error(source + ": key '" + printable(name) + "' under '" + prefix + "' has a control character");
      }
      const std::string key = prefix.empty() ? name : prefix + "." + name;
      const YAML::Node& value = kv.second;
      if (value.IsMap()) {
        walk(value, key);
      } else if (value.IsSequence()) {
        const OptionInfo& o = info(key, source);
        if (o.type != OptionType::List) throw Error(source + ": key '" + key + "' takes a single value, not a list");
        std::vector<std::string> items;
        for (const auto& item : value) {
          if (!item.IsScalar()) throw Error(source + ": key '" + key + "' must be a list of strings");
          items.push_back(item.as<std::string>());
          if (has_control_character(items.back()))
            throw Error(source + ": an item of '" + key + "' has a control character: '" + printable(items.back()) + "'");
        }
        // YAML splits a flow list [fem:prior=softmax,flags=LT,heads=4] at every comma, so the options after
        // the first reach us as items of their own ('flags=LT', 'heads=4'): name=value with no spec name
        // before the '='. Say so, with the whole spec quoted, instead of reporting an unknown mixer.
        const auto split_off = is_split_off_option;
        for (size_t i = 1; i < items.size(); ++i) {
          if (!split_off(items[i]) || split_off(items[i - 1])) continue;
          std::string whole = items[i - 1];
          for (size_t j = i; j < items.size() && split_off(items[j]); ++j) whole += "," + items[j];
          throw Error(source + ": item '" + items[i] + "' of '" + key + "' looks like an option of '" + items[i - 1] +
                      "' that YAML split off at a comma; quote a spec with options: [\"" + whole + "\"]");
        }
        set(key, join_list(items), source);
      } else if (value.IsScalar()) {
        set(key, value.as<std::string>(), source);
      } else {
        throw Error(source + ": key '" + key + "' has no value");
      }
    }
  };
  walk(root, "");
}

int64_t Config::integer(const std::string& key) const { return parse_integer(values_.at(info(key, "config").key), key); }
double Config::real(const std::string& key) const { return parse_real(values_.at(info(key, "config").key), key); }
bool Config::flag(const std::string& key) const { return parse_flag(values_.at(info(key, "config").key), key); }
const std::string& Config::text(const std::string& key) const { return values_.at(info(key, "config").key); }
std::vector<std::string> Config::list(const std::string& key) const { return split_list(values_.at(info(key, "config").key)); }

Options Config::options(const std::vector<OptionInfo>& keys) const {
  Spec values{"config", {}};
  for (const auto& k : keys) values.options.emplace_back(k.key, values_.at(info(k.key, "config").key));
  return Options("config", keys, values);
}

std::string Config::to_yaml() const {
  // A tree of the dotted keys in schema order; leaves point at their option.
  // (A vector of Node, not of pair<name, Node>: a pair of an incomplete type is ill-formed, which clang refuses.)
  struct Node {
    std::string name;
    std::vector<Node> children;
    const OptionInfo* leaf = nullptr;
    Node& child(const std::string& child_name) {
      for (auto& c : children)
        if (c.name == child_name) return c;
      children.push_back(Node{child_name, {}, nullptr});
      return children.back();
    }
  };
  Node root;
  for (const auto& o : schema_) {
    Node* n = &root;
    size_t start = 0, dot;
    while ((dot = o.key.find('.', start)) != std::string::npos) {
      n = &n->child(o.key.substr(start, dot - start));
      start = dot + 1;
    }
    n->child(o.key.substr(start)).leaf = &o;
  }
  YAML::Emitter out;
  std::function<void(const Node&)> emit = [&](const Node& n) {
    out << YAML::BeginMap;
    for (const auto& child : n.children) {
      out << YAML::Key << child.name << YAML::Value;
      if (!child.leaf) {
        emit(child);
        continue;
      }
      const std::string& v = values_.at(child.leaf->key);
      if (child.leaf->type == OptionType::List) {
        out << YAML::BeginSeq;
        for (const auto& item : split_list(v)) out << item;
        out << YAML::EndSeq;
      } else {
        out << v;
      }
    }
    out << YAML::EndMap;
  };
  emit(root);
  return std::string(out.c_str()) + "\n";
}

}  // namespace seqmix
