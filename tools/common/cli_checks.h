#pragma once
// Validators for the tools' numeric options. CLI11's PositiveNumber and NonNegativeNumber refuse
// a bad value with "Value 0 not in range 0.000000 to 1797...368.000000" (the largest double,
// 300 digits); these say what the option wants and what it got.
#include <CLI/CLI.hpp>

#include <charconv>
#include <cstdint>
#include <cmath>
#include <string>

namespace qflow::tools {

namespace detail {

// A validator that parses the value as a number and refuses it unless `ok(value)`.
template <typename Ok>
CLI::Validator number_check(Ok ok, std::string wanted, std::string name) {  // name: shown in --help, e.g. INT:POSITIVE
  return CLI::Validator(
      [ok, wanted](std::string& text) -> std::string {
        double value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error != std::errc() || end != text.data() + text.size() || !ok(value))
          return "must be " + wanted + ", got '" + text + "'";
        return {};
      },
      name, name);
}

}  // namespace detail

/// Refuses values <= 0 (and non-numbers): "--epochs: must be a positive number, got '0'".
inline const CLI::Validator kPositive = detail::number_check([](double v) { return v > 0; }, "a positive number", "POSITIVE");

/// Refuses values < 0 (and non-numbers).
inline const CLI::Validator kNonNegative =
    detail::number_check([](double v) { return v >= 0; }, "zero or a positive number", "NONNEGATIVE");

/// Refuses anything but an integer from Lo to Hi: "--bits: must be an integer from 2 to 16, got '99'".
template <int64_t Lo, int64_t Hi>
inline const CLI::Validator kIntegerIn = detail::number_check(
    [](double v) { return v >= Lo && v <= Hi && v == std::floor(v); },
    "an integer from " + std::to_string(Lo) + " to " + std::to_string(Hi), std::to_string(Lo) + "-" + std::to_string(Hi));

}  // namespace qflow::tools
