#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>

// The store backends' JSON columns (SQLite TEXT, PostgreSQL jsonb).
namespace brine::store {

// JSON text for a column. Minion output arrives as MessagePack strings that
// nothing forces to be UTF-8 (a command may print any bytes); replacing a bad
// byte with U+FFFD beats refusing a whole batch of returns over it.
inline std::string to_json_text(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The same in the value's own key order (a return as the minion made it).
template <class Json, std::enable_if_t<std::is_same_v<Json, nlohmann::ordered_json>, int> = 0>
std::string to_json_text(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace brine::store
