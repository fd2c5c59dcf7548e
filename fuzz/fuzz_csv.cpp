// Fuzzes the CSV time-series reader: any text either parses or gives a one-line Error; what parses is a
// rectangular table of finite numbers with unique, non-empty column names and no text column.
#include <cmath>
#include <set>

#include "fuzz_support.h"
#include "seqmix/io/csv_table.h"

using namespace seqmix;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CsvReadOptions options;
  options.text_columns = {"date"};  // as the ETT task reads its files
  CsvTable table;
  try {
    table = parse_csv_table(fuzz::as_string(data, size), "fuzz.csv", options);
  } catch (const Error& e) {
    fuzz::require_one_line(e);
    return 0;
  }
  fuzz::require(!table.columns.empty() && table.values.size() % table.columns.size() == 0, "a ragged table parsed");
  for (double v : table.values) fuzz::require(std::isfinite(v), "a non-finite cell parsed");
  for (const auto& c : table.columns) fuzz::require(c != "date", "a text column was kept");
  return 0;
}
