-- Who moved money by hand, and why (docs/payments.md "Credits by an admin"; docs/admin.md).
-- An admin's credit (POST /api/admin/users/:id/credit, `npm run admin -- credit`) is an ordinary
-- journal `credit` row with source `admin_credit`; these two columns carry the admin's note and
-- the admin's account id into the journal, so the credit explains itself to the user (the wallet
-- page's journal) and to an audit.
--   * `actor_user_id` has no foreign key on purpose: the journal is append-only (020), so an
--     ON DELETE action could not run, and deleting an account must not rewrite history anyway.
--   * `note` is bounded like every other text of the journal.
ALTER TABLE ledger_entries ADD COLUMN note text CHECK (length(note) BETWEEN 1 AND 500);
ALTER TABLE ledger_entries ADD COLUMN actor_user_id uuid;
-- an admin credit always names its admin
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_admin_credit_actor
  CHECK (source IS DISTINCT FROM 'admin_credit' OR (kind = 'credit' AND actor_user_id IS NOT NULL));
