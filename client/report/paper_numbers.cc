// The embedded copy of reference/paper_tables.csv (generated paper_tables_data.cc).
#include "client/report/results.h"

namespace spheret::client {

const char* PaperTablesCsv();

const PaperNumbers& PaperNumbers::Embedded() {
  static const PaperNumbers numbers = Parse(PaperTablesCsv());
  return numbers;
}

}  // namespace spheret::client
