#include "seqmix/io/spec.h"

#include <cctype>
#include <cerrno>
#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdlib>
#include <sstream>

#include "seqmix/io/error.h"
#include "seqmix/io/printable.h"

namespace seqmix {
namespace {


std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::string format_real(double v) {
  std::ostringstream os;
  os.precision(10);
  os << v;
  return os.str();
}

std::string join_names(const std::vector<ComponentInfo>& infos) {
  std::string out;
  for (size_t i = 0; i < infos.size(); ++i) out += (i ? ", " : "") + infos[i].name;
  return out;
}

}  // namespace

OptionInfo OptionInfo::integer(std::string key, int64_t value, std::string meaning, double min,
                               double max) {
  OptionInfo o{std::move(key), OptionType::Integer, std::to_string(value), std::move(meaning)};
  o.min = min;
  o.max = max;
  return o;
}
OptionInfo OptionInfo::real(std::string key, double value, std::string meaning, double min,
                            double max) {
  OptionInfo o{std::move(key), OptionType::Real, format_real(value), std::move(meaning)};
  // Within float32's range whatever the declaration says: the layers compute in float32, and a value beyond it
  // fails in a conversion that names no option.
  o.min = std::max(min, -static_cast<double>(std::numeric_limits<float>::max()));
  o.max = std::min(max, static_cast<double>(std::numeric_limits<float>::max()));
  return o;
}
OptionInfo OptionInfo::flag(std::string key, bool value, std::string meaning) {
  return OptionInfo{std::move(key), OptionType::Flag, value ? "1" : "0", std::move(meaning)};
}
OptionInfo OptionInfo::text(std::string key, std::string value, std::string meaning) {
  return OptionInfo{std::move(key), OptionType::Text, std::move(value), std::move(meaning)};
}
OptionInfo OptionInfo::choice(std::string key, std::string value, std::vector<std::string> choices,
                              std::string meaning) {
  OptionInfo o{std::move(key), OptionType::Choice, std::move(value), std::move(meaning)};
  o.choices = std::move(choices);
  return o;
}

OptionInfo OptionInfo::list(std::string key, std::vector<std::string> value, std::string meaning) {
  return OptionInfo{std::move(key), OptionType::List, join_list(value), std::move(meaning)};
}

std::vector<std::string> split_list(const std::string& joined) {
  std::vector<std::string> out;
  std::stringstream ss(joined);
  std::string item;
  while (std::getline(ss, item, ';')) {
    item = trim(item);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

std::string join_list(const std::vector<std::string>& items) { return join(items, ";"); }

std::string OptionInfo::type_name() const {
  switch (type) {
    case OptionType::Integer: return "int";
    case OptionType::Real: return "real";
    case OptionType::Flag: return "0|1";
    case OptionType::Text: return "text";
    case OptionType::Choice: return join(choices, "|");
    case OptionType::List: return "list";
  }
  return "?";
}

int64_t parse_integer(const std::string& text, const std::string& what) {
  const std::string s = trim(text);
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno == ERANGE)
    throw Error(what + " expects an integer, got '" + text + "'");
  return v;
}

double parse_real(const std::string& text, const std::string& what) {
  const std::string s = trim(text);
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    throw Error(what + " expects a finite number, got '" + text + "'");
  return v;
}

bool parse_flag(const std::string& text, const std::string& what) {
  const std::string s = trim(text);
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  throw Error(what + " expects 0 or 1, got '" + text + "'");
}

std::vector<int64_t> parse_integer_list(const std::string& text, const std::string& what) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(parse_integer(item, what));
  if (out.empty()) throw Error(what + " expects a comma-separated list of integers, got '" + text + "'");
  return out;
}

void check_option_value(const OptionInfo& d, const std::string& value, const std::string& what) {
  double numeric = 0;
  switch (d.type) {
    case OptionType::Integer: numeric = static_cast<double>(parse_integer(value, what)); break;
    case OptionType::Real: numeric = parse_real(value, what); break;
    case OptionType::Flag: parse_flag(value, what); break;
    case OptionType::Text: break;
    case OptionType::List:
      if (split_list(value).empty()) throw Error(what + " expects a non-empty list");
      break;
    case OptionType::Choice: {
      bool ok = false;
      for (const auto& c : d.choices) ok = ok || c == value;
      if (!ok) throw Error(what + " must be one of " + join(d.choices, ", ") + ", got '" + value + "'");
      break;
    }
  }
  if ((d.type == OptionType::Integer || d.type == OptionType::Real) && (numeric < d.min || numeric > d.max)) {
    std::string range = (std::isfinite(d.min) ? ">= " + format_real(d.min) : std::string()) +
                        (std::isfinite(d.min) && std::isfinite(d.max) ? " and " : "") +
                        (std::isfinite(d.max) ? "<= " + format_real(d.max) : std::string());
    throw Error(what + " must be " + range + ", got " + value);
  }
}

namespace {
// "(...)" where the first '(' closes only at the last character: "(a,b)" is, "(a)<(b)" is not.
bool enclosed_in_parentheses(const std::string& value) {
  if (value.size() < 2 || value.front() != '(' || value.back() != ')') return false;
  int depth = 0;
  for (size_t i = 0; i < value.size(); ++i) {
    depth += value[i] == '(' ? 1 : value[i] == ')' ? -1 : 0;
    if (depth == 0) return i + 1 == value.size();
  }
  return false;
}
}  // namespace

Spec Spec::parse(const std::string& text) {
  if (has_control_character(text)) throw Error("spec '" + printable(text) + "' contains a control character");
  Spec spec;
  const std::string s = trim(text);
  const size_t colon = s.find(':');
  spec.name = trim(s.substr(0, colon));
  if (spec.name.empty()) throw Error("spec '" + text + "' has no name before ':'");
  if (colon == std::string::npos) return spec;
  // Options split at commas outside parentheses, so a value may be a nested spec with several options:
  // "lm:residual=(nesterov:share=layer,norm=post),dim=64". Enclosing parentheses are dropped from values.
  std::vector<std::string> items(1);
  int depth = 0;
  for (char ch : s.substr(colon + 1)) {
    if (ch == '(') ++depth;
    if (ch == ')' && --depth < 0) throw Error("spec '" + text + "' has a ')' without its '('");
    if (ch == ',' && depth == 0) items.emplace_back();
    else items.back() += ch;
  }
  if (depth != 0) throw Error("spec '" + text + "' has a '(' without its ')'");
  for (std::string item : items) {
    item = trim(item);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw Error("spec '" + text + "': option '" + item + "' is not of the form key=value");
    std::string key = trim(item.substr(0, eq));
    std::string value = trim(item.substr(eq + 1));
    if (enclosed_in_parentheses(value)) value = trim(value.substr(1, value.size() - 2));
    if (key.empty()) throw Error("spec '" + text + "': option '" + item + "' has an empty key");
    for (char ch : key)
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '.' && ch != '-')
        throw Error("spec '" + text + "': option key '" + key + "' may hold only letters, digits, '_', '.' and '-'");
    for (const auto& kv : spec.options)
      if (kv.first == key) throw Error("spec '" + text + "' sets option '" + key + "' twice");
    spec.options.emplace_back(std::move(key), std::move(value));
  }
  return spec;
}

std::string Spec::str() const {
  std::string out = name;
  for (size_t i = 0; i < options.size(); ++i)
    out += (i ? "," : ":") + options[i].first + "=" +
           (options[i].second.find(',') != std::string::npos || enclosed_in_parentheses(options[i].second)
                ? "(" + options[i].second + ")"
                : options[i].second);
  return out;
}

Options::Options(std::string owner, const std::vector<OptionInfo>& declared, const Spec& spec)
    : owner_(std::move(owner)), name_(spec.name), declared_(declared) {
  values_.reserve(declared_.size());
  for (const auto& d : declared_) values_.push_back(d.default_value);
  given_.assign(declared_.size(), false);
  for (const auto& [key, value] : spec.options) {
    size_t i = 0;
    while (i < declared_.size() && declared_[i].key != key) ++i;
    if (i == declared_.size()) {
      std::vector<std::string> keys;
      for (const auto& d : declared_) keys.push_back(d.key);
      throw Error(owner_ + " has no option '" + key + "'; valid options: " +
                  (keys.empty() ? std::string("(none)") : join(keys, ", ")));
    }
    const OptionInfo& d = declared_[i];
    check_option_value(d, value, owner_ + " option '" + key + "'");
    values_[i] = value;
    given_[i] = true;
  }
}

const std::string& Options::raw(const std::string& key, OptionType expected) const {
  for (size_t i = 0; i < declared_.size(); ++i)
    if (declared_[i].key == key) {
      if (declared_[i].type != expected && !(expected == OptionType::Text &&
                                             declared_[i].type == OptionType::Choice))
        throw std::logic_error("option '" + key + "' of " + owner_ + " read with the wrong type");
      return values_[i];
    }
  throw std::logic_error("option '" + key + "' is not declared by " + owner_);
}

int64_t Options::integer(const std::string& key) const {
  return parse_integer(raw(key, OptionType::Integer), owner_ + " option '" + key + "'");
}
double Options::real(const std::string& key) const {
  return parse_real(raw(key, OptionType::Real), owner_ + " option '" + key + "'");
}
bool Options::flag(const std::string& key) const {
  return parse_flag(raw(key, OptionType::Flag), owner_ + " option '" + key + "'");
}
const std::string& Options::text(const std::string& key) const { return raw(key, OptionType::Text); }

bool Options::was_given(const std::string& key) const {
  for (size_t i = 0; i < declared_.size(); ++i)
    if (declared_[i].key == key) return given_[i];
  throw std::logic_error("option '" + key + "' is not declared by " + owner_);
}

std::string Options::resolved() const {
  Spec s;
  s.name = name_;
  for (size_t i = 0; i < declared_.size(); ++i) s.options.emplace_back(declared_[i].key, values_[i]);
  return s.str();
}

const ComponentInfo& find_component(const std::vector<ComponentInfo>& infos, const std::string& kind,
                                    const std::string& name) {
  for (const auto& i : infos)
    if (i.name == name) return i;
  throw Error("unknown " + kind + " '" + name + "'; valid " + kind + "s: " + join_names(infos));
}

Options component_options(const std::vector<ComponentInfo>& infos, const std::string& kind,
                          const std::string& spec) {
  const Spec parsed = Spec::parse(spec);
  const ComponentInfo& info = find_component(infos, kind, parsed.name);
  return Options(kind + " " + info.name, info.options, parsed);
}

std::string describe_components(const std::string& title, const std::vector<ComponentInfo>& infos) {
  std::ostringstream os;
  os << title << "\n";
  for (const auto& c : infos) {
    os << "  " << c.name << "  -  " << c.meaning << "\n";
    for (const auto& o : c.options) {
      std::string head = "      " + o.key + "=" + o.default_value;
      if (head.size() < 30) head.resize(30, ' ');
      os << head << " [" << o.type_name() << "] " << o.meaning << "\n";
    }
    for (const auto& line : c.notes) os << "      " << line << "\n";
  }
  return os.str();
}

}  // namespace seqmix
