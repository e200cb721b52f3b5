-- Watchdog (§3 "Watchdog lifecycle", §6 "Watchdog notifications", §8 watchdog defaults).
-- docs/watchdog.md describes the design.

-- One row per watched agent: its lifecycle state, counters and when it is next due. The row is
-- also the lease: a backend process owns the agent while `lease_until` is in the future and it
-- renews it; when the holder dies the lease runs out and another backend takes the agent over.
-- Every write of the holder is fenced by `locked_by`, so a process that lost its lease cannot
-- overwrite the new holder's state.
CREATE TABLE agent_watchdog (
  agent_id text PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  state text NOT NULL DEFAULT 'starting'
    CHECK (state IN ('starting', 'running', 'degraded', 'repairing', 'crash_loop', 'stopped')),
  -- consecutive failed probes in the current state (startup failure threshold)
  failures integer NOT NULL DEFAULT 0 CHECK (failures >= 0),
  -- repairs tried since the agent was last healthy (max repair attempts)
  repair_attempts integer NOT NULL DEFAULT 0 CHECK (repair_attempts >= 0),
  next_check_at timestamptz NOT NULL DEFAULT now(),
  last_check_at timestamptz,
  last_healthy_at timestamptz,
  last_error text,
  state_changed_at timestamptz NOT NULL DEFAULT now(),
  locked_by text,
  lease_until timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agent_watchdog_due_idx ON agent_watchdog (next_check_at);
CREATE INDEX agent_watchdog_holder_idx ON agent_watchdog (locked_by);
ALTER TABLE agent_watchdog ENABLE ROW LEVEL SECURITY;
CREATE POLICY agent_watchdog_owner ON agent_watchdog USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());

-- History: every transition, crash and repair of an agent (inspectable by its owner).
CREATE TABLE agent_watchdog_events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  agent_id text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('transition', 'crash', 'repair')),
  from_state text,
  to_state text,
  -- repair: attempt number and outcome
  attempt integer,
  ok boolean,
  detail text CHECK (length(detail) <= 2000),
  -- which backend process wrote it
  holder text,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX agent_watchdog_events_agent_idx ON agent_watchdog_events (agent_id, id DESC);
-- the crash-loop window counts recent crashes of one agent
CREATE INDEX agent_watchdog_events_crash_idx ON agent_watchdog_events (agent_id, created_at) WHERE kind = 'crash';
ALTER TABLE agent_watchdog_events ENABLE ROW LEVEL SECURITY;
CREATE POLICY agent_watchdog_events_owner ON agent_watchdog_events USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());

-- Outbox of notifications (§6): one row per event and channel, written in the same transaction
-- as the event, so each event is notified once per channel even when the process that saw it
-- dies; senders take rows with FOR UPDATE SKIP LOCKED. Operator data: row-level security with no
-- policy, so the request role sees no rows; the workers use the owner connection.
CREATE TABLE watchdog_notifications (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  event_id bigint NOT NULL REFERENCES agent_watchdog_events (id) ON DELETE CASCADE,
  channel text NOT NULL CHECK (channel IN ('telegram', 'webhook')),
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_error text,
  payload jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  sent_at timestamptz,
  UNIQUE (event_id, channel)
);
CREATE INDEX watchdog_notifications_pending_idx ON watchdog_notifications (next_attempt_at) WHERE status = 'pending';
ALTER TABLE watchdog_notifications ENABLE ROW LEVEL SECURITY;
