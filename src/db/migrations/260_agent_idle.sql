-- Idle agents sleep (docs/agents.md "Idle agents sleep"): when an agent last had traffic (a chat, a
-- proxied request or socket, a heartbeat), written by the platform at most every few seconds from
-- what it counts in memory, never on the request's path. With AGENT_IDLE_SUSPEND_S set, a running
-- agent whose last traffic (or start, when it had none since) is older than that is suspended.
ALTER TABLE agents ADD COLUMN last_active_at timestamptz;

-- the idle sweep reads running agents by their last traffic
CREATE INDEX agents_running_last_active ON agents (last_active_at) WHERE status = 'running';
