#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "render/pgp.h"

// The host's half of Salt's gpg renderer: running gpg for the blocks that
// render::decrypt_pgp finds, in pillar files (master, or masterless) and
// state files.
namespace brine::state {

// Salt's _decrypt_ciphertext: `gpg --homedir KEYDIR --status-fd 2 --no-tty
// -d` with the block on stdin. What it prints is the clear text; when it
// prints nothing, the failure is logged (the block and gpg's own words,
// never clear text) and the block comes back, or with `must_succeed`
// (gpg_decrypt_must_succeed) it is a base::error naming the key directory.
// No gpg on PATH is a base::error ("GPG unavailable"), as in Salt. Blocks
// it decrypted are kept (Salt's gpg_cache): a template rendered for every
// minion runs gpg once per block, not once per minion. Thread-safe.
render::pgp_decryptor gpg_decryptor(std::string keydir, bool must_succeed);

// The same from a host's opts: gpg_keydir, else Salt's default
// CONFIG_DIR/gpgkeys (config_dir, else the directory of conf_file), and
// gpg_decrypt_must_succeed (false by default).
render::pgp_decryptor gpg_decryptor_of(const nlohmann::json& opts);

// The key directory gpg_decryptor_of would use (for messages and docs).
std::string gpg_keydir_of(const nlohmann::json& opts);

}  // namespace brine::state
