#pragma once

#include <functional>
#include <string>

#include <nlohmann/json_fwd.hpp>

// Salt's gpg renderer (salt/renderers/gpg.py) over what the renderers
// before it made: every PGP MESSAGE block in a string is replaced by its
// clear text. Running gpg is the host's part (state/gpg.h): this room knows
// only where the blocks are.
namespace brine::render {

// The clear text of one armored block ("-----BEGIN PGP MESSAGE-----" to
// "-----END PGP MESSAGE-----", with a literal `\n` already turned into a
// newline, as Salt does). A block that cannot be decrypted gives the block
// back (Salt's default) or throws base::error (gpg_decrypt_must_succeed).
using pgp_decryptor = std::function<std::string(const std::string& block)>;

// Salt's _decrypt_ciphertexts: `text` with each block replaced by what
// `decrypt` gives, then (when there was a block) trailing newlines removed;
// text without a block comes back unchanged.
std::string decrypt_pgp_text(const std::string& text, const pgp_decryptor& decrypt);

// Salt's _decrypt_object: every string value in `data` (mappings' values
// and list items, at any depth; not keys) through decrypt_pgp_text.
void decrypt_pgp(nlohmann::json& data, const pgp_decryptor& decrypt);
void decrypt_pgp(nlohmann::ordered_json& data, const pgp_decryptor& decrypt);

}  // namespace brine::render
