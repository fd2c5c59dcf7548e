#include "seqmix/ops/op_table.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "seqmix/io/error.h"
#include "torch_op.h"

namespace seqmix::ops {
namespace {

// The families' declaration functions, in registration (start-up) order.
std::vector<OpFamily (*)()>& declarations() {
  static std::vector<OpFamily (*)()> list;
  return list;
}

// The operators define_op listed, by family, in definition order.
std::map<std::string, std::vector<TorchOpDeclaration>>& listed_operators() {
  static std::map<std::string, std::vector<TorchOpDeclaration>> by_family;
  return by_family;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

OpFamilyRegistration::OpFamilyRegistration(OpFamily (*declare)()) { declarations().push_back(declare); }

void list_operator(const std::string& family, TorchOpDeclaration op) {
  listed_operators()[family].push_back(std::move(op));
}

const std::vector<OpFamily>& op_families() {
  static const std::vector<OpFamily> families = [] {
    std::vector<OpFamily> out;
    std::map<std::string, std::vector<TorchOpDeclaration>> unclaimed = listed_operators();
    for (auto declare : declarations()) {
      OpFamily family = declare();
      if (!family.torch_ops.empty())
        throw std::logic_error("seqmix: op family " + family.name + " lists its operators; define_op lists them");
      const auto listed = unclaimed.find(family.name);
      if (listed != unclaimed.end()) {
        family.torch_ops = listed->second;
        unclaimed.erase(listed);
      }
      out.push_back(std::move(family));
    }
    if (!unclaimed.empty())
      throw std::logic_error("seqmix: operators defined in src/ops/" + unclaimed.begin()->first +
                             "/ but no op family of that name is declared (SEQMIX_OP_FAMILY)");
    std::sort(out.begin(), out.end(), [](const OpFamily& a, const OpFamily& b) { return a.name < b.name; });
    return out;
  }();
  return families;
}

std::vector<const BenchCaseDeclaration*> bench_cases() {
  std::vector<const BenchCaseDeclaration*> out;
  for (const auto& family : op_families())
    for (const auto& c : family.bench_cases) out.push_back(&c);
  std::stable_sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->order < b->order; });
  return out;
}

const BenchCaseDeclaration& bench_case(const std::string& name) {
  std::vector<std::string> names;
  for (const auto* c : bench_cases()) {
    if (c->name == name) return *c;
    names.push_back(c->name);
  }
  throw Error("unknown op '" + name + "'; valid ops: " + join(names));
}

std::string op_table_json() {
  const std::vector<c10::Device> devices{c10::Device(c10::kCPU), c10::Device(c10::kCUDA)};
  const auto device_name = [](const c10::Device& d) { return c10::DeviceTypeName(d.type(), /*lower_case=*/true); };
  nlohmann::ordered_json families = nlohmann::ordered_json::array();
  for (const auto& family : op_families()) {
    nlohmann::ordered_json ops = nlohmann::ordered_json::array(), cases = nlohmann::ordered_json::array();
    for (const auto& op : family.torch_ops) {
      const auto names = [](const ImplSet& set) {
        nlohmann::ordered_json out = nlohmann::ordered_json::array();
        for (Impl i : set.list()) out.push_back(impl_name(i));
        return out;
      };
      // What the dispatcher has on each device, and what auto picks there (none for an op without impls).
      nlohmann::ordered_json on_device = nlohmann::ordered_json::object(), auto_on = nlohmann::ordered_json::object();
      for (const c10::Device& device : devices) {
        on_device[device_name(device)] = names(registered_on(op.impls, device));
        if (!op.impls.list().empty())
          auto_on[device_name(device)] = impl_name(check_impl(Impl::automatic, op.impls, op.name, device));
      }
      nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
      for (const char* kernel : op.impls.fused_kernels()) {
        nlohmann::ordered_json on = nlohmann::ordered_json::array();
        for (const c10::Device& device : devices)
          if (kernel_registered_on(kernel, device)) on.push_back(device_name(device));
        kernels.push_back({{"name", kernel}, {"devices", on}, {"passed_on_gpu", gpu_kernel_passed(kernel)}});
      }
      const auto doc = operator_docs().find(op.name);
      ops.push_back({{"name", op.name},
                     {"impls", names(op.impls)},
                     {"impls_on", on_device},
                     {"auto_on", auto_on},
                     {"fused_kernels", kernels},
                     {"doc", doc == operator_docs().end() ? "" : doc->second}});
    }
    for (const auto& c : family.bench_cases) cases.push_back(c.name);
    families.push_back({{"name", family.name}, {"torch_ops", ops}, {"bench_cases", cases}});
  }
  return nlohmann::ordered_json{{"families", families}}.dump();
}

}  // namespace seqmix::ops
