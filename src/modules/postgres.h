#pragma once

#include <nlohmann/json.hpp>
#include <string>

// What the postgres states share with the postgres execution module
// (postgres_mod.cc), as Salt's states import them from salt.modules.postgres.
namespace brine::modules::postgres {

// Salt's _DEFAULT_PASSWORDS_ENCRYPTION (3006: md5).
inline constexpr const char* k_default_encryption = "md5";

// Salt's _maybe_encrypt_password: `password` as the verifier PostgreSQL
// stores for `role` under `encrypted` (true or "md5": md5 of password+role;
// "scram-sha-256": a SCRAM verifier with a fresh salt; false: as given). A
// password that already is a verifier of that kind is kept. Any other
// `encrypted` throws base::error naming it.
std::string maybe_encrypt_password(const std::string& role, const std::string& password,
                                   const nlohmann::json& encrypted);

// Salt's _verify_password: whether `password` (plain, or a verifier) is what
// `verifier` (pg_authid.rolpassword) holds under `method`; for SCRAM the
// verifier's own salt and iterations are used.
bool verify_password(const std::string& role, const std::string& password,
                     const std::string& verifier, const nlohmann::json& method);

}  // namespace brine::modules::postgres
