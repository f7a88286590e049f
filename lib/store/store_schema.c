/* store_schema.c: the database schema and its migrations. The schema
 * version is PRAGMA user_version; migration i brings a database from
 * version i to i + 1. All missing migrations run in one transaction with
 * the version update, so a database is always at one version or the next,
 * never between. docs/store.md describes every table and column. */
#include "store_internal.h"

#include <stdio.h>
#include <string.h>

/* Version 1: the first schema. Times are REAL seconds since the epoch; JSON
 * columns are checked with json_valid (SQLite's JSON functions). Job ids
 * are AUTOINCREMENT (never reused, even after a delete: page tokens and API
 * clients rely on it); event seqs are plain rowids (increasing; only the
 * seqs of a deleted job's newest events can come back), which saves a write
 * of sqlite_sequence per event. */
static const char schema_v1[] =
    "CREATE TABLE jobs (\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  team TEXT NOT NULL CHECK (team <> ''),\n"
    "  name TEXT NOT NULL CHECK (name <> ''),\n"
    "  experiment TEXT,\n"
    "  spec_text TEXT NOT NULL,\n"
    "  spec_hash TEXT NOT NULL,\n"
    "  spec_json TEXT CHECK (spec_json IS NULL OR json_valid(spec_json)),\n"
    "  plan_json TEXT CHECK (plan_json IS NULL OR json_valid(plan_json)),\n"
    "  state TEXT NOT NULL CHECK (state IN ('queued','starting','running','stopping',\n"
    "                                       'succeeded','failed','cancelled','timed_out')),\n"
    "  priority_class TEXT,\n"
    "  priority INTEGER NOT NULL DEFAULT 0,\n"
    "  created_at REAL NOT NULL,\n"
    "  updated_at REAL NOT NULL,\n"
    "  started_at REAL,\n"
    "  finished_at REAL,\n"
    "  attempts INTEGER NOT NULL DEFAULT 0,\n"
    "  max_retries INTEGER NOT NULL DEFAULT 0,\n"
    "  not_before REAL,\n"
    "  wait_reason TEXT,\n"
    "  placement_json TEXT CHECK (placement_json IS NULL OR json_valid(placement_json)),\n"
    "  p_step INTEGER, p_total INTEGER, p_epoch REAL, p_loss REAL, p_lr REAL,\n"
    "  p_tokens_per_s REAL, p_eta_s REAL, p_at REAL,\n"
    "  exit_code INTEGER, exit_signal INTEGER, exit_reason TEXT,\n"
    "  gpu_seconds REAL NOT NULL DEFAULT 0,\n"
    "  cost REAL NOT NULL DEFAULT 0,\n"
    "  ckpt_step INTEGER, ckpt_path TEXT, ckpt_at REAL,\n"
    "  saved_work REAL NOT NULL DEFAULT 0,\n"
    "  UNIQUE (team, name)\n"
    ");\n"
    "CREATE INDEX jobs_state ON jobs (state, id);\n"
    "CREATE INDEX jobs_team ON jobs (team, id);\n"
    "CREATE INDEX jobs_experiment ON jobs (experiment, id) WHERE experiment IS NOT NULL;\n"
    "CREATE TABLE attempts (\n"
    "  job_id INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,\n"
    "  number INTEGER NOT NULL CHECK (number > 0),\n"
    "  started_at REAL NOT NULL,\n"
    "  ended_at REAL,\n"
    "  node TEXT,\n"
    "  gpus_json TEXT CHECK (gpus_json IS NULL OR json_valid(gpus_json)),\n"
    "  executor TEXT,\n"
    "  handle_json TEXT CHECK (handle_json IS NULL OR json_valid(handle_json)),\n"
    "  work_dir TEXT,\n"
    "  log_path TEXT,\n"
    "  exit_code INTEGER, exit_signal INTEGER, reason TEXT,\n"
    "  PRIMARY KEY (job_id, number)\n"
    ") WITHOUT ROWID;\n"
    "CREATE INDEX attempts_open ON attempts (job_id, number) WHERE ended_at IS NULL;\n"
    "CREATE TABLE events (\n"
    "  seq INTEGER PRIMARY KEY,\n"
    "  job_id INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,\n"
    "  at REAL NOT NULL,\n"
    "  actor TEXT NOT NULL CHECK (actor <> ''),\n"
    "  type TEXT NOT NULL CHECK (type <> ''),\n"
    "  message TEXT NOT NULL,\n"
    "  data_json TEXT CHECK (data_json IS NULL OR json_valid(data_json))\n"
    ");\n"
    "CREATE INDEX events_job ON events (job_id, seq);\n"
    "CREATE TABLE progress (\n"
    "  job_id INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,\n"
    "  attempt INTEGER NOT NULL,\n"
    "  step INTEGER NOT NULL,\n"
    "  total INTEGER, epoch REAL, loss REAL, lr REAL, tokens_per_s REAL, eta_s REAL,\n"
    "  at REAL NOT NULL,\n"
    "  PRIMARY KEY (job_id, attempt, step)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE experiments (\n"
    "  team TEXT NOT NULL CHECK (team <> ''),\n"
    "  name TEXT NOT NULL CHECK (name <> ''),\n"
    "  max_concurrent INTEGER NOT NULL DEFAULT 0 CHECK (max_concurrent >= 0),\n"
    "  created_at REAL NOT NULL,\n"
    "  PRIMARY KEY (team, name)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE kv (\n"
    "  key TEXT PRIMARY KEY,\n"
    "  value TEXT NOT NULL\n"
    ") WITHOUT ROWID;\n";

/* Version 2: evaluation. A progress point's eval_loss (the mean loss over
 * the job's eval set after that step; NULL when the step was not
 * evaluated), and on the job the latest (e_loss at e_step) and the lowest
 * (e_best at e_best_step) over all its attempts. */
static const char schema_v2[] =
    "ALTER TABLE progress ADD COLUMN eval_loss REAL;\n"
    "ALTER TABLE jobs ADD COLUMN e_loss REAL;\n"
    "ALTER TABLE jobs ADD COLUMN e_step INTEGER;\n"
    "ALTER TABLE jobs ADD COLUMN e_best REAL;\n"
    "ALTER TABLE jobs ADD COLUMN e_best_step INTEGER;\n";

/* Version 3: the audit log (store_audit.c). One row per change asked of
 * the API, refused ones included, and per token reload: when, who (a
 * token's name, or "operator" / "controller" / "sighup"), its team, from
 * where (the client's address and port), what (method, path, the job or
 * experiment it named), the answer's status and a short detail. Append
 * only: nothing in lathe updates or deletes a row. */
static const char schema_v3[] =
    "CREATE TABLE audit (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  at REAL NOT NULL,\n"
    "  actor TEXT NOT NULL CHECK (actor <> ''),\n"
    "  team TEXT,\n"
    "  address TEXT,\n"
    "  method TEXT NOT NULL CHECK (method <> ''),\n"
    "  path TEXT NOT NULL,\n"
    "  target TEXT,\n"
    "  status INTEGER NOT NULL,\n"
    "  detail TEXT\n"
    ");\n"
    "CREATE INDEX audit_at ON audit (at, id);\n"
    "CREATE INDEX audit_team ON audit (team, at) WHERE team IS NOT NULL;\n";

/* Version 4: usage and GPU monitoring. Each attempt records the GPUs it
 * held (a shared GPU counts as its part) and their price per GPU-hour when
 * it starts, and the GPU-seconds and money it added to its job when it
 * ends: `lathe cost` and the console's burn-down read them, so spending
 * can be cut at any time. gpu_samples is a job's GPU history as NVML
 * reported it (store_usage.c): one row per sample of the GPUs it ran on.
 * jobs.plan_gpu_hours and plan_cost: the plan's estimate of the whole run
 * (when its cost_basis is "run"), kept in step with plan_json. */
#define PLAN_ESTIMATE(p)                                                                       \
    "plan_gpu_hours = CASE WHEN json_extract(" p ", '$.cost_basis') = 'run'"                  \
    " THEN json_extract(" p ", '$.gpu_hours') END,"                                            \
    " plan_cost = CASE WHEN json_extract(" p ", '$.cost_basis') = 'run'"                       \
    " THEN json_extract(" p ", '$.cost') END"

static const char schema_v4[] =
    "ALTER TABLE attempts ADD COLUMN gpus REAL;\n"
    "ALTER TABLE attempts ADD COLUMN price REAL;\n"
    "ALTER TABLE attempts ADD COLUMN gpu_seconds REAL;\n"
    "ALTER TABLE attempts ADD COLUMN cost REAL;\n"
    "CREATE INDEX attempts_ended ON attempts (ended_at) WHERE ended_at IS NOT NULL;\n"
    "CREATE TABLE gpu_samples (\n"
    "  job_id INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,\n"
    "  at REAL NOT NULL,\n"
    "  attempt INTEGER NOT NULL,\n"
    "  gpus INTEGER NOT NULL CHECK (gpus > 0),\n"
    "  util REAL, mem_used REAL, mem_total REAL, power REAL, temp REAL,\n"
    "  PRIMARY KEY (job_id, at)\n"
    ") WITHOUT ROWID;\n"
    /* the plan's estimate of the whole run, kept beside plan_json by
     * triggers (read by every cost report; parsing each plan there would
     * cost more than the rest of the report) */
    "ALTER TABLE jobs ADD COLUMN plan_gpu_hours REAL;\n"
    "ALTER TABLE jobs ADD COLUMN plan_cost REAL;\n"
    "UPDATE jobs SET " PLAN_ESTIMATE("plan_json") ";\n"
    "CREATE TRIGGER jobs_plan_insert AFTER INSERT ON jobs WHEN NEW.plan_json IS NOT NULL BEGIN\n"
    "  UPDATE jobs SET " PLAN_ESTIMATE("NEW.plan_json") " WHERE id = NEW.id;\n"
    "END;\n"
    "CREATE TRIGGER jobs_plan_update AFTER UPDATE OF plan_json ON jobs\n"
    "  WHEN NEW.plan_json IS NOT OLD.plan_json BEGIN\n"
    "  UPDATE jobs SET " PLAN_ESTIMATE("NEW.plan_json") " WHERE id = NEW.id;\n"
    "END;\n";

static const char *const migrations[] = {schema_v1, schema_v2, schema_v3, schema_v4};
#define N_MIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))

int store_schema_version(void)
{
    return N_MIGRATIONS;
}

static bool read_version(store *st, int *version)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &s, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        st_fail(st, rc, "reading the schema version");
        sqlite3_finalize(s);
        return false;
    }
    *version = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    return true;
}

/* Applies migrations from..N_MIGRATIONS-1 and sets the version, inside the
 * caller's transaction. */
static bool apply(store *st, int from)
{
    if (from >= N_MIGRATIONS) return true; /* done by another process meanwhile */
    for (int v = from; v < N_MIGRATIONS; v++) {
        char what[64];
        snprintf(what, sizeof what, "migrating the schema to version %d", v + 1);
        if (st_exec(st, migrations[v], what) != STORE_OK) return false;
    }
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", N_MIGRATIONS);
    return st_exec(st, sql, "writing the schema version") == STORE_OK;
}

bool st_migrate(store *st, char *err, size_t errsz)
{
    int version;
    if (!read_version(st, &version)) goto fail;
    if (version > N_MIGRATIONS) {
        snprintf(err, errsz,
                 "%s: the database has schema version %d, written by a newer lathe; this "
                 "build knows versions up to %d (upgrade lathe or use another --db)",
                 st->path, version, N_MIGRATIONS);
        return false;
    }
    if (version == N_MIGRATIONS) return true;
    if (st_exec(st, "BEGIN IMMEDIATE", "starting the migration") != STORE_OK) goto fail;
    /* Another process may have migrated between the read and the lock. */
    if (!read_version(st, &version) || !apply(st, version) ||
        st_exec(st, "COMMIT", "committing the migration") != STORE_OK) {
        if (!sqlite3_get_autocommit(st->db)) sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
        goto fail;
    }
    return true;
fail:
    snprintf(err, errsz, "%s: %s", st->path, st->err);
    return false;
}
