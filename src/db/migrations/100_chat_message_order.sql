-- The order of a conversation (docs/agents.md "Who stores turns"). Both sides of a turn used to be
-- written in one transaction after the answer, so they shared created_at (now() is the
-- transaction's start) and a history read back in an arbitrary order within each turn: answers
-- before their questions, and that order sent to the model. `seq` is the order in which messages
-- were stored: a turn is stored question first, so the history is in order by `seq` whatever the
-- timestamps say (created_at now holds the question's own time, when it was asked).
ALTER TABLE agent_messages ADD COLUMN seq bigint;
-- Rows stored before: by time, and within a turn (one timestamp) the user's question first.
UPDATE agent_messages m
   SET seq = o.n
  FROM (SELECT id,
               row_number() OVER (ORDER BY created_at, CASE sender WHEN 'user' THEN 0 WHEN 'system' THEN 1 ELSE 2 END, id) AS n
          FROM agent_messages) o
 WHERE m.id = o.id;
ALTER TABLE agent_messages ALTER COLUMN seq SET NOT NULL;
ALTER TABLE agent_messages ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY;
SELECT setval(pg_get_serial_sequence('agent_messages', 'seq'), coalesce((SELECT max(seq) FROM agent_messages), 0) + 1, false);
DROP INDEX agent_messages_agent_idx;
CREATE INDEX agent_messages_agent_seq_idx ON agent_messages (agent_id, seq DESC);
