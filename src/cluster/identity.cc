#include "cluster/identity.h"

#include <sys/stat.h>

#include <optional>

#include "base/error.h"
#include "base/fs.h"

namespace brine::cluster {

namespace {

std::string hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::optional<std::string> unhex(std::string_view text) {
  if (text.size() % 2 != 0) return std::nullopt;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  out.reserve(text.size() / 2);
  for (size_t i = 0; i < text.size(); i += 2) {
    int hi = digit(text[i]), lo = digit(text[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

std::string key_file(const base::master_config& cfg) {
  return cfg.cluster_pki_dir + "/" + k_key_name + ".pem";
}

}  // namespace

init_result init(const base::master_config& cfg) {
  init_result r;
  r.dir = cfg.cluster_pki_dir;
  bool existed = base::file_exists(key_file(cfg));
  base::ensure_dir(cfg.cluster_pki_dir, 0700, "cluster_pki_dir");
  auto key = pki::keypair::load_or_create(cfg.cluster_pki_dir, k_key_name);
  r.fingerprint = key.fingerprint();
  r.made = !existed;
  return r;
}

pki::keypair load_key(const base::master_config& cfg) {
  if (!base::file_exists(key_file(cfg))) {
    throw base::error("cluster " + cfg.cluster_id + ": " + key_file(cfg) +
                      " does not exist (cluster_pki_dir from " + cfg.source +
                      "); run `brine cluster init -c " + cfg.source +
                      "` on one master, then copy " + cfg.cluster_pki_dir +
                      " (mode 0700, cluster.pem 0600) to every master of the cluster");
  }
  try {
    return pki::keypair::load(cfg.cluster_pki_dir, k_key_name);
  } catch (const base::error& e) {
    throw base::error("cluster " + cfg.cluster_id + ": " + e.what());
  }
}

std::string proof_text(const store::member_record& m) {
  return "brine cluster member\n" + m.cluster_id + "\n" + m.name + "\n" + m.peer + "\n" +
         m.finger + "\n" + m.cluster_finger;
}

std::string prove(const pki::keypair& cluster_key, const store::member_record& m) {
  return hex(cluster_key.sign(proof_text(m)));
}

bool verify(const pki::keypair& cluster_key, const store::member_record& m) {
  if (m.cluster_finger != cluster_key.fingerprint()) return false;
  auto sig = unhex(m.proof);
  return sig && pki::verify(cluster_key.get(), proof_text(m), *sig);
}

nlohmann::json hello_body(const store::member_record& me) {
  return {{"cluster_id", me.cluster_id},         {"name", me.name},   {"peer", me.peer},
          {"finger", me.finger},                 {"proof", me.proof},
          {"cluster_finger", me.cluster_finger}};
}

std::string check_hello(const nlohmann::json& body, EVP_PKEY* tls_key, const pki::keypair& cluster_key,
                        const std::string& cluster_id) {
  store::member_record r;
  for (auto [field, value] :
       {std::pair{"cluster_id", &r.cluster_id}, std::pair{"name", &r.name},
        std::pair{"peer", &r.peer}, std::pair{"finger", &r.finger},
        std::pair{"cluster_finger", &r.cluster_finger}, std::pair{"proof", &r.proof}}) {
    auto it = body.find(field);
    if (it == body.end() || !it->is_string()) {
      return std::string("its hello has no ") + field;
    }
    *value = it->get<std::string>();
  }
  if (r.cluster_id != cluster_id) {
    return "it is a member of cluster '" + r.cluster_id + "', not '" + cluster_id + "'";
  }
  if (!pki::is_ed25519(tls_key) || pki::fingerprint(tls_key) != r.finger) {
    return "its TLS key is not the key its hello names";
  }
  if (r.cluster_finger != cluster_key.fingerprint()) {
    return "it holds cluster key " + r.cluster_finger + ", not this cluster's " +
           cluster_key.fingerprint();
  }
  if (!verify(cluster_key, r)) return "its proof was not made with this cluster's key";
  return "";
}

}  // namespace brine::cluster
