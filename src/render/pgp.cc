#include "render/pgp.h"

#include <string_view>

#include <nlohmann/json.hpp>

#include "base/python.h"

namespace brine::render {

namespace pgp_blocks {
namespace {

constexpr std::string_view k_begin = "-----BEGIN PGP MESSAGE-----";
constexpr std::string_view k_end = "-----END PGP MESSAGE-----";


template <class Json>
void walk(Json& data, const pgp_decryptor& decrypt) {
  if (data.is_string()) {
    const auto& text = data.template get_ref<const std::string&>();
    if (text.find(k_begin) != std::string::npos) data = decrypt_pgp_text(text, decrypt);
  } else if (data.is_object() || data.is_array()) {
    for (auto& item : data) walk(item, decrypt);
  }
}

}  // namespace
}  // namespace pgp_blocks

std::string decrypt_pgp_text(const std::string& text, const pgp_decryptor& decrypt) {
  using namespace pgp_blocks;
  std::string out;
  std::size_t at = 0;
  bool found = false;
  for (;;) {
    std::size_t begin = text.find(k_begin, at);
    if (begin == std::string::npos) break;
    // The pattern is non-greedy (.*?): the first END after this BEGIN.
    std::size_t end = text.find(k_end, begin + k_begin.size());
    if (end == std::string::npos) break;
    end += k_end.size();
    out.append(text, at, begin - at);
    out += decrypt(base::expand_backslash_n(std::string_view(text).substr(begin, end - begin)));
    at = end;
    found = true;
  }
  if (!found) return text;
  out.append(text, at, std::string::npos);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

void decrypt_pgp(nlohmann::json& data, const pgp_decryptor& decrypt) {
  pgp_blocks::walk(data, decrypt);
}
void decrypt_pgp(nlohmann::ordered_json& data, const pgp_decryptor& decrypt) {
  pgp_blocks::walk(data, decrypt);
}

}  // namespace brine::render
