#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/config.h"
#include "pki/keys.h"
#include "store/store.h"

namespace brine::cluster {

// The cluster keypair's files in cluster_pki_dir: cluster.pem (private,
// 0600) and cluster.pub.
inline constexpr const char* k_key_name = "cluster";

struct init_result {
  std::string dir;
  std::string fingerprint;
  bool made = false;  // false: the directory had a cluster key already
};

// `brine cluster init`: makes the cluster keypair in cfg.cluster_pki_dir
// (mode 0700, the key 0600) unless one is there, which is kept: a second
// init on another master must not split the cluster. Throws base::error.
init_result init(const base::master_config& cfg);

// The cluster keypair a master of cluster cfg.cluster_id presents to
// minions. Throws base::error naming the directory and the fix when it is
// missing or readable by others.
pki::keypair load_key(const base::master_config& cfg);

// What a member's proof signs: its cluster, name, peer address and keys.
std::string proof_text(const store::member_record& m);
// The proof (hex) of `m` with the cluster key.
std::string prove(const pki::keypair& cluster_key, const store::member_record& m);
// Whether `m` carries a proof made with `cluster_key`, for what it says.
bool verify(const pki::keypair& cluster_key, const store::member_record& m);

// The hello a member sends on a peer link (proto peer_hello), from its row.
nlohmann::json hello_body(const store::member_record& me);
// Why the hello `body` (from the network), on a TLS link whose peer key is
// `tls_key`, does not come from a member of `cluster_id` holding
// `cluster_key`; "" when it does.
std::string check_hello(const nlohmann::json& body, EVP_PKEY* tls_key,
                        const pki::keypair& cluster_key, const std::string& cluster_id);

}  // namespace brine::cluster
