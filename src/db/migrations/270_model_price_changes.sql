-- Who priced which model, and when (docs/payments.md "Model calls from the balance"; docs/admin.md
-- "Model prices"): every price an admin sets or removes on the admin page is one row here, written
-- in the transaction that changes model_prices, as an admin's credit is a journal row naming its
-- admin (migration 120). Append-only: a change is never rewritten nor deleted.
--   * `actor_user_id` has no foreign key on purpose, as ledger_entries.actor_user_id: history
--     outlives the account that made it.
--   * both prices null: the admin page's price was removed (MODEL_PRICES or the catalogue's applies again).
CREATE TABLE model_price_changes (
  id bigserial PRIMARY KEY,
  model_id text NOT NULL CHECK (length(model_id) BETWEEN 1 AND 200),
  input_per_m numeric(20, 10) CHECK (input_per_m >= 0 AND input_per_m <= 100000),
  output_per_m numeric(20, 10) CHECK (output_per_m >= 0 AND output_per_m <= 100000),
  actor_user_id uuid NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((input_per_m IS NULL) = (output_per_m IS NULL))
);
CREATE INDEX model_price_changes_created_idx ON model_price_changes (created_at DESC);
ALTER TABLE model_price_changes ENABLE ROW LEVEL SECURITY;
CREATE TRIGGER model_price_changes_owner_only BEFORE INSERT OR UPDATE OR DELETE ON model_price_changes
  FOR EACH STATEMENT EXECUTE FUNCTION owner_connection_only();
CREATE FUNCTION model_price_changes_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'model_price_changes is append-only' USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER model_price_changes_no_update BEFORE UPDATE OR DELETE ON model_price_changes
  FOR EACH ROW EXECUTE FUNCTION model_price_changes_append_only();
