#include "state/gpg.h"

#include <chrono>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "base/error.h"
#include "base/python.h"
#include "base/run_here.h"
#include "modules/process.h"

namespace brine::state {

namespace gpg_run {
namespace {

modules::process_result run_gpg(const std::string& keydir, const std::string& block) {
  modules::process_options o;
  o.argv = {"gpg", "--homedir", keydir, "--status-fd", "2", "--no-tty", "-d"};
  o.env = {{"LC_ALL", "C"}};
  o.stdin_text = block;
  o.timeout = std::chrono::seconds(60);
  return base::run_here<modules::process_result>(
      [&o] { return modules::run_process(std::move(o)); });
}

// Clear texts by block, as Salt's gpg_cache keeps them: a template
// rendered for each of many minions meets the same blocks every time, and
// one gpg run each serves them all. Only decryptions that worked are kept
// (a key added later is used at once); bounded, emptied when full.
class decrypted_cache {
 public:
  static constexpr std::size_t k_limit = 4096;
  std::optional<std::string> find(const std::string& block) {
    std::lock_guard lock(mu_);
    auto it = clear_.find(block);
    if (it == clear_.end()) return std::nullopt;
    return it->second;
  }
  void keep(const std::string& block, const std::string& clear) {
    std::lock_guard lock(mu_);
    if (clear_.size() >= k_limit) clear_.clear();
    clear_.emplace(block, clear);
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::string> clear_;
};

}  // namespace
}  // namespace gpg_run

render::pgp_decryptor gpg_decryptor(std::string keydir, bool must_succeed) {
  auto cache = std::make_shared<gpg_run::decrypted_cache>();
  return [keydir = std::move(keydir), must_succeed,
          cache](const std::string& block) -> std::string {
    if (auto kept = cache->find(block)) return *kept;
    modules::process_result r;
    try {
      r = gpg_run::run_gpg(keydir, block);
    } catch (const base::error& e) {
      // Salt's "GPG unavailable", with what stopped it (exec 'gpg': not found in PATH).
      throw base::error(std::string("GPG unavailable: ") + e.what() +
                        " (the gpg renderer runs the gpg binary: apt-get install gnupg)");
    }
    if (!r.stdout_text.empty() && !r.timed_out) {
      cache->keep(block, r.stdout_text);
      return r.stdout_text;
    }
    // Salt formats both as bytes: b'...'.
    std::string message = "Could not decrypt cipher b" + base::python_repr(block) +
                          ", received: b" + base::python_repr(r.stderr_text);
    if (r.timed_out) message += " (gpg did not finish within 60 s)";
    spdlog::warn("{}", message);
    if (must_succeed) {
      throw base::error(message + " (the secret keys are looked for in " + keydir +
                        ": gpg_keydir; gpg_decrypt_must_succeed is on)");
    }
    return block;
  };
}

std::string gpg_keydir_of(const nlohmann::json& opts) {
  // A non-empty string option, else "" (nlohmann's empty() is false for any string).
  auto text = [&opts](const char* key) -> std::string {
    auto it = opts.find(key);
    return it != opts.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (std::string keydir = text("gpg_keydir"); !keydir.empty()) return keydir;
  std::string dir = text("config_dir");
  if (dir.empty() && !text("conf_file").empty()) {
    dir = std::filesystem::absolute(text("conf_file")).parent_path().string();
  }
  if (dir.empty()) dir = "/etc/brine";
  return (std::filesystem::path(dir) / "gpgkeys").string();
}

render::pgp_decryptor gpg_decryptor_of(const nlohmann::json& opts) {
  bool must = false;
  if (auto m = opts.find("gpg_decrypt_must_succeed"); m != opts.end() && m->is_boolean()) {
    must = m->get<bool>();
  }
  return gpg_decryptor(gpg_keydir_of(opts), must);
}

}  // namespace brine::state
