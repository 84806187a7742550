#include "vllm/core/scheduler_output.h"

namespace vllm {

std::vector<std::string_view> SchedulerOutput::req_ids_in_batch_order() const {
  std::vector<std::string_view> ids;
  ids.reserve(scheduled_cached_reqs.size() + scheduled_new_reqs.size());
  for (const CachedRequestData& c : scheduled_cached_reqs) ids.push_back(c.req_id);
  for (const NewRequestData& n : scheduled_new_reqs) ids.push_back(n.req_id);
  return ids;
}

}  // namespace vllm
