#include "vllm/distributed/gloo_communicator.h"

#include <string>

#include "vllm/distributed/tcp_store.h"
#include "vt/error.h"

#ifdef VLLM_WITH_GLOO
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/logging.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#endif

namespace vllm {

#ifdef VLLM_WITH_GLOO
namespace {

// Gloo's rendezvous over the TCP store: its gets wait for the key up to the timeout.
class TcpRendezvousStore final : public gloo::rendezvous::Store {
 public:
  TcpRendezvousStore(const std::string& host, int port, std::chrono::milliseconds timeout)
      : client_(host, port, timeout), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override { client_.Set(key, data); }
  std::vector<char> get(const std::string& key) override { return client_.Get(key, timeout_); }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    for (const std::string& key : keys) client_.Get(key, timeout);
  }

 private:
  TcpStoreClient client_;
  std::chrono::milliseconds timeout_;
};

class GlooCommunicator final : public Communicator {
 public:
  explicit GlooCommunicator(const GlooOptions& options) : rank_(options.rank), world_size_(options.world_size) {
    const bool tcp = !options.master_addr.empty();
    const std::string where = tcp ? options.master_addr + ":" + std::to_string(options.master_port)
                                  : options.rendezvous_dir;
    Run("rendezvous at " + where, [&] {
      gloo::transport::tcp::attr attr;
      attr.hostname = options.hostname;
      std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
      std::unique_ptr<gloo::rendezvous::Store> store;
      if (tcp) {
        store = std::make_unique<TcpRendezvousStore>(options.master_addr, options.master_port, options.timeout);
      } else {
        store = std::make_unique<gloo::rendezvous::FileStore>(options.rendezvous_dir);
      }
      auto context = std::make_shared<gloo::rendezvous::Context>(rank_, world_size_);
      context->setTimeout(options.timeout);
      context->connectFullMesh(*store, device);
      context_ = std::move(context);
    });
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }

  // Zero-sized collectives return at once on every rank (Gloo's ring divides by the size).
  void AllReduceSum(float* data, size_t count) override {
    if (count == 0) return;
    Run("all-reduce of " + std::to_string(count) + " f32", [&] {
      gloo::AllreduceOptions opts(context_);
      opts.setOutput(data, count);
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::BCUBE);
      opts.setTag(NextTag());
      gloo::allreduce(opts);
    });
  }

  void AllGather(const float* in, size_t count, float* out) override {
    if (count == 0) return;
    Run("all-gather of " + std::to_string(count) + " f32", [&] {
      gloo::AllgatherOptions opts(context_);
      opts.setInput(const_cast<float*>(in), count);  // read only: Gloo's setter takes T*
      opts.setOutput(out, count * static_cast<size_t>(world_size_));
      opts.setTag(NextTag());
      gloo::allgather(opts);
    });
  }

  void Broadcast(void* bytes, size_t size, int root) override {
    if (size == 0) return;
    Run("broadcast of " + std::to_string(size) + " bytes from rank " + std::to_string(root), [&] {
      gloo::BroadcastOptions opts(context_);
      opts.setOutput(static_cast<uint8_t*>(bytes), size);
      opts.setRoot(root);
      opts.setTag(NextTag());
      gloo::broadcast(opts);
    });
  }

  void SetTimeout(std::chrono::milliseconds timeout) override { context_->setTimeout(timeout); }

  void Barrier() override {
    Run("barrier", [&] {
      gloo::BarrierOptions opts(context_);
      opts.setTag(NextTag());
      gloo::barrier(opts);
    });
  }

 private:
  // Gloo reports a dead or silent peer as gloo::IoException (a gloo::Exception) and a
  // misuse as gloo::EnforceNotMet: both become vt::Error naming what ran where.
  template <typename F>
  void Run(const std::string& what, F&& body) {
    try {
      body();
    } catch (const gloo::Exception& e) {
      throw vt::Error(Where(what) + e.what());
    } catch (const gloo::EnforceNotMet& e) {
      throw vt::Error(Where(what) + e.what());
    }
  }
  std::string Where(const std::string& what) const {
    return "gloo " + what + " (rank " + std::to_string(rank_) + " of " + std::to_string(world_size_) + "): ";
  }
  // Successive collectives get distinct tags, so a late message of one is never
  // taken for the next one's.
  uint32_t NextTag() { return next_tag_++; }

  int rank_, world_size_;
  uint32_t next_tag_ = 0;
  std::shared_ptr<gloo::Context> context_;
};

}  // namespace

bool GlooAvailable() { return true; }

std::unique_ptr<Communicator> CreateGlooCommunicator(const GlooOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    throw vt::Error("gloo communicator: rank " + std::to_string(options.rank) + " is not in [0, world size " +
                    std::to_string(options.world_size) + ")");
  }
  if (options.rendezvous_dir.empty() == options.master_addr.empty()) {
    throw vt::Error("gloo communicator: give a rendezvous directory or a master address, one of the two");
  }
  return std::make_unique<GlooCommunicator>(options);
}

#else

bool GlooAvailable() { return false; }

std::unique_ptr<Communicator> CreateGlooCommunicator(const GlooOptions&) {
  throw vt::Error("this vllm-cpp was built without Gloo (Debian's libgloo-dev), which CPU tensor parallelism needs");
}

#endif

}  // namespace vllm
