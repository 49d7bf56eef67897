#include "config/knob_text.h"

#include <sstream>

namespace spheret {

std::string NumberText(double value, int precision) {
  std::ostringstream out;
  out.precision(precision);
  out << value;
  return out.str();
}

std::string KnobValueText(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_float()) return NumberText(value.get<double>());
  return value.dump();
}

}  // namespace spheret
