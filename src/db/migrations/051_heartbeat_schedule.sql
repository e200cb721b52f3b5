-- Heartbeats that fire (§4.12, §2 Heartbeat settings): the schedule is `next_heartbeat` of the
-- settings row itself. A heartbeat worker takes due rows with FOR UPDATE SKIP LOCKED and leases
-- them while the agent runs its heartbeat, so N backends never run the same heartbeat twice and a
-- heartbeat whose worker died is taken again when the lease runs out (a restart neither loses
-- nor doubles it). docs/watchdog.md describes it.
ALTER TABLE heartbeat_settings
  ADD COLUMN locked_by text,
  ADD COLUMN lease_until timestamptz,
  -- outcome of the last run: ok, failed (the agent answered an error), skipped (agent not running)
  ADD COLUMN last_run_status text CHECK (last_run_status IN ('ok', 'failed', 'skipped')),
  ADD COLUMN last_run_error text CHECK (length(last_run_error) <= 2000),
  ADD COLUMN runs integer NOT NULL DEFAULT 0 CHECK (runs >= 0);
CREATE INDEX heartbeat_settings_due_idx ON heartbeat_settings (next_heartbeat) WHERE enabled;
