-- Payment sessions, second part (§4.8 session billing, docs/payments.md):
--  * `session_refund`: a debit whose plugin call failed is given back once (UNIQUE event_id
--    `refund:<journal id>`) to the session while it is active, otherwise to the wallet;
--  * a session opened by an EIP-712 signature records the signature's salt: UNIQUE per address,
--    so a signed authorisation opens at most one session.
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_kind_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_kind_check
  CHECK (kind IN ('credit', 'debit', 'session_open', 'session_debit', 'session_close', 'session_expire', 'session_refund'));
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_refund_check
  CHECK (kind <> 'session_refund' OR (session_id IS NOT NULL AND event_id IS NOT NULL AND wallet_delta >= 0 AND session_delta >= 0
    AND wallet_delta + session_delta > 0 AND (wallet_delta = 0 OR session_delta = 0)));

ALTER TABLE payment_sessions ADD COLUMN open_salt text CHECK (open_salt ~ '^0x[0-9a-f]{64}$');
ALTER TABLE payment_sessions ADD CONSTRAINT payment_sessions_open_salt_key UNIQUE (address, open_salt);
