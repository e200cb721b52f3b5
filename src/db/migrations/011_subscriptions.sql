-- Subscriptions through the card processor (§2 Plans, docs/payments.md "Subscriptions"):
-- each processor event changes a user at most once (UNIQUE event id), and an event older than
-- the last one applied to that user's subscription changes nothing (out-of-order deliveries).
CREATE TABLE billing_events (
  event_id text PRIMARY KEY,
  type text NOT NULL,
  user_id uuid REFERENCES users (id) ON DELETE SET NULL,
  received_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE billing_events ENABLE ROW LEVEL SECURITY; -- system data: owner connection only

ALTER TABLE users ADD COLUMN subscription_event_at timestamptz;
CREATE INDEX users_subscription_id_idx ON users (subscription_id) WHERE subscription_id IS NOT NULL;
