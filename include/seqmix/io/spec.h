#pragma once
// Spec strings name a registered component and its options: "softmax:heads=4,rope=1".
// OptionInfo declares what a component accepts; Options validates a Spec against it.
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace seqmix {

enum class OptionType { Integer, Real, Flag, Text, Choice, List };

struct OptionInfo {
  std::string key;
  OptionType type = OptionType::Text;
  std::string default_value;
  std::string meaning;
  std::vector<std::string> choices;  // allowed values of a Choice option
  double min = -std::numeric_limits<double>::infinity();  // inclusive bounds of numeric options
  double max = std::numeric_limits<double>::infinity();

  static OptionInfo integer(std::string key, int64_t value, std::string meaning,
                            double min = -std::numeric_limits<double>::infinity(),
                            double max = std::numeric_limits<double>::infinity());
  static OptionInfo real(std::string key, double value, std::string meaning,
                         double min = -std::numeric_limits<double>::infinity(),
                         double max = std::numeric_limits<double>::infinity());
  static OptionInfo flag(std::string key, bool value, std::string meaning);
  static OptionInfo text(std::string key, std::string value, std::string meaning);
  static OptionInfo choice(std::string key, std::string value, std::vector<std::string> choices,
                           std::string meaning);
  // A list of texts (e.g. one mixer spec per layer), stored joined by ';'.
  static OptionInfo list(std::string key, std::vector<std::string> value, std::string meaning);
  std::string type_name() const;
};

// "name:key=value,key=value" split into its parts; keys in the order written.
struct Spec {
  std::string name;
  std::vector<std::pair<std::string, std::string>> options;

  static Spec parse(const std::string& text);  // throws Error on malformed text
  std::string str() const;
};

// A spec's options checked against the declared ones: unknown keys, ill-typed or out-of-range values
// are errors that name the owner and list what is valid. Missing keys take their defaults.
class Options {
 public:
  Options() = default;
  Options(std::string owner, const std::vector<OptionInfo>& declared, const Spec& spec);

  int64_t integer(const std::string& key) const;
  double real(const std::string& key) const;
  bool flag(const std::string& key) const;
  const std::string& text(const std::string& key) const;
  bool was_given(const std::string& key) const;
  // "name:key=value,..." with every option, defaults included, in declaration order.
  std::string resolved() const;
  const std::string& owner() const { return owner_; }

 private:
  const std::string& raw(const std::string& key, OptionType expected) const;
  std::string owner_;
  std::string name_;
  std::vector<OptionInfo> declared_;
  std::vector<std::string> values_;  // parallel to declared_
  std::vector<bool> given_;
};

// A registered component (mixer, task, ...): its name, one-line meaning and options.
struct ComponentInfo {
  std::string name;
  std::string meaning;
  std::vector<OptionInfo> options;
  std::vector<std::string> notes;  // extra lines for `seqmix list` (e.g. the labels a text option takes)
};

// Finds `name` in `infos` or throws "unknown <kind> 'name'; valid <kind>s: ...".
const ComponentInfo& find_component(const std::vector<ComponentInfo>& infos, const std::string& kind,
                                    const std::string& name);
// Parses spec and validates its options against the component it names.
Options component_options(const std::vector<ComponentInfo>& infos, const std::string& kind,
                          const std::string& spec);
// Human-readable listing of components: name, meaning, and each option with default and meaning.
std::string describe_components(const std::string& title, const std::vector<ComponentInfo>& infos);

// Throws Error ("<what> expects ...") unless value is valid for the declared option.
void check_option_value(const OptionInfo& info, const std::string& value, const std::string& what);
// Lists are stored as their items joined by ';'.
std::vector<std::string> split_list(const std::string& joined);
std::string join_list(const std::vector<std::string>& items);
// items joined by sep, e.g. "a, b, c".
std::string join(const std::vector<std::string>& items, const std::string& sep = ", ");

// Parsing of single values, shared with configs and overrides.
int64_t parse_integer(const std::string& text, const std::string& what);
double parse_real(const std::string& text, const std::string& what);
bool parse_flag(const std::string& text, const std::string& what);
// Comma-separated list of integers, e.g. a shape "4,1024,8,64".
std::vector<int64_t> parse_integer_list(const std::string& text, const std::string& what);

}  // namespace seqmix
