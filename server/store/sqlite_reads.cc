// Reads behind the CLI's logs, results, reports and plots (per-layer values included); token
// listing; zero-shot scores.
#include <algorithm>
#include <cmath>
#include <limits>

#include "base/status_macros.h"
#include "server/store/packed_points.h"
#include "server/store/sqlite_rows.h"

namespace spheret::store {

absl::StatusOr<std::vector<AttemptRecord>> ReadAttempts(Database& db, int64_t trial_id) {
  SPHERET_ASSIGN_OR_RETURN(
      Statement * statement,
      db.Prepare("SELECT attempt, worker_id, started_ms, coalesce(ended_ms, 0), "
                 "coalesce(outcome, ''), coalesce(exit_code, 0), coalesce(stderr_tail, '') "
                 "FROM attempts WHERE trial_id = ?1 ORDER BY attempt"));
  statement->Bind(1, trial_id);
  return Rows<AttemptRecord>(statement, [](const Statement& r) {
    return AttemptRecord{static_cast<int>(r.Int(0)), r.Text(1), r.Int(2), r.Int(3), r.Text(4),
                         static_cast<int>(r.Int(5)), r.Text(6)};
  });
}

absl::StatusOr<std::vector<RungValue>> ReadRungValues(Database& db, int64_t sweep_id) {
  SPHERET_ASSIGN_OR_RETURN(
      Statement * statement,
      db.Prepare("SELECT sweep_id, search_group, rung, trial_id, step, value, promoted "
                 "FROM rung_values WHERE ?1 = 0 OR sweep_id = ?1 "
                 "ORDER BY sweep_id, search_group, rung, trial_id"));
  statement->Bind(1, sweep_id);
  return Rows<RungValue>(statement, [](const Statement& r) {
    return RungValue{r.Int(0),  r.Text(1),    static_cast<int>(r.Int(2)), r.Int(3), r.Int(4),
                     r.Real(5), r.Int(6) != 0};
  });
}

absl::StatusOr<EventPage> ReadEvents(Database& db, int64_t trial_id, const EventPageQuery& query) {
  SPHERET_ASSIGN_OR_RETURN(Statement * statement,
                           db.Prepare("SELECT attempt, seq, json FROM events WHERE trial_id = ?1 "
                                      "AND (?2 = 0 OR (attempt, seq) < (?3, ?4)) "
                                      "ORDER BY attempt DESC, seq DESC LIMIT ?5"));
  statement->Bind(1, trial_id)
      .Bind(2, query.before ? 1 : 0)
      .Bind(3, query.before ? query.before->first : 0)
      .Bind(4, query.before ? query.before->second : int64_t{0})
      .Bind(5, static_cast<int64_t>(query.limit));
  EventPage page;
  size_t bytes = 0;
  for (;;) {
    absl::StatusOr<bool> row = statement->Step();
    if (!row.ok()) {
      statement->Reset();
      return row.status();
    }
    if (!*row) break;
    EventRecord event{static_cast<int>(statement->Int(0)), statement->Int(1), statement->Text(2)};
    bytes += event.json.size() + kEventFramingBytes;
    if (!page.events.empty() && bytes > query.max_bytes) {
      page.more = true;
      break;
    }
    page.events.push_back(std::move(event));
  }
  statement->Reset();
  std::reverse(page.events.begin(), page.events.end());
  return page;
}

absl::StatusOr<std::vector<EvalRecord>> ReadEvals(Database& db, int64_t trial_id) {
  SPHERET_ASSIGN_OR_RETURN(
      Statement * statement,
      db.Prepare("SELECT task, metric, value, std_error, ckpt_step, error FROM evals e "
                 "WHERE trial_id = ?1 AND ckpt_step = (SELECT max(ckpt_step) FROM evals "
                 "WHERE trial_id = e.trial_id AND task = e.task AND metric = e.metric) "
                 "ORDER BY task, metric"));
  statement->Bind(1, trial_id);
  return Rows<EvalRecord>(statement, [](const Statement& r) {
    const double nan = std::nan("");
    return EvalRecord{r.Text(0),
                      r.Text(1),
                      r.IsNull(2) ? nan : r.Real(2),
                      r.IsNull(3) ? nan : r.Real(3),
                      r.Int(4),
                      r.IsNull(5) ? std::string() : r.Text(5)};
  });
}

namespace {

// One value of a curve and the attempt that wrote it.
struct CurvePoint {
  int64_t step;
  int attempt;
  double value;
};

// The values of a trial's metric that no newer attempt superseded, in no particular order.
absl::StatusOr<std::vector<CurvePoint>> CurvePoints(Database& db, int64_t trial_id,
                                                    const std::string& metric) {
  SPHERET_ASSIGN_OR_RETURN(
      Statement * statement,
      db.Prepare("SELECT attempt, superseded_from, points FROM scalar_blocks WHERE trial_id = ?1 "
                 "AND metric_id = (SELECT metric_id FROM metric_names WHERE name = ?2) AND "
                 "(superseded_from IS NULL OR superseded_from > first_step)"));
  statement->Bind(1, trial_id).Bind(2, metric);
  std::vector<CurvePoint> points;
  std::vector<PackedPoint> block;
  for (;;) {
    SPHERET_ASSIGN_OR_RETURN(bool row, statement->Step());
    if (!row) break;
    const int attempt = static_cast<int>(statement->Int(0));
    const int64_t superseded_from =
        statement->IsNull(1) ? std::numeric_limits<int64_t>::max() : statement->Int(1);
    block.clear();
    absl::Status decoded = DecodePoints(statement->TextView(2), 0, &block);
    if (!decoded.ok()) {
      statement->Reset();
      return decoded;
    }
    for (const PackedPoint& point : block) {
      if (point.step < superseded_from) points.push_back({point.step, attempt, point.value});
    }
  }
  statement->Reset();
  return points;
}

}  // namespace

absl::StatusOr<CurveRecord> ReadCurve(Database& db, int64_t trial_id, const std::string& metric) {
  SPHERET_ASSIGN_OR_RETURN(std::vector<CurvePoint> points, CurvePoints(db, trial_id, metric));
  std::sort(points.begin(), points.end(), [](const CurvePoint& a, const CurvePoint& b) {
    return a.step != b.step ? a.step < b.step : a.attempt < b.attempt;
  });
  CurveRecord curve{trial_id, {}, {}};
  curve.steps.reserve(points.size());
  curve.values.reserve(points.size());
  for (const CurvePoint& point : points) {
    if (!curve.steps.empty() && curve.steps.back() == point.step) {
      curve.values.back() = point.value;  // a newer attempt's value at the resume step
      continue;
    }
    curve.steps.push_back(point.step);
    curve.values.push_back(point.value);
  }
  return curve;
}

absl::StatusOr<std::vector<LayerSeries>> ReadLayerValues(Database& db, int64_t trial_id,
                                                         const LayerValueQuery& query) {
  SPHERET_ASSIGN_OR_RETURN(
      Statement * statement,
      db.Prepare("SELECT sublayer, layer, step, value FROM layer_values WHERE trial_id = ?1 AND "
                 "field_id = (SELECT field_id FROM diag_fields WHERE name = ?2) AND "
                 "(?3 = '' OR sublayer = ?3) AND layer BETWEEN ?4 AND ?5 AND "
                 "step BETWEEN ?6 AND ?7 AND superseded = 0 "
                 "ORDER BY sublayer, layer, step, attempt"));
  statement->Bind(1, trial_id).Bind(2, query.field).Bind(3, query.sublayer);
  statement->Bind(4, query.min_layer).Bind(5, query.max_layer);
  statement->Bind(6, query.min_step).Bind(7, query.max_step);
  std::vector<LayerSeries> series;
  for (;;) {
    SPHERET_ASSIGN_OR_RETURN(bool row, statement->Step());
    if (!row) break;
    const int64_t layer = statement->Int(1), step = statement->Int(2);
    const double value = statement->IsNull(3) ? std::nan("") : statement->Real(3);
    // Last of the columns read (a view is valid until the next column access): no copy per row.
    const std::string_view sublayer = statement->TextView(0);
    if (series.empty() || series.back().layer != layer || series.back().sublayer != sublayer) {
      series.push_back({layer, std::string(sublayer), {}, {}});
    }
    LayerSeries& into = series.back();
    if (!into.steps.empty() && into.steps.back() == step) {
      into.values.back() = value;  // a newer attempt's value at the resume step
      continue;
    }
    into.steps.push_back(step);
    into.values.push_back(value);
  }
  statement->Reset();
  return series;
}

absl::StatusOr<std::vector<TokenRecord>> ReadTokens(Database& db, int64_t after, int limit) {
  SPHERET_ASSIGN_OR_RETURN(
      Statement * statement,
      db.Prepare("SELECT name, role, substr(token_hash, 1, 12), created_ms, worker_id, "
                 "expires_ms, rowid FROM api_tokens WHERE rowid > ?1 ORDER BY rowid LIMIT ?2"));
  statement->Bind(1, after).Bind(2, static_cast<int64_t>(limit));
  return Rows<TokenRecord>(statement, [](const Statement& r) {
    return TokenRecord{r.Text(0), ParseRole(r.Text(1)).value_or(Role::kRead),
                       r.Text(2), r.Int(3),
                       r.Text(4), r.Int(5),
                       r.Int(6)};
  });
}

absl::Status StoreEval(Database& db, int64_t trial_id, const EvalRecord& eval) {
  SPHERET_ASSIGN_OR_RETURN(
      Statement * insert,
      db.Prepare(
          "INSERT OR REPLACE INTO evals(trial_id, task, metric, value, std_error, ckpt_step, "
          "error) VALUES (?1, ?2, ?3, ?4, ?5, ?6, nullif(?7, ''))"));
  return insert->Bind(1, trial_id)
      .Bind(2, eval.task)
      .Bind(3, eval.metric)
      .Bind(4, eval.value)
      .Bind(5, eval.std_error)
      .Bind(6, eval.step)
      .Bind(7, eval.error)
      .Run();
}

}  // namespace spheret::store
