-- MPP payments (§4.8 `Authorization: Payment <credential>`, docs/payments.md): each challenge
-- nonce and each chain transaction pays at most one gateway call, whatever races.
CREATE TABLE mpp_payments (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  challenge_nonce text NOT NULL UNIQUE CHECK (length(challenge_nonce) BETWEEN 1 AND 512),
  tx_hash text NOT NULL UNIQUE CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
  credential_hash bytea NOT NULL UNIQUE CHECK (length(credential_hash) = 32),
  payer text CHECK (payer ~ '^0x[0-9a-f]{40}$'),
  amount_micros bigint NOT NULL CHECK (amount_micros > 0),
  plugin text NOT NULL CHECK (length(plugin) <= 100),
  created_at timestamptz NOT NULL DEFAULT now()
);
-- append-only, like the ledger: a spent credential can never be un-spent
CREATE TRIGGER mpp_payments_no_update BEFORE UPDATE OR DELETE ON mpp_payments FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
