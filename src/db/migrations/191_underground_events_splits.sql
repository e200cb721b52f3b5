-- Underground events (§2 "Underground event") and royalty splits (§2 "Royalty split", §4.15).
-- Both belong to an agent and its user by the (agent, user) pair (the 060 pattern) and are kept to
-- their owner by row-level security on user_id.

CREATE TABLE underground_events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  agent_id text NOT NULL,
  user_id uuid NOT NULL,
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  description text NOT NULL CHECK (length(description) BETWEEN 1 AND 5000),
  venue text NOT NULL CHECK (length(venue) BETWEEN 1 AND 200),
  event_date timestamptz NOT NULL,
  -- a decimal USDC string as given (§2: a string), at most 6 decimals like the token itself
  ticket_price_usdc text NOT NULL CHECK (ticket_price_usdc ~ '^[0-9]{1,7}(\.[0-9]{1,6})?$'),
  total_tickets integer NOT NULL CHECK (total_tickets BETWEEN 1 AND 1000000),
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT underground_events_agent_owner_fkey
    FOREIGN KEY (agent_id, user_id) REFERENCES agents (id, user_id) ON DELETE CASCADE
);
CREATE INDEX underground_events_user_date ON underground_events (user_id, event_date DESC, id DESC);
CREATE INDEX underground_events_agent ON underground_events (agent_id);
ALTER TABLE underground_events ENABLE ROW LEVEL SECURITY;
CREATE POLICY underground_events_owner ON underground_events
  USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());

-- A split records how totalAmount is divided: each recipient's amount in integer micro-USDC, the
-- amounts summing exactly to the total (the service computes them; docs/underground.md). The
-- idempotency key is unique per user, so parallel retries of one request create one split.
CREATE TABLE underground_splits (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  agent_id text NOT NULL,
  user_id uuid NOT NULL,
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  total_micros bigint NOT NULL CHECK (total_micros > 0),
  status text NOT NULL DEFAULT 'completed' CHECK (status IN ('completed')),
  idempotency_key text CHECK (length(idempotency_key) BETWEEN 1 AND 200),
  -- sha-256 of the request the key was first used with: the same key with another request is refused
  request_hash text,
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT underground_splits_agent_owner_fkey
    FOREIGN KEY (agent_id, user_id) REFERENCES agents (id, user_id) ON DELETE CASCADE,
  CONSTRAINT underground_splits_idempotency UNIQUE (user_id, idempotency_key),
  CONSTRAINT underground_splits_id_user UNIQUE (id, user_id)
);
CREATE INDEX underground_splits_agent ON underground_splits (agent_id);
ALTER TABLE underground_splits ENABLE ROW LEVEL SECURITY;
CREATE POLICY underground_splits_owner ON underground_splits
  USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());

CREATE TABLE underground_split_recipients (
  split_id bigint NOT NULL,
  user_id uuid NOT NULL,
  position integer NOT NULL CHECK (position >= 0),
  address text NOT NULL CHECK (address ~ '^0x[0-9a-f]{40}$'),
  -- the share in basis points (a percentage with at most 2 decimals × 100)
  share_bps integer NOT NULL CHECK (share_bps BETWEEN 1 AND 10000),
  amount_micros bigint NOT NULL CHECK (amount_micros >= 0),
  PRIMARY KEY (split_id, position),
  CONSTRAINT underground_split_recipients_split_fkey
    FOREIGN KEY (split_id, user_id) REFERENCES underground_splits (id, user_id) ON DELETE CASCADE
);
ALTER TABLE underground_split_recipients ENABLE ROW LEVEL SECURITY;
CREATE POLICY underground_split_recipients_owner ON underground_split_recipients
  USING (user_id = app_user_id()) WITH CHECK (user_id = app_user_id());
