#pragma once
// Renewer: renewal of the held locks that asked for it. When a renewed hold's deadline comes
// it is renewed (an extend round by its ttl, at most RenewalSlots::kMaxInFlight at once, the
// rest waiting oldest first), a failed round is retried spread out, and the loss is reported
// when the validity ends first. The engine keeps the holds and runs the rounds (Holds); this
// decides when. Loop thread only.

#include <cstdint>
#include <functional>
#include <random>
#include <string>

#include "locking/engine_options.h"
#include "locking/engine_stats.h"
#include "locking/holder.h"
#include "locking/renewal.h"

namespace lw {

class Renewer {
 public:
  // What the renewer asks of whoever keeps the holds (LockEngine).
  class Holds {
   public:
    virtual Holder* FindHolder(const std::string& name, const std::string& token) = 0;
    virtual const Holder* HolderWithSerial(const std::string& name, uint64_t serial) = 0;
    // The hold's next deadline, delay_ms from now; Renewer::Due is called at it.
    virtual void ScheduleHolder(const std::string& name, Holder& h, int64_t delay_ms) = 0;
    // An extend round of the hold by ttl_ms (it reschedules the hold when won), waiting
    // timeout_ms for the masters (0: the node timeout).
    virtual void RunExtend(const std::string& name, const std::string& token, int64_t ttl_ms,
                           ExtendDone done, int64_t timeout_ms) = 0;
    virtual void Lose(const std::string& name, const std::string& token, LossReason reason) = 0;
    // Runs fn later on the loop, never from inside the current call.
    virtual void Defer(std::function<void()> fn) = 0;

   protected:
    virtual ~Holds() = default;
  };

  Renewer(Holds& holds, EngineStats& stats, const EngineOptions& options)
      : holds_(holds), stats_(stats), options_(options), rng_(std::random_device{}()) {}

  // The deadline of hold `token` of `name` came: renew it now or when a slot frees, wait for
  // the end of its validity (not renewed, or a renewal in flight), or report its loss.
  void Due(const std::string& name, const std::string& token);
  // Forgets every renewal waiting for a slot (the engine is stopping).
  void Clear() { slots_.Clear(); }

 private:
  void Drain();
  void Renew(const std::string& name, Holder& h, Holder::Clock::time_point now);
  void Renewed(const std::string& name, const std::string& token,
               const std::variant<Extension, Failure>& result);

  Holds& holds_;
  EngineStats& stats_;
  const EngineOptions& options_;
  RenewalSlots slots_;
  std::mt19937_64 rng_;
};

}  // namespace lw
