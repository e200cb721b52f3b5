-- The money tables are system data (docs/payments.md "Who may touch the money tables"): wallet
-- balances are keyed by address and reached by processor webhooks, payment-session bearers and MPP
-- credentials, none of which is a signed-in user, so the ledger code runs on the owner connection
-- and no request (platform_app, or platform_request after a smuggled RESET ROLE) has any business
-- reading or writing them. A SQL injection or logic bug in a request path must neither list every
-- wallet's journal nor mint money.
--
-- migrate.ts grants platform_app every table of the schema after each run, so a REVOKE here would
-- be undone at once. What holds whatever the grants say:
--   * row-level security with no policy: a role that does not own the table sees no rows, and
--     its INSERT is refused (the owner is not subject to it; FORCE is deliberately not set);
--   * a statement trigger that refuses INSERT, UPDATE and DELETE unless the current role has the
--     rights of the table's owner (the journal's SECURITY DEFINER trigger and foreign-key actions
--     run as the owner, so they pass).
ALTER TABLE ledger_entries ENABLE ROW LEVEL SECURITY;
ALTER TABLE wallet_balances ENABLE ROW LEVEL SECURITY;
ALTER TABLE payment_sessions ENABLE ROW LEVEL SECURITY;
ALTER TABLE mpp_payments ENABLE ROW LEVEL SECURITY;
ALTER TABLE billing_events ENABLE ROW LEVEL SECURITY;

CREATE FUNCTION owner_connection_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'USAGE') THEN
    RAISE EXCEPTION 'permission denied for table %: money tables are written by the owner connection only', TG_TABLE_NAME
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER ledger_entries_owner_only BEFORE INSERT OR UPDATE OR DELETE ON ledger_entries
  FOR EACH STATEMENT EXECUTE FUNCTION owner_connection_only();
CREATE TRIGGER wallet_balances_owner_only BEFORE INSERT OR UPDATE OR DELETE ON wallet_balances
  FOR EACH STATEMENT EXECUTE FUNCTION owner_connection_only();
CREATE TRIGGER payment_sessions_owner_only BEFORE INSERT OR UPDATE OR DELETE ON payment_sessions
  FOR EACH STATEMENT EXECUTE FUNCTION owner_connection_only();
CREATE TRIGGER mpp_payments_owner_only BEFORE INSERT OR UPDATE OR DELETE ON mpp_payments
  FOR EACH STATEMENT EXECUTE FUNCTION owner_connection_only();
CREATE TRIGGER billing_events_owner_only BEFORE INSERT OR UPDATE OR DELETE ON billing_events
  FOR EACH STATEMENT EXECUTE FUNCTION owner_connection_only();
