// How a trial's knobs are named and written as text: the knobs that identify a trial, and the one
// formatting of a knob's number that labels, tables, dry runs and config errors share.
#pragma once

#include <array>
#include <nlohmann/json.hpp>
#include <string>

namespace spheret {

// The knobs that identify a trial within a sweep, in the order labels and tables show them:
// "#12 p_spheret 0.5 xs 1337" (watch), the dry run's first columns, a metric's labels.
inline constexpr std::array<const char*, 4> kIdentityKnobs = {"method", "p", "scale", "seed"};

// `value` as std::ostream writes it with `precision` significant digits (%g): the shortest
// natural form with the default 6 ("0.5", "1", "2", "0.001", "1e+07").
std::string NumberText(double value, int precision = 6);

// A knob's value as a person reads it: a string as it is (no quotes), a floating-point number by
// NumberText, anything else as its JSON ("1337", "true", "[1,2]").
std::string KnobValueText(const nlohmann::json& value);

}  // namespace spheret
