// The CPU backend of vllm::Communicator: Gloo (Debian's libgloo-dev) over TCP, its
// ranks meeting through a FileStore directory (one host, or a filesystem every host
// mounts) or, across hosts, the TCP store served by global rank 0 (tcp_store.h). Built only where Gloo was found (VLLM_WITH_GLOO); elsewhere
// CreateGlooCommunicator throws naming the missing library.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "vllm/distributed/communicator.h"

namespace vllm {

struct GlooOptions {
  int rank = 0;
  int world_size = 1;
  // A directory every rank can read and write, empty before the group meets (the
  // ranks write their addresses there)...
  std::string rendezvous_dir;
  // ...or, when master_addr is given, the TCP store at master_addr:master_port
  // (started by rank 0's process before the group meets).
  std::string master_addr;
  int master_port = 0;
  // The address this rank listens on: "127.0.0.1" for ranks on one host, the
  // interface toward master_addr (LocalAddressToward) across hosts.
  std::string hostname = "127.0.0.1";
  // How long a collective (and the rendezvous) waits for a peer before it throws.
  std::chrono::milliseconds timeout{60000};
};

bool GlooAvailable();  // whether this build has the Gloo backend
// Blocks until every rank of the group has joined (or throws vt::Error on timeout).
std::unique_ptr<Communicator> CreateGlooCommunicator(const GlooOptions& options);

}  // namespace vllm
