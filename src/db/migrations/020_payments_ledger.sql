-- Payments ledger (§1 item 5-6, §3 "Other state", §4.4 top-up, §4.8 session billing).
-- Money is integer micro-USD (1 USD = 1 000 000), never a float. docs/payments.md explains the
-- model; the rules below make its invariants hold whatever code path writes:
--   * every movement is one row of ledger_entries, which is append-only (UPDATE, DELETE and
--     TRUNCATE raise);
--   * wallet balances and payment-session remainders change only by inserting a journal row: the
--     journal's trigger applies the row's deltas, and the balance tables refuse any other change,
--     so a balance always equals the sum of its journal rows;
--   * no balance or remainder can go below zero (CHECK), a processor event credits at most once
--     (UNIQUE event_id), a session debit's receipt `session:<id>:<nonce>` is unique (UNIQUE
--     (session_id, nonce)).

-- Off-chain USD balance of a wallet address (lower-case 0x + 40 hex), funded by card top-ups.
-- Not a per-user table: an address may belong to no account (top-ups only need the address).
CREATE TABLE wallet_balances (
  address text PRIMARY KEY CHECK (address ~ '^0x[0-9a-f]{40}$'),
  balance_micros bigint NOT NULL DEFAULT 0 CHECK (balance_micros >= 0),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Pre-funded payment session (§4.8 session billing). The id a client holds is a bearer secret;
-- only its SHA-256 is stored. `id` is the internal reference used by the journal.
CREATE TABLE payment_sessions (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  token_hash bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
  address text NOT NULL CHECK (address ~ '^0x[0-9a-f]{40}$'),
  user_id uuid REFERENCES users (id) ON DELETE SET NULL,
  deposit_micros bigint NOT NULL CHECK (deposit_micros > 0),
  remaining_micros bigint NOT NULL DEFAULT 0 CHECK (remaining_micros >= 0),
  debit_count integer NOT NULL DEFAULT 0 CHECK (debit_count >= 0),
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'closed', 'expired')),
  -- a closed or expired session has returned everything to the wallet
  CHECK (status = 'active' OR remaining_micros = 0),
  expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  ended_at timestamptz
);
CREATE INDEX payment_sessions_address_idx ON payment_sessions (address, created_at DESC);
-- the expiry job's schedule: active sessions by expiry time
CREATE INDEX payment_sessions_expiry_idx ON payment_sessions (expires_at) WHERE status = 'active';

CREATE TABLE ledger_entries (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  kind text NOT NULL CHECK (kind IN ('credit', 'debit', 'session_open', 'session_debit', 'session_close', 'session_expire')),
  address text NOT NULL CHECK (address ~ '^0x[0-9a-f]{40}$'),
  -- signed change of wallet_balances.balance_micros for `address`
  wallet_delta bigint NOT NULL DEFAULT 0,
  session_id uuid REFERENCES payment_sessions (id),
  -- signed change of payment_sessions.remaining_micros for `session_id`
  session_delta bigint NOT NULL DEFAULT 0,
  -- processor event id (credit) or caller reference (debit): each moves money at most once
  event_id text UNIQUE CHECK (length(event_id) BETWEEN 1 AND 255),
  -- session debits: the voucher nonce, the plugin, the platform's EIP-712 receipt signature and the
  -- session's remainder after this debit
  nonce text CHECK (nonce ~ '^[0-9a-f]{32}$'),
  plugin text CHECK (length(plugin) <= 100),
  signature text CHECK (signature ~ '^0x[0-9a-f]+$'),
  remaining_after bigint CHECK (remaining_after >= 0),
  source text CHECK (length(source) <= 100),
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (session_id, nonce),
  CHECK (wallet_delta <> 0 OR session_delta <> 0 OR kind IN ('session_close', 'session_expire')),
  CHECK (session_id IS NOT NULL OR session_delta = 0),
  CHECK (kind <> 'credit' OR (wallet_delta > 0 AND event_id IS NOT NULL AND session_id IS NULL)),
  CHECK (kind <> 'debit' OR (wallet_delta < 0 AND event_id IS NOT NULL AND session_id IS NULL)),
  CHECK (kind <> 'session_open' OR (session_delta > 0 AND wallet_delta = -session_delta)),
  CHECK (kind <> 'session_debit' OR (session_delta < 0 AND wallet_delta = 0 AND nonce IS NOT NULL AND signature IS NOT NULL AND remaining_after IS NOT NULL)),
  CHECK (kind NOT IN ('session_close', 'session_expire') OR (session_delta <= 0 AND wallet_delta = -session_delta))
);
CREATE INDEX ledger_entries_address_idx ON ledger_entries (address, id);
CREATE INDEX ledger_entries_session_idx ON ledger_entries (session_id, id) WHERE session_id IS NOT NULL;

-- Applies a journal row to the balances it moves. Runs as the table owner so the request role
-- needs no direct write path to the balance tables.
CREATE FUNCTION ledger_apply() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = public
  AS $$
DECLARE
  after_remaining bigint;
BEGIN
  IF NEW.wallet_delta <> 0 THEN
    -- UPDATE first: an INSERT's CHECK sees the bare (negative) delta of a debit before any conflict
    UPDATE wallet_balances SET balance_micros = balance_micros + NEW.wallet_delta, updated_at = now() WHERE address = NEW.address;
    IF NOT FOUND THEN
      INSERT INTO wallet_balances AS w (address, balance_micros) VALUES (NEW.address, NEW.wallet_delta)
        ON CONFLICT (address) DO UPDATE SET balance_micros = w.balance_micros + EXCLUDED.balance_micros, updated_at = now();
    END IF;
  END IF;
  IF NEW.session_id IS NOT NULL THEN
    UPDATE payment_sessions SET
        remaining_micros = remaining_micros + NEW.session_delta,
        debit_count = debit_count + CASE WHEN NEW.kind = 'session_debit' THEN 1 ELSE 0 END,
        status = CASE NEW.kind WHEN 'session_close' THEN 'closed' WHEN 'session_expire' THEN 'expired' ELSE status END,
        ended_at = CASE WHEN NEW.kind IN ('session_close', 'session_expire') THEN now() ELSE ended_at END
      WHERE id = NEW.session_id AND address = NEW.address
      RETURNING remaining_micros INTO after_remaining;
    IF NOT FOUND THEN
      RAISE EXCEPTION 'ledger entry for unknown session %', NEW.session_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    IF NEW.remaining_after IS NOT NULL AND NEW.remaining_after <> after_remaining THEN
      RAISE EXCEPTION 'remaining_after % does not match the session remainder %', NEW.remaining_after, after_remaining
        USING ERRCODE = 'check_violation';
    END IF;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER ledger_entries_apply AFTER INSERT ON ledger_entries FOR EACH ROW EXECUTE FUNCTION ledger_apply();

CREATE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ledger_entries is append-only' USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER ledger_entries_no_update BEFORE UPDATE OR DELETE ON ledger_entries FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER ledger_entries_no_truncate BEFORE TRUNCATE ON ledger_entries FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();

-- Balances move only from inside ledger_apply (trigger depth 2: the journal's trigger, then this
-- one). A direct INSERT/UPDATE/DELETE from any code path (depth 1) that changes money raises.
CREATE FUNCTION ledger_guard_wallet() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF pg_trigger_depth() < 2 THEN
    IF TG_OP = 'DELETE' OR TG_OP = 'INSERT' AND NEW.balance_micros <> 0
       OR TG_OP = 'UPDATE' AND (NEW.balance_micros <> OLD.balance_micros OR NEW.address <> OLD.address) THEN
      RAISE EXCEPTION 'wallet balances change only through ledger_entries' USING ERRCODE = 'insufficient_privilege';
    END IF;
  END IF;
  RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END $$;
CREATE TRIGGER wallet_balances_guard BEFORE INSERT OR UPDATE OR DELETE ON wallet_balances FOR EACH ROW EXECUTE FUNCTION ledger_guard_wallet();

CREATE FUNCTION ledger_guard_session() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF pg_trigger_depth() < 2 THEN
    IF TG_OP = 'DELETE'
       OR TG_OP = 'INSERT' AND (NEW.remaining_micros <> 0 OR NEW.debit_count <> 0 OR NEW.status <> 'active')
       OR TG_OP = 'UPDATE' AND (NEW.remaining_micros <> OLD.remaining_micros OR NEW.debit_count <> OLD.debit_count
         OR NEW.status <> OLD.status OR NEW.address <> OLD.address OR NEW.deposit_micros <> OLD.deposit_micros
         OR NEW.id <> OLD.id OR NEW.token_hash <> OLD.token_hash) THEN
      RAISE EXCEPTION 'payment sessions change only through ledger_entries' USING ERRCODE = 'insufficient_privilege';
    END IF;
  END IF;
  RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END $$;
CREATE TRIGGER payment_sessions_guard BEFORE INSERT OR UPDATE OR DELETE ON payment_sessions FOR EACH ROW EXECUTE FUNCTION ledger_guard_session();
