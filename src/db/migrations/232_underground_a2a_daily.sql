-- The §2 daily cap on agent-to-agent messages (A2A messages/day by plan: 100, 500, 2,000, 10,000),
-- counted per account: the owner of the sending agent, whose plan sets the cap, for one UTC day
-- (docs/underground.md "Daily cap"). The bus adds a message's recipients in the transaction that
-- records it, with one conditional upsert (`sent + n <= cap`), so concurrent sends on every
-- replica never pass the cap and a message that is not recorded (a replay, a refusal) is not
-- counted. Owner connection only, like the other bus tables (195): row-level security without a
-- policy keeps the request role out.
CREATE TABLE underground_a2a_daily (
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  day date NOT NULL,
  sent integer NOT NULL CHECK (sent > 0),
  PRIMARY KEY (user_id, day)
);
ALTER TABLE underground_a2a_daily ENABLE ROW LEVEL SECURITY;
