-- Calendar connect states already used (§4.6; docs/calendar.md "How a connection works"). A state is single
-- use: the callback records its nonce here before exchanging the code, and the primary key
-- decides, so the same state (even with a copy of the browser's state cookie, even in two
-- parallel callbacks) connects once. Rows are kept until the state expires; the callback deletes
-- the user's expired rows as it goes, so the table holds at most the last 10 minutes of connects.
--
-- Written under db.withUser by the signed-in user the state names: row-level security keeps each
-- user to their own rows.
CREATE TABLE calendar_spent_states (
  nonce text PRIMARY KEY CHECK (length(nonce) BETWEEN 1 AND 64),
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  expires_at timestamptz NOT NULL
);
CREATE INDEX calendar_spent_states_user_idx ON calendar_spent_states (user_id, expires_at);
ALTER TABLE calendar_spent_states ENABLE ROW LEVEL SECURITY;
CREATE POLICY calendar_spent_states_owner ON calendar_spent_states
  USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());
