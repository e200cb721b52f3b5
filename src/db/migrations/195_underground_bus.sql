-- Underground message bus (§4.15 POST /api/underground/bus/send, §5 "Message signature").
-- Messages arrive without a session or key, signed by the sending agent's wallet, and name agents
-- of any account, so only the owner connection reads or writes these tables: row-level security
-- with no policy keeps the request role out (migrate.ts grants it every table; see 070, 150).

-- One row per accepted message, keyed by its `messageId`: a replay hits the primary key and is
-- acknowledged without being delivered again. `hash` is the keccak256 the signature covers (a
-- different message under a used messageId is refused, never confused with a replay).
CREATE TABLE underground_bus_messages (
  message_id text PRIMARY KEY CHECK (length(message_id) BETWEEN 1 AND 200),
  hash text NOT NULL,
  action text NOT NULL,
  from_agent_id text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  to_agent_id text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  -- what the BOOKING_/AMPLIFY_ step decided (negotiation state after the message, or the fan-out list)
  step jsonb,
  received_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE underground_bus_messages ENABLE ROW LEVEL SECURITY;

-- The durable delivery jobs: one per (message, recipient); the primary recipient `to` and, for
-- AMPLIFY_ actions, each listed recipient. Written in the same transaction as the message, taken
-- by src/workers/underground-bus.ts with FOR UPDATE SKIP LOCKED, retried with exponential backoff.
-- The unique pair is the "at most once per messageId and recipient" invariant.
CREATE TABLE underground_bus_deliveries (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  message_id text NOT NULL REFERENCES underground_bus_messages (message_id) ON DELETE CASCADE,
  recipient_agent_id text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  -- the recipient's webhook URL when the message was accepted (agent config underground.webhookUrl)
  target text NOT NULL,
  -- the JSON body POSTed to the target
  payload jsonb NOT NULL,
  state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  delivered_at timestamptz,
  CONSTRAINT underground_bus_deliveries_once UNIQUE (message_id, recipient_agent_id)
);
CREATE INDEX underground_bus_deliveries_due ON underground_bus_deliveries (next_attempt_at) WHERE state = 'pending';
ALTER TABLE underground_bus_deliveries ENABLE ROW LEVEL SECURITY;

-- BOOKING_ negotiations: one row per bookingId between two agents, moved by BOOKING_REQUEST
-- (opens), BOOKING_OFFER/BOOKING_COUNTER (new slot and price, one round more), BOOKING_ACCEPT and
-- BOOKING_DECLINE (closed for good). Prices in integer micro-USDC.
CREATE TABLE underground_bus_negotiations (
  booking_id text PRIMARY KEY CHECK (length(booking_id) BETWEEN 1 AND 200),
  initiator_agent_id text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  counterparty_agent_id text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  state text NOT NULL CHECK (state IN ('open', 'accepted', 'declined')),
  slot timestamptz NOT NULL,
  price_micro_usdc bigint NOT NULL CHECK (price_micro_usdc > 0),
  rounds integer NOT NULL DEFAULT 1,
  -- who proposed the current terms: only the other party may accept them
  proposed_by text NOT NULL,
  last_message_id text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE underground_bus_negotiations ENABLE ROW LEVEL SECURITY;
