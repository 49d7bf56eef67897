#include "worker/agent/agent.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "protocol/trainer_events.h"

namespace spheret::agent {
namespace {

namespace fs = std::filesystem;

using protocol::kExitDiverged;
using protocol::kExitStopped;
constexpr int kRpcTimeoutMs = 2'000;  // Register, Heartbeat, Acquire: bounded; retried next tick
constexpr size_t kMaxBatchRows = 1'000;
constexpr int kMaxRejectionsLogged = 10;  // per attempt; the metric counts them all

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A TCP port the OS considers free right now (0 when none could be had).
int FreeLocalPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  socklen_t length = sizeof(address);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

// 16 random hex digits naming this daemon's run (two daemons with one worker id are told apart).
std::string RandomInstance() {
  std::random_device device;
  return absl::StrCat(absl::Hex(device(), absl::kZeroPad8), absl::Hex(device(), absl::kZeroPad8));
}

// Adds the (trial, attempt) keys of `attempts` to a Register or Heartbeat request.
template <typename Map>
void AddRunning(const Map& attempts, google::protobuf::RepeatedPtrField<v1::RunningTrial>* out) {
  for (const auto& [key, attempt] : attempts) {
    v1::RunningTrial* running = out->Add();
    running->set_trial_id(key.first);
    running->set_attempt(key.second);
  }
}

}  // namespace

// One leased trial attempt on this worker: its trainer processes and the events not yet sent.
struct Agent::Attempt {
  v1::Lease lease;
  std::vector<std::unique_ptr<TrainerProcess>> ranks;
  bool ships_events = false;  // holds global rank 0, whose stdout carries the events
  v1::EventBatch pending;     // events gathered since the last flush (guarded by mutex_)
  int64_t next_seq = 0;       // stdout line number
  int lines_rejected = 0;     // stdout lines that were not valid events
  int64_t last_flush_ms = 0;
  bool stopping = false;   // SIGTERM sent
  bool hand_back = false;  // stopped because the worker shuts down
  bool stale = false;      // the coordinator no longer knows this attempt: report nothing
  int64_t kill_at_ms = 0;  // SIGKILL after the grace period
};

absl::Status ValidateAgentOptions(AgentOptions* options) {
  if (options->gpus.empty() && options->cpu_slots <= 0) {
    return absl::InvalidArgumentError("give --gpus 0,1,... or --slots N (N >= 1)");
  }
  if (!options->gpus.empty() && options->cpu_slots > 0) {
    return absl::InvalidArgumentError("--gpus and --slots exclude each other");
  }
  if (options->lm_binary.empty() || access(options->lm_binary.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError("--lm '" + options->lm_binary +
                                      "' is not an executable spheret-lm");
  }
  if (options->worker_id.empty()) {
    char name[256] = {0};
    gethostname(name, sizeof(name) - 1);
    options->worker_id = name;
  }
  if (options->checkpoint_root.empty()) options->checkpoint_root = options->work_dir + "/runs";
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      net::ClientCredentials(options->tls);
  if (!credentials.ok()) return credentials.status();
  options->credentials = *credentials;
  if (options->tls.ca_file.empty() && !net::IsLoopback(options->coordinator)) {
    spdlog::warn("--coordinator {} is not a loopback address and no --tls-ca is given: the "
                 "token and the trial data travel unencrypted",
                 options->coordinator);
  }
  if (options->threads_per_slot < 1 || options->grace_ms < 0) {
    return absl::InvalidArgumentError("--threads-per-slot must be >= 1 and --grace >= 0");
  }
  std::error_code ec;
  for (const std::string& dir : {options->work_dir, options->checkpoint_root}) {
    fs::create_directories(dir, ec);
    if (ec) return absl::InvalidArgumentError("cannot create " + dir + ": " + ec.message());
  }
  return absl::OkStatus();
}

Agent::Agent(AgentOptions options, WorkerMetrics* metrics)
    : options_(std::move(options)), metrics_(metrics), instance_(RandomInstance()) {
  // Reconnect quickly when the coordinator comes back: leases wait only one TTL after its restart.
  grpc::ChannelArguments args;
  // (GRPC_ARG_MIN_RECONNECT_BACKOFF_MS stays at its default: gRPC uses it as the connect timeout,
  // and a short one abandons handshakes on a loaded machine.)
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1'000);
  channel_ = grpc::CreateCustomChannel(
      options_.coordinator,
      options_.credentials ? options_.credentials : grpc::InsecureChannelCredentials(), args);
  stub_ = v1::WorkerService::NewStub(channel_);
  OutboxOptions outbox;
  outbox.spool_path = options_.work_dir + "/spool.bin";
  outbox.token = options_.token;
  outbox_ = std::make_unique<Outbox>(
      channel_, outbox,
      [this](const OutboxItem& item, const grpc::Status& status) { Rejected(item, status); });
}

Agent::~Agent() = default;

grpc::ClientContext* Agent::Prepare(grpc::ClientContext* context, int timeout_ms) const {
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  // Wait (within the deadline) for the connection instead of failing at once on the last error
  // while the channel is between reconnect attempts: a returning coordinator is reached at once.
  context->set_wait_for_ready(true);
  if (!options_.token.empty()) context->AddMetadata("authorization", "Bearer " + options_.token);
  return context;
}

void Agent::Register() {
  grpc::ClientContext context;
  v1::RegisterRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_host(options_.host);
  for (int gpu : options_.gpus) request.add_gpus(gpu);
  request.set_cpu_slots(options_.cpu_slots);
  request.set_version(options_.version);
  request.set_instance(instance_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    AddRunning(attempts_, request.mutable_running());
  }
  v1::RegisterResponse response;
  const grpc::Status status = stub_->Register(Prepare(&context, kRpcTimeoutMs), request, &response);
  if (!status.ok()) {
    spdlog::warn("register with {}: {} (retrying)", options_.coordinator, status.error_message());
    next_register_ms_ = NowMs() + 1'000;
    return;
  }
  registered_ = true;
  heartbeat_interval_ms_ = std::max(response.heartbeat_interval_ms(), 100);
  spdlog::info("registered as {} with {} ({} trial(s) reattached)", options_.worker_id,
               options_.coordinator, response.reattached_size());
}

void Agent::Heartbeat() {
  grpc::ClientContext context;
  v1::HeartbeatRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_instance(instance_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    AddRunning(attempts_, request.mutable_running());
  }
  v1::HeartbeatResponse response;
  const grpc::Status status =
      stub_->Heartbeat(Prepare(&context, kRpcTimeoutMs), request, &response);
  if (!status.ok()) {
    spdlog::warn("heartbeat: {}", status.error_message());
    return;
  }
  if (response.reregister()) registered_ = false;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const v1::RunningTrial& stop : response.stop()) {
    auto found = attempts_.find({stop.trial_id(), stop.attempt()});
    if (found == attempts_.end() || found->second->stopping) continue;
    spdlog::info("trial {} attempt {}: the coordinator says stop", stop.trial_id(), stop.attempt());
    StopAttempt(*found->second, /*hand_back=*/false);
  }
}

int Agent::FreeSlots() const {
  const int total =
      options_.gpus.empty() ? options_.cpu_slots : static_cast<int>(options_.gpus.size());
  int busy = 0;
  for (const auto& [key, attempt] : attempts_) busy += attempt->lease.slots_size();
  return total - busy;
}

void Agent::AcquireWork() {
  int free = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    free = FreeSlots();
  }
  if (free <= 0) return;
  if (outbox_->full()) {  // the coordinator has been away long: take no new work until it drains
    spdlog::warn("the spool holds {} item(s), above its bound: taking no new trials",
                 outbox_->depth());
    return;
  }
  const int port = FreeLocalPort();  // MASTER_PORT if this worker becomes rank 0 of a gang
  grpc::ClientContext context;
  v1::AcquireRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_free_slots(free);
  request.set_rendezvous_port(port);
  request.set_max_trials(free);
  request.set_instance(instance_);
  v1::AcquireResponse response;
  const grpc::Status status = stub_->Acquire(Prepare(&context, kRpcTimeoutMs), request, &response);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) registered_ = false;
  if (!status.ok()) return;
  for (const v1::Lease& lease : response.leases()) {
    if (absl::Status started = StartAttempt(lease); !started.ok()) {
      spdlog::error("trial {} attempt {}: {}", lease.trial_id(), lease.attempt(),
                    started.ToString());
      OutboxItem item;
      item.is_finish = true;
      item.finish.set_worker_id(options_.worker_id);
      item.finish.set_trial_id(lease.trial_id());
      item.finish.set_attempt(lease.attempt());
      item.finish.set_outcome(v1::TRIAL_STATE_FAILED);
      item.finish.set_exit_code(-1);
      item.finish.set_stderr_tail(std::string(started.message()));
      outbox_->Push(std::move(item));
    }
  }
}

absl::Status Agent::StartAttempt(const v1::Lease& lease) {
  const v1::Rendezvous& rendezvous = lease.rendezvous();
  const int ranks = std::max(rendezvous.ranks_per_node(), 1);
  const int world = std::max(rendezvous.world_size(), 1);
  const std::string name = absl::StrCat("trial-", lease.trial_id());
  const fs::path dir =
      fs::path(options_.work_dir) / "trials" / absl::StrCat(name, "-attempt-", lease.attempt());
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError("cannot create " + dir.string() + ": " + ec.message());
  const std::string config = (dir / protocol::kConfigFile).string();
  if (!(std::ofstream(config) << lease.config_json() << "\n")) {
    return absl::InternalError("cannot write " + config);
  }
  // Each attempt trains in its own run folder, starting from the newest checkpoint an earlier
  // attempt left (hard-linked: checkpoints are replaced by rename, never rewritten in place), so a
  // stale trainer that has not noticed it lost the lease cannot overwrite the live one's files.
  const fs::path trial_root = fs::path(options_.checkpoint_root) / name;
  const fs::path run_dir = trial_root / absl::StrCat("attempt-", lease.attempt());
  fs::create_directories(run_dir, ec);
  if (ec) return absl::InternalError("cannot create " + run_dir.string() + ": " + ec.message());
  bool resume = false;
  for (int earlier = lease.attempt() - 1; earlier >= 1 && !resume; --earlier) {
    const fs::path checkpoint =
        trial_root / absl::StrCat("attempt-", earlier) / protocol::kCheckpointFile;
    if (!fs::exists(checkpoint, ec)) continue;
    const fs::path taken_over = run_dir / protocol::kCheckpointFile;
    fs::remove(taken_over, ec);
    fs::create_hard_link(checkpoint, taken_over, ec);
    if (ec) fs::copy_file(checkpoint, taken_over, ec);
    if (ec)
      return absl::InternalError("cannot take over " + checkpoint.string() + ": " + ec.message());
    // Its event history too: the resumed trainer replays it up to the checkpoint, so the curve is
    // whole even when the worker that ran the earlier attempt died with events unsent.
    fs::copy_file(checkpoint.parent_path() / protocol::kEventsFile, run_dir / protocol::kEventsFile,
                  fs::copy_options::overwrite_existing, ec);
    resume = true;
  }
  auto attempt = std::make_unique<Attempt>();
  attempt->lease = lease;
  attempt->ships_events = rendezvous.node_rank() == 0;
  attempt->last_flush_ms = NowMs();
  Attempt* raw = attempt.get();
  // mutex_ is not held while processes start: if one fails, destroying `attempt` joins the
  // readers, whose callbacks take mutex_.
  for (int local = 0; local < ranks; ++local) {
    ProcessSpec spec;
    spec.argv = {options_.lm_binary, "train",       "--config",        config, "--out",
                 run_dir.string(),   "--data-root", options_.data_root};
    if (resume) spec.argv.insert(spec.argv.end(), {"--resume", "--replay-events"});
    const int threads = options_.gpus.empty() ? lease.slots_size() * options_.threads_per_slot
                                              : options_.threads_per_slot;
    spec.env["OMP_NUM_THREADS"] = std::to_string(threads);
    if (!options_.gpus.empty()) {
      spec.env["CUDA_VISIBLE_DEVICES"] = absl::StrJoin(lease.slots(), ",");
    }
    if (world > 1) {
      spec.env["WORLD_SIZE"] = std::to_string(world);
      spec.env["RANK"] = std::to_string(rendezvous.node_rank() * ranks + local);
      spec.env["LOCAL_RANK"] = std::to_string(local);
      spec.env["MASTER_ADDR"] = rendezvous.master_addr();
      spec.env["MASTER_PORT"] = std::to_string(rendezvous.master_port());
    }
    spec.log_path = (dir / absl::StrCat("rank", local, ".log")).string();
    TrainerProcess::LineCallback on_line = [](const std::string&) {};
    if (local == 0 && attempt->ships_events) {
      on_line = [this, raw](const std::string& line) { OnTrainerLine(raw, line); };
    }
    absl::StatusOr<std::unique_ptr<TrainerProcess>> process =
        TrainerProcess::Start(spec, std::move(on_line));
    if (!process.ok()) return process.status();  // started ranks die with `attempt`
    attempt->ranks.push_back(std::move(*process));
  }
  spdlog::info("trial {} attempt {}: started {} rank(s) on slots [{}]{}", lease.trial_id(),
               lease.attempt(), ranks, absl::StrJoin(lease.slots(), ","),
               resume ? " (resuming from a checkpoint)" : "");
  std::lock_guard<std::mutex> lock(mutex_);
  attempts_[{lease.trial_id(), lease.attempt()}] = std::move(attempt);
  return absl::OkStatus();
}

void Agent::OnTrainerLine(Attempt* attempt, const std::string& line) {
  protocol::TrainerEvent event;
  const std::string refused = protocol::ParseTrainerEvent(line, &event);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!refused.empty()) {  // logged and dropped; the lines after it flow
    metrics_->AddLinesRejected(1);
    if (attempt->lines_rejected++ < kMaxRejectionsLogged) {
      spdlog::warn("trial {} attempt {}: trainer line refused ({}): {}", attempt->lease.trial_id(),
                   attempt->lease.attempt(), refused, line.substr(0, 200));
    }
    return;
  }
  const int64_t seq = attempt->next_seq++;
  if (const auto* metric = std::get_if<protocol::MetricEvent>(&event)) {
    v1::MetricRow* row = attempt->pending.add_metrics();
    row->set_name(metric->name);
    row->set_step(metric->step);
    row->set_value(metric->value);
    row->set_wall_ms(WallMs());
  } else if (const auto* checkpoint = std::get_if<protocol::CheckpointEvent>(&event)) {
    // A batch carries one checkpoint: send the one gathered so far before recording another.
    if (attempt->pending.checkpoint_step() > 0) FlushEvents(*attempt, /*force=*/true);
    attempt->pending.set_checkpoint_step(checkpoint->step);
    attempt->pending.set_checkpoint_path(checkpoint->path);
  } else {
    v1::Event* other = attempt->pending.add_other();
    other->set_json(line);
    other->set_seq(seq);
    if (const auto* diag = std::get_if<protocol::DiagEvent>(&event)) {
      v1::DiagRow* row = other->mutable_diag();
      row->set_step(diag->step);
      row->set_layer(static_cast<int32_t>(diag->layer));
      row->set_sublayer(diag->sublayer);
      row->set_hidden_norm(diag->hidden_norm);
      row->set_theta(diag->theta);
      row->set_alpha(diag->alpha);
      row->set_radial(diag->radial);
    } else if (const auto* eval = std::get_if<protocol::EvalEvent>(&event)) {
      v1::EvalScore* row = other->mutable_eval();
      row->set_step(eval->step);
      row->set_task(eval->task);
      row->set_metric(eval->metric);
      row->set_value(eval->value);
      row->set_std_error(eval->std_error);
    }
  }
  if (static_cast<size_t>(attempt->pending.metrics_size()) >= kMaxBatchRows) {
    FlushEvents(*attempt, /*force=*/true);
  }
}

void Agent::FlushEvents(Attempt& attempt, bool force) {
  v1::EventBatch& batch = attempt.pending;
  const int count = batch.metrics_size() + batch.other_size() + (batch.checkpoint_step() > 0);
  if (count == 0) return;
  if (!force && NowMs() - attempt.last_flush_ms < options_.batch_interval_ms) return;
  attempt.last_flush_ms = NowMs();
  if (attempt.stale) {  // the coordinator refuses this attempt's writes
    batch.Clear();
    return;
  }
  OutboxItem item;
  item.batch = std::move(batch);
  item.batch.set_trial_id(attempt.lease.trial_id());
  item.batch.set_attempt(attempt.lease.attempt());
  batch = v1::EventBatch();
  outbox_->Push(std::move(item));
  metrics_->AddEventsForwarded(count);
}

void Agent::StopAttempt(Attempt& attempt, bool hand_back) {
  attempt.stopping = true;
  attempt.hand_back = hand_back;
  attempt.kill_at_ms = NowMs() + options_.grace_ms;
  for (auto& rank : attempt.ranks) rank->Signal(SIGTERM);
}

void Agent::Supervise() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = attempts_.begin(); it != attempts_.end();) {
    Attempt& attempt = *it->second;
    FlushEvents(attempt, /*force=*/false);
    if (attempt.stopping && NowMs() >= attempt.kill_at_ms) {
      for (auto& rank : attempt.ranks) rank->Signal(SIGKILL);
    }
    bool all_exited = true, one_failed = false;
    for (auto& rank : attempt.ranks) {
      const bool exited = rank->Exited();
      all_exited = all_exited && exited;
      one_failed = one_failed || (exited && rank->exit_code() != 0);
    }
    if (one_failed && !all_exited && !attempt.stopping) {
      spdlog::warn("trial {}: a rank died; stopping the gang", attempt.lease.trial_id());
      StopAttempt(attempt, /*hand_back=*/false);
    }
    if (!all_exited) {
      ++it;
      continue;
    }
    FinishAttempt(attempt);
    it = attempts_.erase(it);
  }
}

void Agent::FinishAttempt(Attempt& attempt) {
  FlushEvents(attempt, /*force=*/true);
  const TrainerProcess* worst = attempt.ranks.front().get();
  for (const auto& rank : attempt.ranks) {
    if (rank->exit_code() != 0 && (worst->exit_code() == 0 || worst->exit_code() == kExitStopped)) {
      worst = rank.get();
    }
  }
  const int code = worst->exit_code();
  v1::TrialState outcome = v1::TRIAL_STATE_FAILED;
  if (code == 0) outcome = v1::TRIAL_STATE_SUCCEEDED;
  if (code == kExitDiverged) outcome = v1::TRIAL_STATE_DIVERGED;
  if (attempt.stopping && (code == kExitStopped || worst->killed_by_signal())) {
    outcome = attempt.hand_back ? v1::TRIAL_STATE_PENDING : v1::TRIAL_STATE_CANCELLED;
  }
  spdlog::info("trial {} attempt {}: trainer exited {} -> {}", attempt.lease.trial_id(),
               attempt.lease.attempt(), code, v1::TrialState_Name(outcome));
  // A stale attempt reports nothing; a gang member leaves a success to rank 0's worker.
  if (attempt.stale || (!attempt.ships_events && outcome == v1::TRIAL_STATE_SUCCEEDED)) return;
  OutboxItem item;
  item.is_finish = true;
  item.finish.set_worker_id(options_.worker_id);
  item.finish.set_trial_id(attempt.lease.trial_id());
  item.finish.set_attempt(attempt.lease.attempt());
  item.finish.set_outcome(outcome);
  item.finish.set_exit_code(code);
  if (outcome == v1::TRIAL_STATE_FAILED) item.finish.set_stderr_tail(worst->StderrTail());
  outbox_->Push(std::move(item));
}

void Agent::Rejected(const OutboxItem& item, const grpc::Status& status) {
  spdlog::warn("trial {} attempt {}: the coordinator refused a {}: {}", item.trial_id(),
               item.attempt(), item.is_finish ? "finish" : "batch", status.error_message());
  if (status.error_code() != grpc::StatusCode::FAILED_PRECONDITION) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = attempts_.find({item.trial_id(), item.attempt()});
  if (found == attempts_.end()) return;
  found->second->stale = true;  // lease lost: drop the trial
  if (!found->second->stopping) StopAttempt(*found->second, /*hand_back=*/false);
}

void Agent::UpdateMetrics() {
  std::lock_guard<std::mutex> lock(mutex_);
  const int total =
      options_.gpus.empty() ? options_.cpu_slots : static_cast<int>(options_.gpus.size());
  const int free = FreeSlots();
  int processes = 0;
  for (const auto& [key, attempt] : attempts_) processes += attempt->ranks.size();
  metrics_->SetSlots(total - free, free);
  metrics_->SetTrainerProcesses(processes);
  metrics_->SetSpoolDepth(static_cast<int64_t>(outbox_->depth()));
}

absl::Status Agent::Run(const std::atomic<bool>& stop) {
  if (absl::Status started = outbox_->Start(); !started.ok()) return started;
  auto tick = [this](bool acquire) {
    const int64_t now = NowMs();
    if (!registered_ && now >= next_register_ms_) Register();
    if (registered_ && now >= next_heartbeat_ms_) {
      Heartbeat();
      next_heartbeat_ms_ = now + heartbeat_interval_ms_;
    }
    if (acquire && registered_ && now >= next_acquire_ms_) {
      AcquireWork();
      next_acquire_ms_ = now + options_.acquire_interval_ms;
    }
    Supervise();
    UpdateMetrics();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  };
  while (!stop) tick(/*acquire=*/true);
  spdlog::info("shutting down: stopping trainers and handing their trials back");
  shutting_down_ = true;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [key, attempt] : attempts_) {
      if (!attempt->stopping) StopAttempt(*attempt, /*hand_back=*/true);
    }
  }
  const int64_t deadline = NowMs() + options_.grace_ms + 5'000;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (attempts_.empty() || NowMs() > deadline) break;
    }
    tick(/*acquire=*/false);
  }
  if (!outbox_->Flush(options_.grace_ms)) {
    spdlog::warn("{} item(s) still in the spool; they are sent when the worker starts again",
                 outbox_->depth());
  }
  return absl::OkStatus();
}

}  // namespace spheret::agent
