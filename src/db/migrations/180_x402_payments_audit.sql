-- The x402 payment audit (§4.11 "Every payment attempt is audit-logged with user email, amount,
-- currency, recipient and method"). One row per `pay` attempt of a signed-in user, accepted or
-- refused, written before the answer is sent (docs/payments.md "x402"). A payment that reaches the
-- gateway gets two rows under one attempt_id: `attempted` before the call (so a crash or a failed
-- write after the gateway moved money still leaves its trace) and its outcome after it.
--
-- Append-only for the request role: a user may add rows of their own (the route writes them under
-- db.withUser) and read their own, never change or remove one, so a bug or an injection in a
-- request path cannot rewrite the record of a payment. What holds whatever migrate.ts grants
-- (it grants the request role every table after each run; it revokes UPDATE and DELETE on this one,
-- see APPEND_ONLY_TABLES there):
--   * row-level security with INSERT and SELECT policies for the owner only, and no UPDATE or
--     DELETE policy;
--   * a statement trigger that refuses UPDATE and DELETE unless the current role has the rights
--     of the table's owner (owner_connection_only() from 070), so even a role granted UPDATE gets
--     an error instead of a silent "0 rows".
-- No foreign key to users: the record outlives the account it names (the email is kept as it was).
CREATE TABLE x402_payments_audit (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  attempt_id uuid NOT NULL,
  user_id uuid NOT NULL,
  user_email text NOT NULL CHECK (length(user_email) BETWEEN 1 AND 320),
  agent_id text CHECK (length(agent_id) <= 200),
  -- null when the request's amount was not a finite number (refused with `Invalid amount`)
  amount numeric(20, 6),
  currency text CHECK (length(currency) <= 64),
  recipient text CHECK (length(recipient) <= 200),
  endpoint text CHECK (length(endpoint) <= 200),
  method text CHECK (length(method) <= 64),
  -- attempted: about to call the gateway; accepted: it answered 2xx; refused: our validation said
  -- no (error says why); failed: the gateway refused, failed or could not be reached
  outcome text NOT NULL CHECK (outcome IN ('attempted', 'accepted', 'refused', 'failed')),
  error text CHECK (length(error) <= 500),
  -- the upstream's HTTP status, when it answered
  upstream_status integer,
  -- whether the upstream asked for an x402 payment (HTTP 402) that the platform's payer signed
  x402_paid boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX x402_payments_audit_user_idx ON x402_payments_audit (user_id, created_at DESC);
CREATE INDEX x402_payments_audit_attempt_idx ON x402_payments_audit (attempt_id);
ALTER TABLE x402_payments_audit ENABLE ROW LEVEL SECURITY;
CREATE POLICY x402_payments_audit_insert_own ON x402_payments_audit FOR INSERT WITH CHECK (user_id = app_user_id());
CREATE POLICY x402_payments_audit_select_own ON x402_payments_audit FOR SELECT USING (user_id = app_user_id());
CREATE TRIGGER x402_payments_audit_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON x402_payments_audit
  FOR EACH STATEMENT EXECUTE FUNCTION owner_connection_only();
