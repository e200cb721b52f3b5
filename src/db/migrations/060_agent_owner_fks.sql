-- An agent's rows belong to the agent's own user (docs/security.md "Database roles"): every table
-- that carries both agent_id and user_id references agents by the pair, so no code path (and no
-- bug in one) can file a row for user A under user B's agent, and row-level security on user_id
-- then also covers the agent. heartbeat_settings is left out on purpose: its agent_id may be the
-- user's runtime instance id (§4.12), which is not an agents row.

ALTER TABLE agents ADD CONSTRAINT agents_id_user_id_key UNIQUE (id, user_id);

-- Refuse (with the table named) rather than silently delete rows that already disagree.
DO $$
DECLARE t text; bad boolean;
BEGIN
  FOREACH t IN ARRAY ARRAY['agent_credentials', 'deployments', 'agent_messages', 'agent_watchdog', 'agent_watchdog_events'] LOOP
    IF EXISTS (SELECT 1 FROM pg_class WHERE relname = t) THEN
      -- EXECUTE does not set FOUND: read the answer INTO a variable
      EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I x JOIN agents a ON a.id = x.agent_id WHERE a.user_id <> x.user_id)', t) INTO bad;
      IF bad THEN
        RAISE EXCEPTION '% has rows whose user_id differs from their agent''s owner: fix them before upgrading', t;
      END IF;
    END IF;
  END LOOP;
END $$;

ALTER TABLE agent_credentials
  DROP CONSTRAINT agent_credentials_agent_id_fkey,
  ADD CONSTRAINT agent_credentials_agent_owner_fkey FOREIGN KEY (agent_id, user_id) REFERENCES agents (id, user_id) ON DELETE CASCADE;
ALTER TABLE deployments
  DROP CONSTRAINT deployments_agent_id_fkey,
  ADD CONSTRAINT deployments_agent_owner_fkey FOREIGN KEY (agent_id, user_id) REFERENCES agents (id, user_id) ON DELETE CASCADE;
ALTER TABLE agent_messages
  DROP CONSTRAINT agent_messages_agent_id_fkey,
  ADD CONSTRAINT agent_messages_agent_owner_fkey FOREIGN KEY (agent_id, user_id) REFERENCES agents (id, user_id) ON DELETE CASCADE;
ALTER TABLE agent_watchdog
  DROP CONSTRAINT agent_watchdog_agent_id_fkey,
  ADD CONSTRAINT agent_watchdog_agent_owner_fkey FOREIGN KEY (agent_id, user_id) REFERENCES agents (id, user_id) ON DELETE CASCADE;
ALTER TABLE agent_watchdog_events
  DROP CONSTRAINT agent_watchdog_events_agent_id_fkey,
  ADD CONSTRAINT agent_watchdog_events_agent_owner_fkey FOREIGN KEY (agent_id, user_id) REFERENCES agents (id, user_id) ON DELETE CASCADE;
