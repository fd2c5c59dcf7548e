#pragma once
// A numeric table read from a CSV file: a header row of column names, then one row per line, every
// cell a finite number except in the columns named as text (e.g. ETT's "date"), which are dropped.
// Plain CSV only: no quoting, a cell never holds the delimiter. Any malformed input (missing or empty
// file, a ragged row, a cell that is not a finite number) throws Error with one line naming the file,
// the line and the column.
#include <cstdint>
#include <string>
#include <vector>

namespace seqmix {

struct CsvTable {
  std::vector<std::string> columns;  // names of the numeric columns, in file order
  std::vector<double> values;        // row-major [rows, columns]

  int64_t rows() const { return columns.empty() ? 0 : static_cast<int64_t>(values.size() / columns.size()); }
  int64_t cols() const { return static_cast<int64_t>(columns.size()); }
  double at(int64_t row, int64_t col) const { return values[static_cast<size_t>(row * cols() + col)]; }
};

struct CsvReadOptions {
  std::vector<std::string> text_columns;  // dropped wherever they appear; absent names are fine
  char delimiter = ',';
};

CsvTable read_csv_table(const std::string& path, const CsvReadOptions& options = {});
// The same from text in memory; `source` names it in errors as the path would.
CsvTable parse_csv_table(const std::string& text, const std::string& source, const CsvReadOptions& options = {});

}  // namespace seqmix
